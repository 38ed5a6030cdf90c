package outputtail

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// collect returns a Tail and the lines it hands out.
func collect(o Options) (*Tail, *[]string) {
	var lines []string
	o.OnLine = func(l string) { lines = append(lines, l) }
	return New(o), &lines
}

func write(t *testing.T, tl *Tail, s string) {
	t.Helper()
	n, err := tl.Write([]byte(s))
	if n != len(s) || err != nil {
		t.Fatalf("Write(%q) = %d, %v", s, n, err)
	}
}

// model is what a Tail should produce for output without markers, secrets
// or cut lines: every line without its trailing CR, complete lines ending in
// a newline; the tail is the last limit bytes, starting after the first
// newline when output was dropped and a later line starts in it.
func model(in string, limit int) (lines []string, out, tail string) {
	parts := strings.Split(in, "\n")
	var sb strings.Builder
	for i, p := range parts {
		last := i == len(parts)-1
		if last && p == "" {
			break
		}
		p = strings.TrimSuffix(p, "\r")
		lines = append(lines, p)
		sb.WriteString(p)
		if !last {
			sb.WriteByte('\n')
		}
	}
	out = sb.String()
	tail = out
	if len(tail) > limit {
		tail = tail[len(tail)-limit:]
		if i := strings.IndexByte(tail, '\n'); i >= 0 && i < len(tail)-1 {
			tail = tail[i+1:]
		}
	}
	return lines, out, tail
}

func TestTailMatchesModel(t *testing.T) {
	const alphabet = "abc \r\n\n"
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 1))
		limit := 1 + r.IntN(40)
		var in strings.Builder
		for range r.IntN(300) {
			in.WriteByte(alphabet[r.IntN(len(alphabet))])
		}
		tl, lines := collect(Options{Limit: limit})
		tl.clean = func(s string) string { return s } // the framing alone: TestCRLF shows a lone \r sanitized
		s := in.String()
		for len(s) > 0 {
			n := min(1+r.IntN(20), len(s))
			write(t, tl, s[:n])
			s = s[n:]
		}
		if err := tl.Close(); err != nil {
			t.Fatal(err)
		}
		wantLines, out, tail := model(in.String(), limit)
		if !slices.Equal(*lines, wantLines) {
			t.Fatalf("seed %d: lines %q, want %q", seed, *lines, wantLines)
		}
		if got := tl.String(); got != tail {
			t.Fatalf("seed %d, limit %d, input %q: tail %q, want %q", seed, limit, in.String(), got, tail)
		}
		if tl.Total() != int64(len(out)) {
			t.Fatalf("seed %d: total %d, want %d", seed, tl.Total(), len(out))
		}
	}
}

func TestTailBounds(t *testing.T) {
	tl := New(Options{Limit: 10})
	write(t, tl, strings.Repeat("x", 24)+"END\n")
	if got := tl.String(); got != "xxxxxxEND\n" {
		t.Errorf("a line longer than the limit: tail %q, want its last 10 bytes", got)
	}
	write(t, tl, "ab\ncd\n")
	if got := tl.String(); got != "ab\ncd\n" {
		t.Errorf("tail %q, want it to start at the line after the cut (of END\\nab\\ncd\\n)", got)
	}
	if tl.Total() != 28+6 {
		t.Errorf("total %d", tl.Total())
	}

	one := New(Options{Limit: 0})
	write(t, one, "hello\nworld")
	_ = one.Close()
	if got := one.String(); got != "d" {
		t.Errorf("a non-positive limit keeps one byte; tail %q", got)
	}
	if New(Options{Limit: 5}).String() != "" {
		t.Error("an unused tail is not empty")
	}
}

func TestLongLinesAreCut(t *testing.T) {
	line := "0123456789abcdefghijABCDEFGHIJ-tail"
	for _, chunk := range []int{1, 3, 7} {
		tl, lines := collect(Options{Limit: 1 << 10, MaxLine: 10})
		in := line + "\nnext\n"
		for i := 0; i < len(in); i += chunk {
			write(t, tl, in[i:min(i+chunk, len(in))])
		}
		_ = tl.Close()
		want := []string{"0123456789", "abcdefghij", "ABCDEFGHIJ", "-tail", "next"}
		if !slices.Equal(*lines, want) {
			t.Errorf("chunk %d: lines %q, want %q", chunk, *lines, want)
		}
		if got := tl.String(); got != in {
			t.Errorf("chunk %d: tail %q, want the pieces joined back into the line", chunk, got)
		}
		if tl.Total() != int64(len(in)) {
			t.Errorf("chunk %d: total %d", chunk, tl.Total())
		}
	}

	tl, lines := collect(Options{Limit: 100, MaxLine: 10})
	write(t, tl, "0123456789")
	if len(*lines) != 0 {
		t.Errorf("a line of exactly MaxLine bytes was cut before its end: %q", *lines)
	}
	_ = tl.Close()
	if !slices.Equal(*lines, []string{"0123456789"}) {
		t.Errorf("lines %q", *lines)
	}

	// Without MaxLine the default applies.
	tl, lines = collect(Options{Limit: 1 << 20})
	write(t, tl, strings.Repeat("y", DefaultMaxLine*2+1))
	if len(*lines) != 2 || len((*lines)[0]) != DefaultMaxLine {
		t.Errorf("default cut: %d pieces", len(*lines))
	}
}

func TestCRLF(t *testing.T) {
	tl, lines := collect(Options{Limit: 100})
	write(t, tl, "a\r\nb\r")
	write(t, tl, "\n\r\nc\rd\nlast\r")
	_ = tl.Close()
	want := []string{"a", "b", "", "c␍d", "last"} // a lone \r would overwrite the line on a terminal
	if !slices.Equal(*lines, want) {
		t.Errorf("lines %q, want %q", *lines, want)
	}
	if got := tl.String(); got != "a\nb\n\nc␍d\nlast" {
		t.Errorf("tail %q", got)
	}
}

func TestClose(t *testing.T) {
	tl, lines := collect(Options{Limit: 100})
	if err := tl.Close(); err != nil || len(*lines) != 0 || tl.String() != "" {
		t.Fatalf("Close of an empty tail: %v, lines %q", err, *lines)
	}
	write(t, tl, "done\npartial")
	if !slices.Equal(*lines, []string{"done"}) {
		t.Fatalf("an unterminated line was handed out before Close: %q", *lines)
	}
	_ = tl.Close()
	_ = tl.Close()
	if !slices.Equal(*lines, []string{"done", "partial"}) || tl.String() != "done\npartial" || tl.Total() != 12 {
		t.Errorf("after Close: lines %q tail %q total %d", *lines, tl.String(), tl.Total())
	}
}

func TestMarkers(t *testing.T) {
	var lines, payloads []string
	tl := New(Options{
		Limit: 100, Marker: "@@KP ",
		OnLine:   func(l string) { lines = append(lines, l) },
		OnMarker: func(p string) { payloads = append(payloads, p) },
	})
	write(t, tl, "out\n@@K")
	write(t, tl, "P {\"rc\":1}\r\nnot @@KP at the start\n@@KP\n@@KP last")
	_ = tl.Close()
	if !slices.Equal(payloads, []string{"{\"rc\":1}\r", "last"}) {
		t.Errorf("payloads %q", payloads)
	}
	if !slices.Equal(lines, []string{"out", "not @@KP at the start", "@@KP"}) {
		t.Errorf("lines %q", lines)
	}
	if got := tl.String(); got != "out\nnot @@KP at the start\n@@KP\n" {
		t.Errorf("tail %q: marker lines must not be kept", got)
	}
	if tl.Total() != int64(len("out\nnot @@KP at the start\n@@KP\n")) {
		t.Errorf("total %d counts marker lines", tl.Total())
	}

	quiet := New(Options{Limit: 100, Marker: "@@KP "})
	write(t, quiet, "@@KP secret report\nvisible\n")
	if got := quiet.String(); got != "visible\n" {
		t.Errorf("without OnMarker: tail %q", got)
	}
}

func TestConcurrentWriters(t *testing.T) {
	var (
		mu    sync.Mutex
		lines []string
	)
	tl := New(Options{Limit: 1 << 20, OnLine: func(l string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, l)
	}})
	const writers, each = 4, 500
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				_, _ = fmt.Fprintf(tl, "writer %d line %04d\n", w, i)
			}
		})
	}
	wg.Wait()
	_ = tl.Close()
	if len(lines) != writers*each {
		t.Fatalf("%d lines, want %d", len(lines), writers*each)
	}
	shape := regexp.MustCompile(`^writer \d line \d{4}$`)
	for _, l := range lines {
		if !shape.MatchString(l) {
			t.Fatalf("line torn by a concurrent write: %q", l)
		}
	}
	if want := int64(writers * each * len("writer 0 line 0000\n")); tl.Total() != want || int64(len(tl.String())) != want {
		t.Errorf("total %d, tail %d bytes, want %d", tl.Total(), len(tl.String()), want)
	}
}
