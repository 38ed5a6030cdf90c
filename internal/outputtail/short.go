package outputtail

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// ShortSecret reports whether a secret holds a line of 1 to MinSecret-1
// bytes (a trailing \r is not part of a line): such a line is never
// redacted, so the secret would show in the output.
func ShortSecret(s string) bool {
	for _, line := range strings.Split(s, "\n") {
		if n := len(strings.TrimSuffix(line, "\r")); n > 0 && n < MinSecret {
			return true
		}
	}
	return false
}

// ShortSecretValue returns where, in a secret JSON document, the first
// string or number leaf that SecretValues would leave unredacted is (as
// "key.list[0]"), and "" when there is none. Keys are visited sorted.
func ShortSecretValue(doc string) string {
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return ""
	}
	type item struct {
		at string
		v  any
	}
	stack := []item{{"", v}}
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		switch x := it.v.(type) {
		case map[string]any:
			keys := slices.Sorted(maps.Keys(x))
			for i := len(keys) - 1; i >= 0; i-- {
				at := keys[i]
				if it.at != "" {
					at = it.at + "." + at
				}
				stack = append(stack, item{at, x[keys[i]]})
			}
		case []any:
			for i := len(x) - 1; i >= 0; i-- {
				stack = append(stack, item{fmt.Sprintf("%s[%d]", it.at, i), x[i]})
			}
		case string:
			if ShortSecret(x) {
				return it.at
			}
		case json.Number:
			if len(x) < MinSecret {
				return it.at
			}
		}
	}
	return ""
}
