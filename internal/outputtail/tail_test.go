package outputtail

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestLinesRedactionAndMarkers(t *testing.T) {
	var lines, markers []string
	tl := New(Options{
		Limit:    1 << 10,
		Secrets:  []string{"s3cr3t-token", "line-one-secret\nline-two-secret"},
		Marker:   "\x1eKP ",
		OnLine:   func(l string) { lines = append(lines, l) },
		OnMarker: func(p string) { markers = append(markers, p) },
	})
	// One byte at a time, as the worst possible stream.
	in := "ok token=s3cr3t-token\r\n\x1eKP {\"rc\":0}\nkey: line-one-secret\nline-two-secret done\nunterminated"
	if _, err := io.Copy(tl, iotest.OneByteReader(strings.NewReader(in))); err != nil {
		t.Fatal(err)
	}
	if err := tl.Close(); err != nil {
		t.Fatal(err)
	}
	want := []string{"ok token=(sensitive value)", "key: (sensitive value)", "(sensitive value) done", "unterminated"}
	if fmt.Sprint(lines) != fmt.Sprint(want) {
		t.Fatalf("lines\n got %q\nwant %q", lines, want)
	}
	if len(markers) != 1 || markers[0] != `{"rc":0}` {
		t.Fatalf("markers %q", markers)
	}
	if got := tl.String(); got != strings.Join(want, "\n") {
		t.Fatalf("tail %q", got)
	}
}

func TestTailIsBoundedAndStartsAtALine(t *testing.T) {
	tl := New(Options{Limit: 100})
	for i := range 10000 {
		fmt.Fprintf(tl, "line %05d\n", i)
	}
	got := tl.String()
	if len(got) > 100 {
		t.Fatalf("tail holds %d bytes, limit 100", len(got))
	}
	if !strings.HasPrefix(got, "line ") || !strings.HasSuffix(got, "line 09999\n") {
		t.Fatalf("tail %q", got)
	}
	if tl.Total() != int64(10000*len("line 00000\n")) {
		t.Fatalf("total %d", tl.Total())
	}
}

func TestLongLineCutKeepsSecretsWhole(t *testing.T) {
	secret := "ABCDEFGHIJKLMNOP"
	var out strings.Builder
	tl := New(Options{Limit: 1 << 20, MaxLine: 10, Secrets: []string{secret}, OnLine: func(l string) { out.WriteString(l) }})
	// The secret straddles every possible cut position.
	line := strings.Repeat("x", 7) + secret + strings.Repeat("y", 23) + secret
	for i := range len(line) {
		if _, err := tl.Write([]byte(line[i : i+1])); err != nil {
			t.Fatal(err)
		}
	}
	_ = tl.Close()
	if strings.Contains(out.String(), "ABCD") || strings.Contains(tl.String(), "ABCD") {
		t.Fatalf("secret leaked through a cut: %q", out.String())
	}
	if want := strings.Repeat("x", 7) + Redacted + strings.Repeat("y", 23) + Redacted; out.String() != want {
		t.Fatalf("got %q want %q", out.String(), want)
	}
}

func FuzzTailNeverLeaksSecret(f *testing.F) {
	f.Add([]byte("hello SECRETVALUE world\n"), 3, 8)
	f.Add([]byte("SECRETVALUESECRETVALUE"), 1, 4)
	f.Fuzz(func(t *testing.T, data []byte, chunk, maxLine int) {
		const secret = "SECRETVALUE"
		chunk = 1 + abs(chunk)%64
		var seen strings.Builder
		tl := New(Options{Limit: 64, MaxLine: 1 + abs(maxLine)%40, Secrets: []string{secret}, OnLine: func(l string) {
			seen.WriteString(l)
			seen.WriteByte('\n')
		}})
		for len(data) > 0 {
			n := min(chunk, len(data))
			_, _ = tl.Write(data[:n])
			data = data[n:]
		}
		_ = tl.Close()
		for _, s := range []string{seen.String(), tl.String()} {
			// Output lines are joined by newlines here, so only check within lines.
			for _, l := range strings.Split(s, "\n") {
				if strings.Contains(l, secret) {
					t.Fatalf("secret in output line %q", l)
				}
			}
		}
		if len(tl.String()) > 64 {
			t.Fatalf("tail exceeds its limit: %d", len(tl.String()))
		}
	})
}

func abs(i int) int {
	if i < 0 {
		return -i
	}
	return i
}

// BenchmarkTail200MB measures feeding 200 MB of short lines through a Tail
// with a 64 KiB limit: bytes/op shows the memory stays bounded.
func BenchmarkTail200MB(b *testing.B) {
	line := []byte(strings.Repeat("o", 79) + "\n")
	chunk := make([]byte, 0, 32<<10)
	for len(chunk)+len(line) <= cap(chunk) {
		chunk = append(chunk, line...)
	}
	const total = 200 << 20
	b.SetBytes(total)
	b.ReportAllocs()
	for b.Loop() {
		tl := New(Options{Limit: 64 << 10, Secrets: []string{"s3cr3t"}, OnLine: func(string) {}})
		for n := 0; n < total; n += len(chunk) {
			_, _ = tl.Write(chunk)
		}
		_ = tl.Close()
	}
}
