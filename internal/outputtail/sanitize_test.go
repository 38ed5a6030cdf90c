package outputtail

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// colorstringRe is mitchellh/colorstring's pattern; codes are the names of
// its DefaultColors (v0.0.0-20190213212951-d06e56a500db, Terraform's).
var colorstringRe = regexp.MustCompile(`(?i)\[[a-z0-9_-]+\]`)

var colorstringCodes = strings.Fields("default _default_ black red green yellow blue magenta cyan light_gray dark_gray " +
	"light_red light_green light_yellow light_blue light_magenta light_cyan white _black_ _red_ _green_ _yellow_ " +
	"_blue_ _magenta_ _cyan_ _light_gray_ _dark_gray_ _light_red_ _light_green_ _light_yellow_ _light_blue_ " +
	"_light_magenta_ _light_cyan_ _white_ bold dim underline blink_slow blink_fast invert hidden reset reset_bold")

// unsafeFor reports what in s a terminal or Terraform's colorstring would
// act on: a C0 control but tab and newline, DEL, a C1 control, a bidi
// override, a byte that is not UTF-8, or a colorstring code.
func unsafeFor(s string) string {
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\ufffd"):
			return "a byte that is not UTF-8"
		case r < 0x20 && r != '\t' && r != '\n', r >= 0x7f && r <= 0x9f:
			return "a control"
		case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			return "a bidi override"
		}
	}
	for _, m := range colorstringRe.FindAllString(s, -1) {
		for _, c := range colorstringCodes {
			if strings.EqualFold(m[1:len(m)-1], c) {
				return "the colorstring code " + m
			}
		}
	}
	return ""
}

func TestSanitize(t *testing.T) {
	for in, want := range map[string]string{
		"ok: [web-1] => {\"msg\": \"hi\"}\n\tindented": "ok: [web-1] => {\"msg\": \"hi\"}\n\tindented",
		"\x1b]52;c;Y3VybCBldmlsfHNo\x07":               "␛]52;c;Y3VybCBldmlsfHNo␇",
		"\x1b[2J\x1b[Hclean":                           "␛[2J␛[Hclean",
		"progress 10%\rprogress 99%":                   "progress 10%␍progress 99%",
		"windows line\r\nnext":                         "windows line\nnext",
		"[red]FAILED[reset] [bold]x[reset_bold]":       "［red]FAILED［reset] ［bold]x［reset_bold]",
		"[RED]a [_red_]b [[red]c [redd] [x]":           "［RED]a ［_red_]b [［red]c [redd] [x]",
		"del\x7f c1\u009b[31m nel\u0085 bidi\u202e":    `del␡ c1\u009b[31m nel\u0085 bidi\u202e`,
		"bad \xff\xfe utf8 \xc3":                       "bad \ufffd\ufffd utf8 \ufffd",
		"nul\x00 bel\x07 bs\x08 vt\x0b ff\x0c":         "nul␀ bel␇ bs␈ vt␋ ff␌",
		"[":                                            "[",
		"[red":                                         "[red",
		"ünïcödé ✓ 日本":                                 "ünïcödé ✓ 日本",
	} {
		got := Sanitize(in)
		if got != want {
			t.Errorf("Sanitize(%q)\n got %q\nwant %q", in, got, want)
		}
		if why := unsafeFor(got); why != "" {
			t.Errorf("Sanitize(%q) = %q holds %s", in, got, why)
		}
		if again := Sanitize(got); again != got {
			t.Errorf("Sanitize is not idempotent on %q: %q", got, again)
		}
	}
}

// The tail kept for state, every line handed on (logs, action progress)
// and Redact's text (failed tasks) are sanitized.
func TestTailSanitizes(t *testing.T) {
	var lines []string
	tl := New(Options{Limit: 1 << 10, Secrets: []string{"s3cr3t"},
		OnLine: func(l string) { lines = append(lines, l) }})
	_, _ = tl.Write([]byte("TASK [x] \x1b]52;c;ZXZpbA==\x07 [red]s3cr3t\x1b[2J\r\nok\rfake\n"))
	_ = tl.Close()
	for _, s := range append(lines, tl.String()) {
		if why := unsafeFor(s); why != "" {
			t.Errorf("%q holds %s", s, why)
		}
	}
	if want := "TASK [x] ␛]52;c;ZXZpbA==␇ ［red](sensitive value)␛[2J\nok␍fake\n"; tl.String() != want {
		t.Errorf("tail %q, want %q", tl.String(), want)
	}
	// A tail whose controls grow it past its limit is cut back to it.
	small := New(Options{Limit: 16})
	_, _ = small.Write([]byte(strings.Repeat("\x1b", 40)))
	_ = small.Close()
	if got := small.String(); len(got) > 16 || unsafeFor(got) != "" || !utf8.ValidString(got) {
		t.Errorf("small tail %q (%d bytes)", got, len(got))
	}
}

// FuzzSanitize: whatever the text, the sanitized text holds nothing a
// terminal or colorstring acts on, is valid UTF-8, keeps every printable
// ASCII byte but a code's "[" in order, and is its own sanitized form.
func FuzzSanitize(f *testing.F) {
	for _, s := range []string{"\x1b]52;c;ZXZpbA==\x07", "\x1b[2J", "a\rb", "[red]x[reset]", "[[bold]]", "\u009b31m",
		"\xc2\x9b", "\xff", "[_light_magenta_]", "[RESET]", "\u202eabc", "tab\there\r\n", "[\x1b[red]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Sanitize(s)
		if why := unsafeFor(got); why != "" {
			t.Fatalf("Sanitize(%q) = %q holds %s", s, got, why)
		}
		if !utf8.ValidString(got) {
			t.Fatalf("Sanitize(%q) = %q is not UTF-8", s, got)
		}
		if again := Sanitize(got); again != got {
			t.Fatalf("Sanitize(%q) = %q, again %q", s, got, again)
		}
		keep := func(x string) string {
			return strings.Map(func(r rune) rune {
				if r > 0x20 && r < 0x7f && r != '[' && r != '\\' {
					return r
				}
				return -1
			}, x)
		}
		// Every printable ASCII byte survives, in order (the escapes add
		// only "\uXXXX" text, which keep drops the backslash of).
		if k, g := keep(s), keep(got); !isSubsequence(k, g) {
			t.Fatalf("Sanitize(%q) = %q lost text", s, got)
		}
	})
}

func isSubsequence(sub, s string) bool {
	for i := 0; i < len(sub); i++ {
		j := strings.IndexByte(s, sub[i])
		if j < 0 {
			return false
		}
		s = s[j+1:]
	}
	return true
}
