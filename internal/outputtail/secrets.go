package outputtail

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// SecretForms returns the forms in which a playbook may print the secret
// string s, for Options.Secrets: s itself, and s escaped as Ansible's JSON
// output escapes a string (Python's json.dumps, which the default callback
// calls with ensure_ascii=False, and the ensure_ascii=True form that other
// callbacks and modules print), without the surrounding quotes. Forms
// shorter than MinSecret bytes are left out, as New would ignore them.
// Python's repr and YAML quoting are not covered.
func SecretForms(s string) []string {
	var out []string
	add := func(f string) {
		if len(f) >= MinSecret && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	add(s)
	add(pyJSONEscape(s, false))
	if utf8.ValidString(s) {
		add(pyJSONEscape(s, true))
	}
	return out
}

// SecretValues returns the values to redact for a secret JSON document (such
// as extra_vars_wo), as a playbook prints them: for every string leaf its
// SecretForms; for every number its text as written and as Python prints
// the value Ansible reads (integers in full without exponent, 12345678 for
// 12345678 or -0 as 0; floats as Python's repr, 12345678.0 for 1.2345678e7,
// 1e+16, 1e-05; a float that overflows is left out). Booleans and nulls are
// not redacted: "true" or "None" would blank out ordinary output; neither
// are object keys, which are variable names. Values shorter than MinSecret
// bytes are left out. A document that is not JSON is itself the secret.
// Leaves come in document order (object keys sorted), each once.
func SecretValues(doc string) []string {
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return SecretForms(doc)
	}
	var out []string
	seen := map[string]bool{}
	add := func(forms ...string) {
		for _, f := range forms {
			if len(f) >= MinSecret && !seen[f] {
				seen[f] = true
				out = append(out, f)
			}
		}
	}
	// An explicit stack: JSON may nest 10000 deep.
	stack := []any{v}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		switch x := x.(type) {
		case map[string]any:
			keys := slices.Sorted(maps.Keys(x))
			for i := len(keys) - 1; i >= 0; i-- {
				stack = append(stack, x[keys[i]])
			}
		case []any:
			for i := len(x) - 1; i >= 0; i-- {
				stack = append(stack, x[i])
			}
		case string:
			add(SecretForms(x)...)
		case json.Number:
			add(numberForms(string(x))...)
		}
	}
	return out
}

// numberForms returns a JSON number's text and Python's rendering of the
// int or float that json.loads reads from it.
func numberForms(lit string) []string {
	if !strings.ContainsAny(lit, ".eE") {
		var i big.Int
		if _, ok := i.SetString(lit, 10); ok {
			return []string{lit, i.String()}
		}
		return []string{lit}
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return []string{lit}
	}
	return []string{lit, PythonFloat(f)}
}

// PythonFloat formats f as Python's repr (and str) does: the shortest digits
// that read back as f, in fixed notation with at least one decimal when the
// decimal exponent is in [-4, 16), else in exponent notation with at least
// two exponent digits (1e+16, 1.5e-07).
func PythonFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	case f == 0 && math.Signbit(f):
		return "-0.0"
	case f == 0:
		return "0.0"
	}
	s := strconv.FormatFloat(math.Abs(f), 'e', -1, 64) // d.ddde±XX
	mant, exp, _ := strings.Cut(s, "e")
	e, _ := strconv.Atoi(exp)
	digits := strings.Replace(mant, ".", "", 1)
	decpt := e + 1 // digits[:decpt] are the integer part
	var out string
	switch {
	case decpt <= -4 || decpt > 16:
		out = digits[:1]
		if len(digits) > 1 {
			out += "." + digits[1:]
		}
		sign := "+"
		if e < 0 {
			sign, e = "-", -e
		}
		out += fmt.Sprintf("e%s%02d", sign, e)
	case decpt <= 0:
		out = "0." + strings.Repeat("0", -decpt) + digits
	case decpt >= len(digits):
		out = digits + strings.Repeat("0", decpt-len(digits)) + ".0"
	default:
		out = digits[:decpt] + "." + digits[decpt:]
	}
	if f < 0 {
		out = "-" + out
	}
	return out
}

// pyJSONEscape escapes s as Python's json.dumps does inside the quotes;
// with ascii, as ensure_ascii=True does (non-ASCII as \uXXXX, astral
// characters as surrogate pairs).
func pyJSONEscape(s string, ascii bool) string {
	var b bytes.Buffer
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		raw := s[:size]
		s = s[size:]
		if r == utf8.RuneError && size == 1 {
			b.WriteString(raw) // not UTF-8: printed as is
			continue
		}
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			switch {
			case r < 0x20 || (ascii && r == 0x7f):
				fmt.Fprintf(&b, `\u%04x`, r)
			case ascii && r > 0x7f && r <= 0xffff:
				fmt.Fprintf(&b, `\u%04x`, r)
			case ascii && r > 0xffff:
				r -= 0x10000
				fmt.Fprintf(&b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
			default:
				b.WriteString(raw)
			}
		}
	}
	return b.String()
}
