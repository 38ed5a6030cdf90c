package outputtail

import "strings"

// Redact returns s redacted as a Tail redacts output, line by line: for
// text that is not output, such as a failed task's message. Unlike a Tail it
// keeps every byte that is not part of a secret, \r included, cuts no line
// and does not sanitize: text that reaches a terminal goes through Sanitize
// after Redact.
func Redact(s string, secrets []string) string {
	t := New(Options{Limit: 1, Secrets: secrets})
	if len(t.secrets) == 0 {
		return s
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		b := []byte(l)
		t.findSpans(b)
		if len(t.spans) > 0 {
			t.inRun = false
			lines[i] = string(t.render(b, 0, len(b)))
		}
	}
	return strings.Join(lines, "\n")
}
