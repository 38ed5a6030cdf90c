package outputtail

import (
	"fmt"
	"io"
	"slices"
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

// referenceRedact is redaction stated plainly: mask every byte of the line
// inside an occurrence of a secret part (raw, its base64 cores, or
// URL-encoded), and replace each maximal masked run
// with one placeholder.
func referenceRedact(line string, parts []string) string {
	mask := make([]bool, len(line))
	set := func(i, n int) {
		for j := i; j < i+n; j++ {
			mask[j] = true
		}
	}
	for _, p := range parts {
		forms := []string{p}
		for _, c := range base64Cores([]byte(p)) {
			forms = append(forms, string(c))
		}
		for _, f := range forms {
			for i := 0; i+len(f) <= len(line); i++ {
				if line[i:i+len(f)] == f {
					set(i, len(f))
				}
			}
		}
		// URL-encoded forms: FuzzRedact checks what urlMatch finds.
		for i := range len(line) {
			if n := urlMatch([]byte(line[i:]), []byte(p)); n > 0 {
				set(i, n)
			}
		}
	}
	var b strings.Builder
	for i := 0; i < len(line); i++ {
		if !mask[i] {
			b.WriteByte(line[i])
			continue
		}
		if i == 0 || !mask[i-1] {
			b.WriteString(Redacted)
		}
	}
	return b.String()
}

func secretParts(secrets []string) []string {
	var parts []string
	for _, s := range secrets {
		for _, p := range strings.Split(s, "\n") {
			if p = strings.TrimSuffix(p, "\r"); len(p) >= MinSecret {
				parts = append(parts, p)
			}
		}
	}
	return parts
}

// FuzzTailNeverLeaksSecret: whatever the output, the secrets (overlapping
// or not), the chunking of writes and the line cutting, the kept text is the
// reference redaction of every non-marker line, no secret part survives in
// it, marker lines reach OnMarker whole, and memory stays bounded.
func FuzzTailNeverLeaksSecret(f *testing.F) {
	f.Add([]byte("hello SECRETVALUE world\n"), "SECRETVALUE", "", "", 3, 8)
	f.Add([]byte("SECRETVALUESECRETVALUE"), "SECRETVALUE", "", "", 1, 4)
	f.Add([]byte("pw=hunter2-long-password\r\n"), "hunter", "hunter2-long-password", "", 1, 3)
	f.Add([]byte("xababababy\n\x1eKP {\"rc\":0}\nabcdef"), "abab", "cdef", "ab\ncd\r\nbcde", 2, 1)
	f.Add([]byte("\x1eK\n\x1eKP\n(sensitive value)\r\r\n"), "sensitive", "e)", "value)\r", 5, 2)
	f.Fuzz(func(t *testing.T, data []byte, s1, s2, s3 string, chunk, maxLine int) {
		const marker = "\x1eKP "
		secrets := []string{s1, s2, s3}
		parts := secretParts(secrets)
		chunk = 1 + abs(chunk)%64
		var markers []string
		var pieces strings.Builder
		tl := New(Options{Limit: 6*len(data) + 64, MaxLine: 1 + abs(maxLine)%40, Secrets: secrets, Marker: marker,
			OnLine:   func(l string) { pieces.WriteString(l) },
			OnMarker: func(p string) { markers = append(markers, p) }})
		tl.clean = func(s string) string { return s } // redaction alone: FuzzSanitize covers the rest
		bound := tl.maxLine + tl.hold + tl.overlap + len(marker)
		for in := data; len(in) > 0; {
			n := min(chunk, len(in))
			_, _ = tl.Write(in[:n])
			in = in[n:]
			if tl.kind != kindMarker && len(tl.pending) > bound {
				t.Fatalf("%d bytes pending, bound %d", len(tl.pending), bound)
			}
		}
		_ = tl.Close()

		var want strings.Builder
		var wantMarkers []string
		lines := strings.Split(string(data), "\n")
		for i, l := range lines {
			last := i == len(lines)-1
			if last && l == "" {
				break
			}
			if strings.HasPrefix(l, marker) {
				wantMarkers = append(wantMarkers, l[len(marker):])
				continue
			}
			want.WriteString(referenceRedact(strings.TrimSuffix(l, "\r"), parts))
			if !last {
				want.WriteByte('\n')
			}
		}
		got := tl.String()
		if got != want.String() {
			t.Fatalf("secrets %q:\n got %q\nwant %q", secrets, got, want.String())
		}
		if pieces.String() != strings.ReplaceAll(got, "\n", "") {
			t.Fatalf("OnLine saw %q, the tail holds %q", pieces.String(), got)
		}
		if !slices.Equal(markers, wantMarkers) {
			t.Fatalf("markers %q, want %q", markers, wantMarkers)
		}
		// The plain statement: with each placeholder blanked out, no line
		// holds a secret part.
		for _, l := range strings.Split(strings.ReplaceAll(got, Redacted, "\x00"), "\n") {
			for _, p := range parts {
				if !strings.Contains(p, "\x00") && strings.Contains(l, p) {
					t.Fatalf("secret %q in output line %q", p, l)
				}
			}
		}
		small := New(Options{Limit: 64, MaxLine: 1 + abs(maxLine)%40, Secrets: secrets})
		_, _ = small.Write(data)
		_ = small.Close()
		if len(small.String()) > 64 {
			t.Fatalf("tail exceeds its limit: %d", len(small.String()))
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
