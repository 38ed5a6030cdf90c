package outputtail

import (
	"strings"
	"testing"
)

// TestRedactMatchesTail: Redact gives what a Tail gives for the same text,
// line by line, but keeps \r and long lines whole.
func TestRedactMatchesTail(t *testing.T) {
	secrets := []string{"abcab", "cabx", "multi\nline-secret", "zz"}
	for _, s := range []string{
		"", "no secret", "abcabcabx and abcab", "a line-secret\nmulti\nzz", "x\r\nabcab\r",
		strings.Repeat("y", DefaultMaxLine*2) + "abcab",
	} {
		var lines []string
		tl := New(Options{Limit: 1 << 20, MaxLine: len(s) + 1, Secrets: secrets, OnLine: func(l string) { lines = append(lines, l) }})
		_, _ = tl.Write([]byte(strings.ReplaceAll(s, "\r", "")))
		_ = tl.Close()
		want := strings.Join(lines, "\n")
		if got := Redact(strings.ReplaceAll(s, "\r", ""), secrets); got != want {
			t.Errorf("Redact(%.40q) = %.80q, want %.80q", s, got, want)
		}
		if got := Redact(s, secrets); strings.Count(got, "\r") != strings.Count(s, "\r") {
			t.Errorf("Redact(%q) = %q dropped a \\r", s, got)
		}
	}
	if got := Redact("abcab", nil); got != "abcab" {
		t.Errorf("no secrets: %q", got)
	}
}
