package runner

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/outputtail"
)

// redactResult returns r's failed tasks and artifacts with the secrets
// redacted, as the output is: a playbook may put a secret in a failure's
// message or in set_stats.
func redactResult(r bundle.Result, secrets []string) ([]bundle.FailedTask, int64, string) {
	tasks := slices.Clone(r.FailedTasks)
	for i, t := range tasks {
		tasks[i] = bundle.FailedTask{
			Host: outputtail.Redact(t.Host, secrets), Task: outputtail.Redact(t.Task, secrets),
			Message: outputtail.Redact(t.Message, secrets), Unreachable: t.Unreachable,
		}
	}
	return tasks, r.FailedTaskCount, redactJSON(r.Artifacts, secrets)
}

// redactJSON redacts a JSON document leaf by leaf, keys included, so that it
// stays JSON: a number that is a secret becomes the string
// outputtail.Redacted. A document that does not parse is redacted as text.
func redactJSON(doc string, secrets []string) string {
	if doc == "" || len(secrets) == 0 {
		return doc
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(doc)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return outputtail.Redact(doc, secrets)
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false) // as the callback wrote it
	if err := enc.Encode(redactValue(v, secrets)); err != nil {
		return outputtail.Redact(doc, secrets)
	}
	return strings.TrimSuffix(out.String(), "\n")
}

func redactValue(v any, secrets []string) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for _, k := range slices.Sorted(maps.Keys(x)) {
			m[outputtail.Redact(k, secrets)] = redactValue(x[k], secrets)
		}
		return m
	case []any:
		for i := range x {
			x[i] = redactValue(x[i], secrets)
		}
		return x
	case string:
		return outputtail.Redact(x, secrets)
	case json.Number:
		if outputtail.Redact(x.String(), secrets) != x.String() {
			return outputtail.Redacted
		}
	}
	return v
}
