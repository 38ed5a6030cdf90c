package outputtail

import "testing"

func TestShortSecret(t *testing.T) {
	for s, want := range map[string]bool{"": false, "a": true, "ab": true, "abc": false, "abc\nd": true,
		"abc\r\ndef\r\n": false, "abc\n\ndef": false, "ab\r": true} {
		if got := ShortSecret(s); got != want {
			t.Errorf("ShortSecret(%q) = %v", s, got)
		}
	}
	for doc, want := range map[string]string{
		`{"token":"long-enough","pin":42}`: "pin", `{"a":{"b":["xyz","q"]}}`: "a.b[1]", `{"ok":true,"n":null,"s":""}`: "",
		`{"pin":4815}`: "", `not json`: "",
	} {
		if got := ShortSecretValue(doc); got != want {
			t.Errorf("ShortSecretValue(%s) = %q, want %q", doc, got, want)
		}
	}
}
