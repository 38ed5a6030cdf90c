package outputtail

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// colorCodes are the codes Terraform's CLI turns into terminal escape
// sequences when it prints a diagnostic's detail: it runs each line through
// mitchellh/colorstring, which replaces "[name]" for every name of its
// DefaultColors. colorstring has no escape ("[[red]" still colors), so a
// code is neutralized by replacing its "[" with "［" (U+FF3B).
var colorCodes = func() map[string]bool {
	m := map[string]bool{}
	for _, c := range []string{"default", "black", "red", "green", "yellow", "blue", "magenta", "cyan", "light_gray",
		"dark_gray", "light_red", "light_green", "light_yellow", "light_blue", "light_magenta", "light_cyan", "white",
		"bold", "dim", "underline", "blink_slow", "blink_fast", "invert", "hidden", "reset", "reset_bold"} {
		m[c], m["_"+c+"_"] = true, true // "_red_" is the background
	}
	return m
}()

// maxColorCode is the longest name in colorCodes.
const maxColorCode = len("_light_magenta_")

// Sanitize makes text from a run pod safe to show on a terminal and in
// Terraform's output: every C0 control but tab and newline becomes its
// Unicode control picture (ESC is "␛", CR "␍"; a CR before a newline is
// dropped), DEL becomes "␡", C1 controls and bidirectional overrides
// become "\u009b"-style text, bytes that are not UTF-8 become U+FFFD, and
// colorstring codes such as "[red]" or "[reset]" lose their "[" to "［".
// Nothing of the text is dropped but a CRLF's CR, and Sanitize of its own
// result changes nothing.
func Sanitize(s string) string {
	i := 0
	for i < len(s) && safeASCII(s, i) {
		i++
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case safeASCII(s, i):
				b.WriteByte(c)
			case c == '\r' && i+1 < len(s) && s[i+1] == '\n':
			case c == 0x7f:
				b.WriteString("\u2421")
			case c == '[':
				b.WriteString("\uff3b")
			default:
				b.WriteRune(0x2400 + rune(c))
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteRune(utf8.RuneError)
		case r <= 0x9f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// safeASCII reports whether s[i], an ASCII byte, is kept as it is: a
// printable byte, a tab or a newline, and a "[" that opens no color code.
func safeASCII(s string, i int) bool {
	c := s[i]
	switch {
	case c == '\t' || c == '\n':
		return true
	case c < 0x20 || c >= 0x7f:
		return false
	case c == '[':
		return !isColorCode(s[i:])
	}
	return true
}

// isColorCode reports whether s starts with a colorstring code, in any
// case (colorstring matches its pattern case-insensitively).
func isColorCode(s string) bool {
	end := strings.IndexByte(s[1:min(len(s), maxColorCode+2)], ']')
	return end > 0 && colorCodes[strings.ToLower(s[1:1+end])]
}
