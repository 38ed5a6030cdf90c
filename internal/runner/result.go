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
// message or in set_stats. The failed tasks' text is also sanitized, as
// the output is, for the diagnostics and terraform show that print it; the
// artifacts are data, JSON that Terraform prints escaped.
func redactResult(r bundle.Result, secrets []string) ([]bundle.FailedTask, int64, string) {
	tasks := slices.Clone(r.FailedTasks)
	for i, t := range tasks {
		tasks[i] = bundle.FailedTask{
			Host: clean(t.Host, secrets), Task: clean(t.Task, secrets), Message: clean(t.Message, secrets),
			Unreachable: t.Unreachable,
		}
	}
	return tasks, r.FailedTaskCount, redactJSON(r.Artifacts, secrets)
}

// redactCheck returns c with its text redacted and sanitized as the output
// is: a secret a template renders shows in its diff.
func redactCheck(c *bundle.Check, secrets []string) *bundle.Check {
	if c == nil {
		return nil
	}
	out := &bundle.Check{ChangeCount: c.ChangeCount, NotCheckable: c.NotCheckable, Changes: slices.Clone(c.Changes)}
	for i, ch := range out.Changes {
		ch.Host, ch.Task, ch.Action = clean(ch.Host, secrets), clean(ch.Task, secrets), clean(ch.Action, secrets)
		if ch.DiffSize > 0 {
			// The cut may fall inside a secret: drop the cut line whole.
			if i := strings.LastIndexByte(ch.Diff, '\n'); i >= 0 {
				ch.Diff = ch.Diff[:i+1]
			} else {
				ch.Diff = ""
			}
		}
		ch.Diff = clean(ch.Diff, secrets)
		out.Changes[i] = ch
	}
	return out
}

// clean redacts, then sanitizes, text from the pod.
func clean(s string, secrets []string) string {
	return outputtail.Sanitize(outputtail.Redact(s, secrets))
}

// redactHosts returns hosts keyed by their names redacted and sanitized,
// as failed_tasks[].host is; hosts whose names become the same add up.
func redactHosts(hosts map[string]bundle.HostStats, secrets []string) map[string]bundle.HostStats {
	if hosts == nil {
		return nil
	}
	out := make(map[string]bundle.HostStats, len(hosts))
	for name, s := range hosts {
		k := clean(name, secrets)
		o := out[k]
		out[k] = bundle.HostStats{OK: o.OK + s.OK, Changed: o.Changed + s.Changed, Unreachable: o.Unreachable + s.Unreachable,
			Failed: o.Failed + s.Failed, Skipped: o.Skipped + s.Skipped, Rescued: o.Rescued + s.Rescued, Ignored: o.Ignored + s.Ignored}
	}
	return out
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
