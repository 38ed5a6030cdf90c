// Package outputtail consumes a run's output stream: it hands every complete
// line, with secrets redacted, to a callback as it arrives, picks out the
// runner's marker lines, and keeps only a bounded tail of the text, so a run
// that prints gigabytes costs a fixed amount of memory.
package outputtail

import (
	"bytes"
	"cmp"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// Redacted replaces every secret value in the output.
const Redacted = "(sensitive value)"

// DefaultMaxLine is the longest line handed to the callback in one piece,
// counted before redaction; longer lines are cut, so a line with no newline
// cannot grow memory.
const DefaultMaxLine = 16 << 10

// MaxMarkerLine bounds a marker line's payload; the rest of a longer one is
// dropped.
const MaxMarkerLine = 1 << 20

// MinSecret is the shortest secret (or line of a multi-line secret) that is
// redacted: shorter values would blank out ordinary text without protecting
// anything.
const MinSecret = 3

type lineKind int

const (
	kindUnknown lineKind = iota // too short yet to tell whether it is a marker line
	kindOutput
	kindMarker
)

// span is a redacted byte range [start, end) of a line.
type span struct{ start, end int }

// Tail is an io.Writer over a run's output. It is safe for concurrent use,
// so stdout and stderr may share one Tail.
//
// Redaction masks every byte of a line that lies in an occurrence of any
// secret, raw, base64-encoded (base64Cores) or URL-encoded (urlMatch) (occurrences may overlap, of one secret or of several), and
// replaces each maximal run of masked bytes with one Redacted. The result
// does not depend on the order of the secrets, on how the output is split
// into writes, or on where long lines are cut.
type Tail struct {
	mu       sync.Mutex
	limit    int
	maxLine  int
	secrets  [][]byte // each secret line and its base64 cores
	plain    [][]byte // each secret line, matched URL-encoded too
	overlap  int      // longest match - 1: what a match may need before a cut
	hold     int      // bytes a cut leaves pending: max(overlap, 1), so a line's final \r is never cut off
	marker   []byte
	onLine   func(line string)
	onMarker func(payload string)
	clean    func(string) string // Sanitize; tests of redaction alone swap it

	pending []byte // raw bytes of the current line; pending[:done] were already emitted
	done    int
	kind    lineKind
	inRun   bool // the last byte emitted of this line was redacted
	wasCut  bool // part of this line was emitted
	spans   []span
	out     []byte

	ring  []byte // circular buffer of the kept tail, allocated on first use
	start int    // index of the oldest kept byte in ring
	size  int    // kept bytes
	total int64  // bytes of (redacted) output seen
}

// Options configure a Tail.
type Options struct {
	// Limit is how many bytes of output the tail keeps. Must be positive.
	Limit int
	// Secrets are values that must never appear in the output; each is
	// replaced by Redacted, as printed and base64- or URL-encoded.
	// Multi-line secrets are redacted line by line (a trailing \r is not
	// part of a line); lines shorter than MinSecret bytes are not redacted
	// (ShortSecret tells them). SecretForms and SecretValues give the forms in
	// which a playbook prints a value.
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
	t := &Tail{limit: o.Limit, maxLine: o.MaxLine, onLine: o.OnLine, onMarker: o.OnMarker, clean: Sanitize}
	if t.maxLine <= 0 {
		t.maxLine = DefaultMaxLine
	}
	if t.limit <= 0 {
		t.limit = 1
	}
	if o.Marker != "" {
		t.marker = []byte(o.Marker)
	}
	seen := map[string]bool{}
	for _, s := range o.Secrets {
		for _, part := range strings.Split(s, "\n") {
			part = strings.TrimSuffix(part, "\r")
			if len(part) < MinSecret || seen[part] {
				continue
			}
			seen[part] = true
			t.secrets = append(t.secrets, []byte(part))
			t.plain = append(t.plain, []byte(part))
			// URL-encoded, every byte may take three.
			t.overlap = max(t.overlap, 3*len(part)-1)
			for _, core := range base64Cores([]byte(part)) {
				if !seen[string(core)] {
					seen[string(core)] = true
					t.secrets = append(t.secrets, core)
					t.overlap = max(t.overlap, len(core)-1)
				}
			}
		}
	}
	t.hold = max(t.overlap, 1)
	return t
}

// Write consumes output. It never fails.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i >= 0 && len(t.pending) == 0 && i < t.maxLine+t.hold {
			// A whole line at hand: no need to copy it.
			t.finish(p[:i], true)
			p = p[i+1:]
			continue
		}
		seg := p
		if i >= 0 {
			seg = p[:i]
		}
		t.feed(seg)
		if i < 0 {
			break
		}
		t.finish(t.pending, true)
		p = p[i+1:]
	}
	return n, nil
}

// feed appends part of a line, emitting the front of an over-long one.
func (t *Tail) feed(seg []byte) {
	for len(seg) > 0 {
		if t.kind == kindMarker {
			room := len(t.marker) + MaxMarkerLine - len(t.pending)
			t.pending = append(t.pending, seg[:max(0, min(room, len(seg)))]...)
			return
		}
		limit := t.done + t.maxLine + t.hold
		if t.kind == kindUnknown {
			limit = max(limit, len(t.marker))
		}
		k := min(max(limit-len(t.pending), 1), len(seg))
		t.pending = append(t.pending, seg[:k]...)
		seg = seg[k:]
		t.classify(t.pending)
		if t.kind == kindOutput {
			t.cut()
		}
	}
}

// classify decides, from a line's first bytes, whether it is a marker line.
func (t *Tail) classify(b []byte) {
	if t.kind != kindUnknown {
		return
	}
	if t.marker == nil {
		t.kind = kindOutput
		return
	}
	n := min(len(b), len(t.marker))
	switch {
	case !bytes.Equal(b[:n], t.marker[:n]):
		t.kind = kindOutput
	case len(b) >= len(t.marker):
		t.kind = kindMarker
	}
}

// cut emits the pending line's front in pieces of maxLine bytes while more
// than hold bytes would remain. Every byte emitted is final: no secret that
// could cover it is still incomplete. The overlap bytes before the cut stay,
// so a secret that starts before it is still found.
func (t *Tail) cut() {
	for len(t.pending)-t.done >= t.maxLine+t.hold {
		end := t.done + t.maxLine
		t.findSpans(t.pending)
		t.emit(t.render(t.pending, t.done, end), false)
		keepFrom := max(0, end-t.overlap)
		t.pending = t.pending[:copy(t.pending, t.pending[keepFrom:])]
		t.done = end - keepFrom
	}
}

// finish ends the current line, b: the pending bytes or, when none are
// pending, the whole line.
func (t *Tail) finish(b []byte, complete bool) {
	t.classify(b)
	if t.kind == kindMarker {
		if t.onMarker != nil {
			t.onMarker(string(b[len(t.marker):min(len(b), len(t.marker)+MaxMarkerLine)]))
		}
	} else {
		end := len(b)
		if end > t.done && b[end-1] == '\r' {
			end--
		}
		b = b[:end]
		t.findSpans(b)
		t.emit(t.render(b, t.done, end), complete)
	}
	t.pending, t.done, t.kind, t.inRun, t.wasCut = t.pending[:0], 0, kindUnknown, false, false
}

// findSpans sets t.spans to the merged runs of b covered by a secret.
func (t *Tail) findSpans(b []byte) {
	t.spans = t.spans[:0]
	for _, s := range t.secrets {
		for off := 0; off+len(s) <= len(b); {
			i := bytes.Index(b[off:], s)
			if i < 0 {
				break
			}
			t.spans = append(t.spans, span{off + i, off + i + len(s)})
			off += i + 1 // occurrences may overlap
		}
	}
	// URL-encoded forms need a "%" or a "+" (the raw form is found above).
	if bytes.IndexByte(b, '%') >= 0 || bytes.IndexByte(b, '+') >= 0 {
		for _, s := range t.plain {
			for i := range b {
				if c := b[i]; c != s[0] && c != '%' && c != '+' {
					continue
				}
				if n := urlMatch(b[i:], s); n > 0 {
					t.spans = append(t.spans, span{i, i + n})
				}
			}
		}
	}
	if len(t.spans) < 2 {
		return
	}
	slices.SortFunc(t.spans, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	merged := t.spans[:1]
	for _, s := range t.spans[1:] {
		last := &merged[len(merged)-1]
		if s.start <= last.end { // overlapping or adjacent: one run
			last.end = max(last.end, s.end)
			continue
		}
		merged = append(merged, s)
	}
	t.spans = merged
}

// render returns b[from:to] redacted by t.spans. A run that continues one
// whose placeholder was already emitted adds none.
func (t *Tail) render(b []byte, from, to int) []byte {
	if len(t.spans) == 0 {
		if to > from {
			t.inRun = false
		}
		return b[from:to]
	}
	out := t.out[:0]
	pos, lastMasked := from, false
	for _, sp := range t.spans {
		if sp.end <= from {
			continue
		}
		if sp.start >= to {
			break
		}
		s, e := max(sp.start, from), min(sp.end, to)
		out = append(out, b[pos:s]...)
		if s > from || !t.inRun {
			out = append(out, Redacted...)
		}
		pos, lastMasked = e, e == to
	}
	out = append(out, b[pos:to]...)
	if to > from {
		t.inRun = lastMasked
	}
	t.out = out
	return out
}

func (t *Tail) emit(b []byte, complete bool) {
	if len(b) > 0 || !t.wasCut {
		if t.onLine != nil {
			t.onLine(t.clean(string(b)))
		}
		t.keep(b)
	}
	t.wasCut = !complete
	if complete {
		t.keep([]byte{'\n'})
	}
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
		t.finish(t.pending, false)
	}
	return nil
}

// String returns the kept tail, sanitized (Sanitize) and at most the
// limit's length. When output was cut, the tail starts at a line boundary
// where one is available.
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
	// The ring holds raw bytes: it is sanitized whole, so that a code or a
	// character cut across two writes is seen whole. Control pictures are
	// longer than the controls: cut the front back to the limit, on a
	// character.
	out := t.clean(string(s))
	if over := len(out) - t.limit; over > 0 {
		for over < len(out) && !utf8.RuneStart(out[over]) {
			over++
		}
		out = out[over:]
	}
	return out
}

// Total returns how many bytes of output were seen, marker lines excluded.
func (t *Tail) Total() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.total
}
