// Package outputtail consumes a run's output stream: it hands every complete
// line, with secrets redacted, to a callback as it arrives, picks out the
// runner's marker lines, and keeps only a bounded tail of the text, so a run
// that prints gigabytes costs a fixed amount of memory.
package outputtail

import (
	"bytes"
	"strings"
	"sync"
)

// Redacted replaces every secret value in the output.
const Redacted = "(sensitive value)"

// DefaultMaxLine is the longest line handed to the callback in one piece;
// longer lines are cut, so a line with no newline cannot grow memory.
const DefaultMaxLine = 16 << 10

// Tail is an io.Writer over a run's output. It is safe for concurrent use,
// so stdout and stderr may share one Tail.
type Tail struct {
	mu       sync.Mutex
	limit    int
	maxLine  int
	secrets  [][]byte
	overlap  int
	marker   []byte
	onLine   func(line string)
	onMarker func(payload string)

	pending []byte // the current, incomplete line
	ring    []byte // circular buffer of the kept tail, allocated on first use
	start   int    // index of the oldest kept byte in ring
	size    int    // kept bytes
	total   int64  // bytes of (redacted) output seen
}

// Options configure a Tail.
type Options struct {
	// Limit is how many bytes of output the tail keeps. Must be positive.
	Limit int
	// Secrets are values that must never appear in the output; each is
	// replaced by Redacted. Multi-line secrets are redacted line by line.
	Secrets []string
	// Marker starts a line that carries a runner message rather than output;
	// such lines go to OnMarker without the marker and are not kept.
	Marker string
	// OnLine receives every complete (or cut) output line, redacted.
	OnLine func(line string)
	// OnMarker receives the payload of marker lines.
	OnMarker func(payload string)
	// MaxLine overrides DefaultMaxLine.
	MaxLine int
}

// New returns a Tail with the given options.
func New(o Options) *Tail {
	t := &Tail{limit: o.Limit, maxLine: o.MaxLine, onLine: o.OnLine, onMarker: o.OnMarker}
	if t.maxLine <= 0 {
		t.maxLine = DefaultMaxLine
	}
	if t.limit <= 0 {
		t.limit = 1
	}
	if o.Marker != "" {
		t.marker = []byte(o.Marker)
	}
	for _, s := range o.Secrets {
		for _, part := range strings.Split(s, "\n") {
			part = strings.TrimSuffix(part, "\r")
			// Parts this short would blank out ordinary text without protecting anything.
			if len(part) < 3 {
				continue
			}
			t.secrets = append(t.secrets, []byte(part))
			t.overlap = max(t.overlap, len(part)-1)
		}
	}
	return t
}

// Write consumes output. It never fails.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			t.pending = append(t.pending, p...)
			t.cutLongLine()
			break
		}
		t.pending = append(t.pending, p[:i]...)
		t.line(t.pending, true)
		t.pending = t.pending[:0]
		p = p[i+1:]
	}
	return n, nil
}

// cutLongLine emits the front of an over-long pending line, keeping enough
// bytes back that a secret cut in two is still redacted whole.
func (t *Tail) cutLongLine() {
	for len(t.pending) > t.maxLine+t.overlap {
		red := t.redact(t.pending)
		if len(red) <= t.maxLine+t.overlap {
			t.pending = append(t.pending[:0], red...)
			return
		}
		keep := t.overlap
		front := red[:len(red)-keep]
		if len(front) > t.maxLine {
			front = red[:t.maxLine]
		}
		t.emit(front, false)
		t.pending = append(t.pending[:0], red[len(front):]...)
	}
}

func (t *Tail) line(b []byte, complete bool) {
	if t.marker != nil && bytes.HasPrefix(b, t.marker) {
		if t.onMarker != nil {
			t.onMarker(string(b[len(t.marker):]))
		}
		return
	}
	t.emit(t.redact(b), complete)
}

func (t *Tail) emit(b []byte, complete bool) {
	b = bytes.TrimSuffix(b, []byte("\r"))
	if t.onLine != nil {
		t.onLine(string(b))
	}
	t.keep(b)
	if complete {
		t.keep([]byte{'\n'})
	}
}

func (t *Tail) redact(b []byte) []byte {
	for _, s := range t.secrets {
		if bytes.Contains(b, s) {
			b = bytes.ReplaceAll(b, s, []byte(Redacted))
		}
	}
	return b
}

func (t *Tail) keep(b []byte) {
	t.total += int64(len(b))
	if t.ring == nil {
		t.ring = make([]byte, t.limit)
	}
	if len(b) >= t.limit {
		copy(t.ring, b[len(b)-t.limit:])
		t.start, t.size = 0, t.limit
		return
	}
	end := (t.start + t.size) % t.limit
	n := copy(t.ring[end:], b)
	copy(t.ring, b[n:])
	t.size += len(b)
	if t.size > t.limit {
		t.start = (t.start + t.size - t.limit) % t.limit
		t.size = t.limit
	}
}

// Close flushes an unterminated last line.
func (t *Tail) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.pending) > 0 {
		t.line(t.pending, false)
		t.pending = t.pending[:0]
	}
	return nil
}

// String returns the kept tail. When output was cut, the tail starts at a
// line boundary where one is available.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := make([]byte, 0, t.size)
	if t.size > 0 {
		first := min(t.size, t.limit-t.start)
		s = append(s, t.ring[t.start:t.start+first]...)
		s = append(s, t.ring[:t.size-first]...)
	}
	if t.total > int64(t.size) {
		if i := bytes.IndexByte(s, '\n'); i >= 0 && i < len(s)-1 {
			s = s[i+1:]
		}
	}
	return string(s)
}

// Total returns how many bytes of output were seen, marker lines excluded.
func (t *Tail) Total() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.total
}
