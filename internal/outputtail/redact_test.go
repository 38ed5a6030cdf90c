package outputtail

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

// Regression (issue #11): with secrets that overlap, the first replaced
// hid the other, so whichever the map order put first decided what leaked:
// "hunter" then "hunter2-long-password" gave "(sensitive value)2-long-password".
func TestOverlappingSecretsRedactTheirUnion(t *testing.T) {
	in := "pw=hunter2-long-password end\nab-hunter2-long-passwordhunter\nkey=abcdef!\n"
	want := "pw=(sensitive value) end\nab-(sensitive value)\nkey=(sensitive value)!\n"
	for _, secrets := range [][]string{
		{"hunter", "hunter2-long-password", "abcd", "cdef"},
		{"hunter2-long-password", "hunter", "cdef", "abcd"},
	} {
		for _, maxLine := range []int{0, 1, 3, 7} {
			var lines strings.Builder
			tl := New(Options{Limit: 1 << 10, MaxLine: maxLine, Secrets: secrets, OnLine: func(l string) { lines.WriteString(l) }})
			if _, err := io.Copy(tl, iotest.OneByteReader(strings.NewReader(in))); err != nil {
				t.Fatal(err)
			}
			_ = tl.Close()
			if got := tl.String(); got != want {
				t.Errorf("secrets %q, maxLine %d:\n got %q\nwant %q", secrets, maxLine, got, want)
			}
			if got := lines.String(); got != strings.ReplaceAll(want, "\n", "") {
				t.Errorf("secrets %q, maxLine %d: lines %q", secrets, maxLine, got)
			}
		}
	}
}

// A secret that repeats itself ("aaa") covers every overlapping occurrence,
// and the placeholder is never scanned as output.
func TestSelfOverlapAndPlaceholderText(t *testing.T) {
	var out strings.Builder
	tl := New(Options{Limit: 1 << 10, MaxLine: 2, Secrets: []string{"abab", "sensitive", "value)"}, OnLine: func(l string) { out.WriteString(l + "|") }})
	_, _ = tl.Write([]byte("xababababy abax\n"))
	_ = tl.Close()
	if got := tl.String(); got != "x(sensitive value)y abax\n" {
		t.Fatalf("tail %q", got)
	}
}

func TestMarkerLongerThanMaxLine(t *testing.T) {
	var markers []string
	var lines []string
	tl := New(Options{Limit: 1 << 10, MaxLine: 2, Marker: "\x1ekubeplay-0123456789 ",
		OnMarker: func(p string) { markers = append(markers, p) }, OnLine: func(l string) { lines = append(lines, l) }})
	payload := `{"rc":0,"stats":{"hosts":{"localhost":{"ok":1}}}}`
	_, _ = io.Copy(tl, iotest.OneByteReader(strings.NewReader("\x1ekubeplay-0123456789 "+payload+"\n\x1ekubeplay-x\n")))
	if len(markers) != 1 || markers[0] != payload {
		t.Fatalf("markers %q", markers)
	}
	if strings.Join(lines, "") != "␞kubeplay-x" { // not a marker: output, sanitized
		t.Fatalf("lines %q", lines)
	}
}

func TestPythonFloat(t *testing.T) {
	// Expected values are Python 3's str(json.loads(literal)).
	for lit, want := range map[string]string{
		"1.2345678e7": "12345678.0", "1e16": "1e+16", "1e15": "1000000000000000.0", "0.0001": "0.0001",
		"0.00001": "1e-05", "1.5": "1.5", "-2.50": "-2.5", "1E5": "100000.0", "3.141592653589793": "3.141592653589793",
		"-0.0": "-0.0", "0.1": "0.1", "1e-7": "1e-07", "5e-324": "5e-324", "1.7976931348623157e308": "1.7976931348623157e+308",
		"1.0e2": "100.0", "123456789012345678.0": "1.2345678901234568e+17",
	} {
		if got := numberForms(lit); len(got) != 2 || got[1] != want {
			t.Errorf("numberForms(%s) = %q, want Python's %q", lit, got, want)
		}
	}
	for lit, want := range map[string]string{"12345678": "12345678", "-0": "0", "123456789012345678901234567890": "123456789012345678901234567890"} {
		if got := numberForms(lit); got[len(got)-1] != want {
			t.Errorf("numberForms(%s) = %q, want %q", lit, got, want)
		}
	}
	if got := numberForms("1e400"); !slices.Equal(got, []string{"1e400"}) {
		t.Errorf("an overflowing float: %q", got)
	}
}

func TestSecretForms(t *testing.T) {
	got := SecretForms("a\"b\\c\nd\te\x01f\x7fé😀/<")
	want := []string{
		"a\"b\\c\nd\te\x01f\x7fé😀/<",
		`a\"b\\c\nd\te\u0001f` + "\x7fé😀/<",              // json.dumps(ensure_ascii=False)
		`a\"b\\c\nd\te\u0001f\u007f\u00e9\ud83d\ude00/<`, // json.dumps(ensure_ascii=True)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("SecretForms\n got %q\nwant %q", got, want)
	}
	if got := SecretForms("plain"); !slices.Equal(got, []string{"plain"}) {
		t.Fatalf("plain: %q", got)
	}
	if got := SecretForms("ab"); len(got) != 0 {
		t.Fatalf("a value under MinSecret: %q", got)
	}
}

// Regression (issue #11): the provider redacted numbers in Go's float form
// (1.2345678e+07), which a playbook never prints.
func TestSecretValues(t *testing.T) {
	doc := `{"z": 12345678, "a": {"pw": "p\"w\n2", "n": [1.2345678e7, 42, true, null, "ok"]}, "f": 0.5}`
	got := SecretValues(doc)
	want := []string{"1.2345678e7", "12345678.0", "p\"w\n2", `p\"w\n2`, "0.5", "12345678"}
	if !slices.Equal(got, want) {
		t.Fatalf("SecretValues\n got %q\nwant %q", got, want)
	}
	var out bytes.Buffer
	tl := New(Options{Limit: 1 << 10, Secrets: got})
	_, _ = tl.Write([]byte("msg: \"p\\\"w\\n2\" id=12345678 f=12345678.0 ok: true\n"))
	if s := tl.String(); s != "msg: \"(sensitive value)\" id=(sensitive value) f=(sensitive value) ok: true\n" {
		t.Fatalf("tail %q", s)
	}
	_ = out
	if got := SecretValues("not json hunter2"); !slices.Equal(got, []string{"not json hunter2"}) {
		t.Fatalf("not JSON: %q", got)
	}
	if got := SecretValues(strings.Repeat("[", 10001) + strings.Repeat("]", 10001)); len(got) != 1 {
		t.Fatalf("too deep for JSON: %d values", len(got))
	}
}

// FuzzSecretValues: every string leaf of at least MinSecret bytes is
// redacted as written, every float's Python form reads back as the same
// float, and nothing shorter than MinSecret or repeated is returned.
func FuzzSecretValues(f *testing.F) {
	f.Add("hunter2", 1.2345678e7, int64(12345678), `{"a":[1,"xyz",{"b":null}]}`)
	f.Add("a\"\\\n\x01é😀", math.Copysign(0, -1), int64(-1), `[1e400, -0, 1E5]`)
	f.Add("\xff\xfe", 5e-324, int64(0), `not json`)
	f.Fuzz(func(t *testing.T, s string, fl float64, n int64, doc string) {
		for _, vals := range [][]string{SecretValues(doc), SecretValues(fmt.Sprintf(`{"s": %q, "f": %s, "n": %d}`, s, PythonFloat(fl), n))} {
			seen := map[string]bool{}
			for _, v := range vals {
				if len(v) < MinSecret || seen[v] {
					t.Fatalf("SecretValues returned %q (short or repeated) in %q", v, vals)
				}
				seen[v] = true
			}
		}
		if math.IsInf(fl, 0) || math.IsNaN(fl) {
			return
		}
		if back, err := strconv.ParseFloat(PythonFloat(fl), 64); err != nil || back != fl || math.Signbit(back) != math.Signbit(fl) {
			t.Fatalf("PythonFloat(%v) = %q reads back as %v (%v)", fl, PythonFloat(fl), back, err)
		}
		js, _ := json.Marshal(s)
		doc2 := fmt.Sprintf(`{"s": %s, "f": %s, "n": %d}`, js, PythonFloat(fl), n) // as json.dumps writes it
		var back struct{ S string }
		if err := json.Unmarshal([]byte(doc2), &back); err != nil {
			t.Fatal(err)
		}
		vals := SecretValues(doc2)
		for _, want := range []string{back.S, PythonFloat(fl), strconv.FormatInt(n, 10)} {
			if len(want) >= MinSecret && !slices.Contains(vals, want) {
				t.Fatalf("SecretValues(%s) = %q lacks %q", doc2, vals, want)
			}
		}
	})
}
