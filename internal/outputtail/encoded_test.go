package outputtail

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

var b64Encodings = map[string]*base64.Encoding{
	"std": base64.StdEncoding, "std-raw": base64.RawStdEncoding, "url": base64.URLEncoding, "url-raw": base64.RawURLEncoding,
}

// encodings are the forms of secret embedded in a stream (pre and post
// around it) that a playbook or a tool may print.
func encodings(secret, pre, post string) map[string]string {
	out := map[string]string{
		"raw":               pre + secret + post,
		"query-escape":      url.QueryEscape(pre + secret + post),
		"path-escape":       url.PathEscape(pre + secret + post),
		"all-percent":       percentAll(pre+secret+post, "%%%02X"),
		"all-percent-lower": percentAll(pre+secret+post, "%%%02x"),
	}
	for name, enc := range b64Encodings {
		out["base64-"+name] = enc.EncodeToString([]byte(pre + secret + post))
	}
	return out
}

func percentAll(s, format string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, format, s[i])
	}
	return b.String()
}

// revealed reports a form in which out still holds secret: raw; decoded
// leniently from percent-encoding ("%XX" in any case, "+" as space); or
// base64-decoded, with either alphabet, from any run of base64 characters
// at any of its four offsets. The placeholder counts as no text at all.
func revealed(out, secret string) string {
	out = strings.ReplaceAll(out, Redacted, "\x00")
	if strings.Contains(secret, "\x00") {
		return ""
	}
	if strings.Contains(out, secret) {
		return "raw"
	}
	if strings.Contains(percentDecode(out), secret) {
		return "percent-encoded"
	}
	for _, alpha := range []string{"+/", "-_"} {
		for _, run := range b64Runs(out, alpha) {
			for off := 0; off < 4; off++ {
				for _, dec := range decodeGroups(run[min(off, len(run)):], alpha) {
					if bytes.Contains(dec, []byte(secret)) {
						return "base64 (" + alpha + ")"
					}
				}
			}
		}
	}
	return ""
}

func percentDecode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, ok := hexByte(s[i+1], s[i+2]); ok {
				b.WriteByte(v)
				i += 2
				continue
			}
		}
		if s[i] == '+' {
			b.WriteByte(' ')
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// b64Runs splits s into maximal runs of the alphabet's characters and "=".
func b64Runs(s, alpha string) []string {
	return strings.FieldsFunc(s, func(r rune) bool {
		isB64 := r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '=' ||
			r == rune(alpha[0]) || r == rune(alpha[1])
		return !isB64
	})
}

// decodeGroups decodes run four characters at a time; a group that does
// not decode (padding inside, a partial last group) ends a piece.
func decodeGroups(run, alpha string) [][]byte {
	enc := base64.StdEncoding
	if alpha == "-_" {
		enc = base64.URLEncoding
	}
	var pieces [][]byte
	var cur []byte
	for i := 0; i+4 <= len(run); i += 4 {
		d, err := enc.DecodeString(run[i : i+4])
		if err != nil {
			pieces, cur = append(pieces, cur), nil
			continue
		}
		cur = append(cur, d...)
		if len(d) < 3 {
			pieces, cur = append(pieces, cur), nil
		}
	}
	// A last partial group decodes as unpadded.
	if rest := len(run) % 4; rest >= 2 {
		raw := base64.RawStdEncoding
		if alpha == "-_" {
			raw = base64.RawURLEncoding
		}
		if d, err := raw.DecodeString(run[len(run)-rest:]); err == nil {
			cur = append(cur, d...)
		}
	}
	return append(pieces, cur)
}

// Finding 10: a secret printed base64-encoded (either alphabet, padded or
// not, at any of the three alignments in a longer stream) or URL-encoded is
// redacted as the raw secret is.
func TestRedactEncodedForms(t *testing.T) {
	for _, secret := range []string{"hunter2-long-password", "p@ss w/rd+&=?", "abc", "ünï\x00\xff"} {
		for _, pre := range []string{"", "u", "us", "user:"} {
			for name, text := range encodings(secret, pre, ":tail") {
				out := Redact("line: "+text+" end", []string{secret})
				if how := revealed(out, secret); how != "" {
					t.Errorf("%q as %s after %q: %q reveals it %s", secret, name, pre, out, how)
				}
			}
		}
	}
	// The same through a Tail, a byte at a time with short cuts.
	secret := "correct horse battery"
	text := base64.StdEncoding.EncodeToString([]byte("x"+secret)) + " " + url.QueryEscape(secret) + "\n"
	var lines strings.Builder
	tl := New(Options{Limit: 1 << 10, MaxLine: 5, Secrets: []string{secret}, OnLine: func(l string) { lines.WriteString(l) }})
	for i := range len(text) {
		_, _ = tl.Write([]byte{text[i]})
	}
	_ = tl.Close()
	for _, s := range []string{tl.String(), lines.String()} {
		if how := revealed(s, secret); how != "" {
			t.Errorf("tail %q reveals it %s", s, how)
		}
	}
}

// FuzzRedact: for any secret of at least MinSecret bytes (one line) and
// any text around it, the secret embedded raw, base64 (standard or URL
// alphabet, padded or not, at any alignment within the stream) or
// URL-encoded (query, path, or every byte) is redacted: the output
// reveals it in none of those forms.
func FuzzRedact(f *testing.F) {
	f.Add("hunter2-long-password", "user:", ":tail", "before ", " after", uint8(0))
	f.Add("p@ss w/rd+&=?", "", "", "", "", uint8(3))
	f.Add("abc", "x", "yz", "%", "+", uint8(7))
	f.Add("\xff\xfe\xfd", "\x00", "", "", "", uint8(9))
	f.Add("a+b c%2", "=", "==", "YWJj", "", uint8(1))
	f.Fuzz(func(t *testing.T, secret, pre, post, before, after string, which uint8) {
		if len(secret) < MinSecret || strings.ContainsAny(secret, "\n") || strings.HasSuffix(secret, "\r") ||
			strings.ContainsAny(before+after, "\n") || len(secret)+len(pre)+len(post) > 256 {
			return
		}
		forms := encodings(secret, pre, post)
		names := make([]string, 0, len(forms))
		for n := range forms {
			names = append(names, n)
		}
		// map order is random: pick by sorted name
		slicesSort(names)
		name := names[int(which)%len(names)]
		out := Redact(before+forms[name]+after, []string{secret})
		if how := revealed(out, secret); how != "" {
			t.Fatalf("secret %q as %s (%q): output %q reveals it %s", secret, name, forms[name], out, how)
		}
	})
}

func slicesSort(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// hexByte decodes two hex digits with strconv, independently of the
// decoder under test.
func hexByte(a, b byte) (byte, bool) {
	v, err := strconv.ParseUint(string([]byte{a, b}), 16, 8)
	return byte(v), err == nil
}
