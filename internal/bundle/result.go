package bundle

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
)

// The result channel. The playbook's stdout and stderr both go to the exec
// session's stdout; the script's own stderr carries nothing but the
// unpacking errors before the run and, once the playbook has ended, a
// separator line (a newline, the marker, a newline) followed by the result
// document up to the end of the stream. So the result is neither cut by the
// output's line cap nor mixed with what the playbook prints, whatever its
// size; it travels in the same exec session, so the pod's liveness and a
// verbatim pod (no worker) need nothing more.

// MaxResultSize bounds the result document the provider reads: with 5,000
// hosts it is about 700 KB, so only huge set_stats data can reach it.
const MaxResultSize = 32 << 20

// MaxFailedTasks is how many failed tasks the callback keeps (the first
// ones); FailedTaskCount counts them all. The callback's MAX_FAILED_TASKS.
const MaxFailedTasks = 100

// MaxTaskMessage bounds a failed task's message, in characters; the
// callback cuts longer ones to this length, ending them with "...". Its
// MAX_MESSAGE.
const MaxTaskMessage = 2048

// ErrNoResult means the stream ended without the runner's separator: the
// script never got to report (the bundle did not unpack, the pod died).
var ErrNoResult = errors.New("the runner reported no result")

// ResultTooLargeError is a result document over the limit.
type ResultTooLargeError struct{ Limit int }

func (e *ResultTooLargeError) Error() string {
	return fmt.Sprintf("the run's result is larger than %d MiB (most likely its set_stats data): it was not read", e.Limit>>20)
}

// FailedTask is one task that failed on a host, or could not reach it.
type FailedTask struct {
	Host        string `json:"host"`
	Task        string `json:"task"`
	Message     string `json:"message"`
	Unreachable bool   `json:"unreachable"`
}

// ResultStream is an io.Writer for the exec session's stderr: it passes
// what comes before the separator to Before and keeps what follows, up to
// a limit, for Result. One goroutine writes; Result is called after.
type ResultStream struct {
	mu      sync.Mutex
	sep     []byte
	before  io.Writer
	limit   int
	pending []byte
	found   bool
	over    bool
	doc     bytes.Buffer
}

// NewResultStream returns a ResultStream for marker (Bundle.Marker) that
// keeps at most limit bytes of result.
func NewResultStream(marker string, before io.Writer, limit int) *ResultStream {
	return &ResultStream{sep: []byte("\n" + marker + "\n"), before: before, limit: limit}
}

// Write never fails.
func (s *ResultStream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(p)
	if !s.found {
		s.pending = append(s.pending, p...)
		i := bytes.Index(s.pending, s.sep)
		if i < 0 {
			// Hold what may be the separator's start.
			if keep := len(s.sep) - 1; len(s.pending) > keep {
				_, _ = s.before.Write(s.pending[:len(s.pending)-keep])
				s.pending = s.pending[:copy(s.pending, s.pending[len(s.pending)-keep:])]
			}
			return n, nil
		}
		_, _ = s.before.Write(s.pending[:i])
		s.found = true
		p = s.pending[i+len(s.sep):]
		s.pending = nil
	}
	if room := s.limit - s.doc.Len(); len(p) > room {
		s.over = true
		p = p[:max(room, 0)]
	}
	s.doc.Write(p)
	return n, nil
}

// Result decodes the result once the stream has ended: ErrNoResult without
// a separator (what came before it is flushed to Before), a
// *ResultTooLargeError over the limit.
func (s *ResultStream) Result() (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !s.found:
		_, _ = s.before.Write(s.pending)
		s.pending = nil
		return Result{}, ErrNoResult
	case s.over:
		return Result{}, &ResultTooLargeError{Limit: s.limit}
	}
	return DecodeResult(&s.doc)
}

// ParseResult reads a result document.
func ParseResult(payload string) (Result, error) {
	return DecodeResult(strings.NewReader(payload))
}

// DecodeResult reads one result document, at most MaxResultSize bytes,
// from r: {"rc": N, "stats": null | {"hosts": {...}, "failed_tasks": [...],
// "failed_task_count": N, "artifacts": {...}}}. Nothing but white space may
// follow it. The failed tasks are cut to MaxFailedTasks, their messages to
// MaxTaskMessage characters.
func DecodeResult(r io.Reader) (Result, error) {
	lr := &io.LimitedReader{R: r, N: MaxResultSize + 1}
	dec := json.NewDecoder(lr)
	var raw struct {
		RC    *int `json:"rc"`
		Stats *struct {
			Hosts           map[string]HostStats `json:"hosts"`
			FailedTasks     []FailedTask         `json:"failed_tasks"`
			FailedTaskCount int64                `json:"failed_task_count"`
			Artifacts       json.RawMessage      `json:"artifacts"`
		} `json:"stats"`
	}
	err := dec.Decode(&raw)
	if err == nil {
		if _, e := dec.Token(); e != io.EOF {
			err = errors.New("data follows the report")
		}
	}
	if lr.N <= 0 {
		return Result{}, &ResultTooLargeError{Limit: MaxResultSize}
	}
	if err != nil {
		return Result{}, fmt.Errorf("the runner's report is not JSON: %w", err)
	}
	if raw.RC == nil {
		return Result{}, errors.New("the runner's report has no exit code")
	}
	res := Result{ExitCode: *raw.RC}
	if st := raw.Stats; st != nil {
		res.Hosts = st.Hosts
		res.FailedTasks = st.FailedTasks[:min(len(st.FailedTasks), MaxFailedTasks)]
		for i := range res.FailedTasks {
			res.FailedTasks[i].Message = cutRunes(res.FailedTasks[i].Message, MaxTaskMessage)
		}
		res.FailedTaskCount = max(st.FailedTaskCount, int64(len(st.FailedTasks)))
		if a := bytes.TrimSpace(st.Artifacts); len(a) > 0 && !bytes.Equal(a, []byte("null")) {
			if a[0] != '{' {
				return Result{}, errors.New("the runner's report has artifacts that are not a JSON object")
			}
			var buf bytes.Buffer
			if err := json.Compact(&buf, a); err != nil {
				return Result{}, fmt.Errorf("the runner's report has malformed artifacts: %w", err)
			}
			res.Artifacts = buf.String()
		}
	}
	return res, nil
}

// cutRunes cuts s to n runes, the last three of them "...", as the
// callback does.
func cutRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i, end := 0, 0
	for j := range s {
		if i == n-3 {
			end = j
		}
		if i == n {
			return s[:end] + "..."
		}
		i++
	}
	return s
}
