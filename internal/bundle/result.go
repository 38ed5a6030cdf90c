package bundle

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"maps"
	"slices"
	"strconv"
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
// hosts (MaxHosts) it is about 700 KB. The runner's pod
// writes it, so a playbook or an image can make it anything: the provider
// keeps at most this much of it, and decodes it a value at a time.
const MaxResultSize = 8 << 20

// MaxHosts is how many hosts' recaps a result keeps (the first by name),
// for a run's host_stats with record_all_hosts; Result.HostCount counts
// them all.
const MaxHosts = 5000

// MaxFailedHosts is how many recaps of hosts that failed or were
// unreachable a result keeps (the first by name), for a run's host_stats by
// default; Result.HostCounts counts them all. As MaxFailedTasks, enough to
// see what went wrong, and a bound on the state whatever the inventory.
const MaxFailedHosts = 100

// MaxArtifacts bounds the set_stats data kept for the state, compacted.
const MaxArtifacts = 1 << 20

// MaxFailedTasks is how many failed tasks the callback keeps (the first
// ones); FailedTaskCount counts them all. The callback's MAX_FAILED_TASKS.
const MaxFailedTasks = 100

// MaxTaskMessage bounds a failed task's message, in characters; the
// callback cuts longer ones to this length, ending them with "...". Its
// MAX_MESSAGE.
const MaxTaskMessage = 2048

// MaxChanges is how many changed tasks a check keeps (the first ones);
// Check.ChangeCount counts them all. The callback's MAX_CHANGES.
const MaxChanges = 100

// MaxDiff bounds a changed task's diff, in characters; the callback cuts
// longer ones (Change.DiffSize is the whole length). Its MAX_DIFF.
const MaxDiff = 8192

// maxAction bounds a change's module name, in characters.
const maxAction = 256

// Change is one task that a check (--check) says would change a host.
type Change struct {
	Host   string `json:"host"`
	Task   string `json:"task"`
	Action string `json:"action"`
	// Diff is the task's diff (--diff), at most MaxDiff characters; "" for
	// a module that reports none, and for a check without CheckDiffs.
	Diff string `json:"diff"`
	// DiffSize is the whole diff's length in characters, cut or not.
	DiffSize int64 `json:"diff_size"`
	// LinesAdded and LinesRemoved count the diff's lines.
	LinesAdded   int64 `json:"lines_added"`
	LinesRemoved int64 `json:"lines_removed"`
	// Ran marks a task with check_mode: false, which ran for real.
	Ran bool `json:"ran"`
}

// Check is what a run in check mode reports beside its recap.
type Check struct {
	// Changes are the first MaxChanges changed tasks, in order;
	// ChangeCount counts them all.
	Changes     []Change
	ChangeCount int64
	// NotCheckable counts the tasks skipped because their module does not
	// support check mode.
	NotCheckable int64
}

// ErrNoResult means the stream ended without the runner's separator: the
// script never got to report (the bundle did not unpack, the pod died).
var ErrNoResult = errors.New("the runner reported no result")

// ResultTooLargeError is a result document over the limit.
type ResultTooLargeError struct{ Limit int }

func (e *ResultTooLargeError) Error() string {
	return fmt.Sprintf("the run's result is larger than the %d MiB kubeplay reads (huge set_stats data, or a result "+
		"file the playbook or the image wrote): it was not read. Keep large data out of set_stats (write it to a file or "+
		"store and return a reference to it), and do not write to the runner's result file", e.Limit>>20)
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
	// tail is the end of what followed the first separator, where the
	// second may have begun; complete is set, and done closed, once it came.
	tail     []byte
	complete bool
	done     chan struct{}
}

// NewResultStream returns a ResultStream for marker (Bundle.Marker) that
// keeps at most limit bytes of result.
func NewResultStream(marker string, before io.Writer, limit int) *ResultStream {
	return &ResultStream{sep: []byte("\n" + marker + "\n"), before: before, limit: limit, done: make(chan struct{})}
}

// Done is closed once the whole document has come: the script writes the
// separator again after it. The client then closes the script's stdin,
// which lets the script end.
func (s *ResultStream) Done() <-chan struct{} { return s.done }

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
	if s.complete {
		return n, nil
	}
	p = s.closing(p)
	if room := s.limit - s.doc.Len(); len(p) > room {
		s.over = true
		p = p[:max(room, 0)]
	}
	s.doc.Write(p)
	return n, nil
}

// closing looks for the second separator in p, across writes: it returns
// the part of p before it (and takes from the document what of it came in
// earlier writes), or all of p while it has not come.
func (s *ResultStream) closing(p []byte) []byte {
	buf := append(slices.Clip(s.tail), p...)
	i := bytes.Index(buf, s.sep)
	if i < 0 {
		s.tail = append(s.tail[:0], buf[max(0, len(buf)-len(s.sep)+1):]...)
		return p
	}
	s.complete = true
	close(s.done)
	s.tail = nil
	if k := i - (len(buf) - len(p)); k >= 0 {
		return p[:k]
	}
	// The separator began in an earlier write, whose bytes are in the
	// document unless the limit cut them.
	if !s.over {
		s.doc.Truncate(max(0, s.doc.Len()+i-(len(buf)-len(p))))
	}
	return nil
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
	return DecodeResult(bytes.NewReader(s.doc.Bytes())) // again on each call
}

// ParseResult reads a result document.
func ParseResult(payload string) (Result, error) {
	return DecodeResult(strings.NewReader(payload))
}

// DecodeResult reads one result document, at most MaxResultSize bytes,
// from r: a header line the script writes, {"rc": N, "oom_kills": N,
// "output_size": N, "abandoned": B} and, after a host step, "hosts_total":
// N, "hosts_sha256": S, "slice_hosts": N; then the stats document, whatever
// the stats file held: null | {"hosts": {...}, "failed_tasks": [...],
// "failed_task_count": N, "artifacts": {...}, "check": {...}}. The two are
// read apart, so no byte of the stats file, which any process of the run
// may write, can change the header's exit code. Both are read strictly:
// one JSON value each, no key twice in any object, at most maxDepth
// levels, nothing but white space after. A header that is not so is an
// error; stats that are not so are refused: the result keeps the header and
// says why in StatsErr, with no stats. It decodes a host or a task at a
// time, keeping the first MaxHosts hosts by name, the first MaxFailedHosts
// of those that failed or were unreachable, and the first MaxFailedTasks
// failed tasks (their host and task names and messages cut to
// MaxTaskMessage characters) and counting the rest, so that memory stays
// bounded whatever the document holds. Artifacts over MaxArtifacts are
// refused.
func DecodeResult(r io.Reader) (Result, error) {
	lr := &io.LimitedReader{R: r, N: MaxResultSize + 1}
	br := bufio.NewReaderSize(lr, maxHeader)
	res, err := decodeHeader(br)
	if err == nil {
		dec := json.NewDecoder(br)
		dec.UseNumber()
		stats, serr := decodeStatsDoc(dec)
		if serr == nil {
			if _, e := dec.Token(); e != io.EOF {
				serr = errors.New("data follows the stats document")
			}
		}
		if serr == nil {
			stats.ExitCode, stats.OOMKills, stats.OutputSize, stats.Abandoned = res.ExitCode, res.OOMKills, res.OutputSize, res.Abandoned
			stats.HostList, stats.HostsTotal, stats.HostsSHA256, stats.SliceHosts = res.HostList, res.HostsTotal, res.HostsSHA256, res.SliceHosts
			res = stats
		} else {
			res.StatsErr = &StatsError{msg: serr.Error()}
		}
	}
	_, _ = io.Copy(io.Discard, br) // to tell a document over the limit
	if lr.N <= 0 {
		return Result{}, &ResultTooLargeError{Limit: MaxResultSize}
	}
	if err != nil {
		return Result{}, fmt.Errorf("the runner's report is not JSON: %w", err)
	}
	return res, nil
}

// maxHeader bounds the report's header line, which the script writes with
// a few numbers and a digest.
const maxHeader = 4096

// maxDepth bounds the nesting of the stats document. The callback's
// documents are a few levels deep; set_stats data deeper than Python's
// recursion limit cannot be written by it.
const maxDepth = 1000

// StatsError is a stats document the provider refused (Result.StatsErr):
// not one JSON object or null, a key given twice, too deep, data after it,
// or artifacts it does not keep.
type StatsError struct{ msg string }

func (e *StatsError) Error() string {
	return "the run's stats document (the file $KUBEPLAY_STATS_FILE, which the callback writes and any process of the " +
		"run can) was refused: " + e.msg
}

// decodeHeader reads the report's first line, which the script writes:
// an object of rc and, as the script writes them, oom_kills, output_size
// and abandoned, and the host list's hosts_total, hosts_sha256 and
// slice_hosts all or none, each at most once, and nothing else.
func decodeHeader(br *bufio.Reader) (Result, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return Result{}, errors.New("the report's header line is too long")
		}
		if len(bytes.TrimSpace(line)) == 0 {
			return Result{}, errors.New("the runner's report has no exit code")
		}
		return Result{}, fmt.Errorf("the report's header line has no end: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var res Result
	var rc bool
	var hostKeys int
	null, err := openOrNull(dec, '{')
	if err != nil || null {
		return Result{}, errOr(err, errors.New("the runner's report has no exit code"))
	}
	err = keysOf(dec, func(key string) error {
		var err error
		var n int64
		switch key {
		case "rc":
			if tok, e := dec.Token(); e != nil || tok == nil {
				return errOr(e, errors.New("the runner's report has no exit code"))
			} else if n, err = intOf(tok); err == nil {
				res.ExitCode, rc = int(n), true
			}
		case "oom_kills":
			if n, err = decodeInt(dec); err == nil {
				res.OOMKills = max(0, n) // a counter reset reads as none
			}
		case "output_size":
			if n, err = decodeInt(dec); err == nil {
				res.OutputSize = max(0, n)
			}
		case "abandoned":
			var tok json.Token
			if tok, err = dec.Token(); err == nil {
				var isBool bool
				if res.Abandoned, isBool = tok.(bool); !isBool {
					err = fmt.Errorf("abandoned is %v, not true or false", tok)
				}
			}
		case "hosts_total", "slice_hosts":
			if n, err = decodeInt(dec); err == nil && n < 0 {
				err = fmt.Errorf("%s is %d, not a count of hosts", key, n)
			}
			if key == "hosts_total" {
				res.HostsTotal = n
			} else {
				res.SliceHosts = n
			}
			hostKeys++
		case "hosts_sha256":
			var tok json.Token
			if tok, err = dec.Token(); err == nil {
				if s, isString := tok.(string); isString && sha256Hex.MatchString(s) {
					res.HostsSHA256 = s
				} else {
					err = fmt.Errorf("hosts_sha256 is %.80v, not a SHA-256 digest in lower-case hex", tok)
				}
			}
			hostKeys++
		default:
			err = fmt.Errorf("unexpected key %q in the report's header", key)
		}
		return err
	})
	if err == nil {
		err = checkHostList(&res, hostKeys)
	}
	if err == nil {
		if _, e := dec.Token(); e != io.EOF {
			err = errors.New("data follows the report's header")
		}
	}
	switch {
	case err != nil:
		return Result{}, err
	case !rc:
		return Result{}, errors.New("the runner's report has no exit code")
	}
	return res, nil
}

// checkHostList checks the header's host list fields, of which n were
// given: all three or none, and the slice within the list.
func checkHostList(res *Result, n int) error {
	switch {
	case n != 0 && n != 3:
		return errors.New("the report's header has some of hosts_total, hosts_sha256 and slice_hosts, not all three")
	case res.SliceHosts > res.HostsTotal:
		return fmt.Errorf("the report's header has slice_hosts %d, more than hosts_total %d", res.SliceHosts, res.HostsTotal)
	}
	res.HostList = n == 3
	return nil
}

// decodeStatsDoc reads the stats document: null, or the callback's object.
func decodeStatsDoc(dec *json.Decoder) (Result, error) {
	var res Result
	if null, err := openOrNull(dec, '{'); null || err != nil {
		if err == io.EOF {
			err = errors.New("it is empty")
		}
		return res, err
	}
	err := keysOf(dec, func(key string) error { return decodeStats(dec, key, &res) })
	res.FailedTaskCount = max(res.FailedTaskCount, int64(len(res.FailedTasks)))
	return res, err
}

// artifactsError is artifacts the provider refuses, said as such rather
// than as a syntax error.
type artifactsError struct{ msg string }

func (e *artifactsError) Error() string { return e.msg }

func errOr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}

func decodeStats(dec *json.Decoder, key string, res *Result) error {
	switch key {
	case "hosts":
		res.Hosts, res.HostCount, res.HostCounts, res.FailedHosts, res.NotOKHosts = nil, 0, HostCounts{}, nil, nil
		if null, err := openOrNull(dec, '{'); null || err != nil {
			return err
		}
		res.Hosts, res.FailedHosts = map[string]HostStats{}, map[string]HostStats{}
		err := keysOf(dec, func(host string) error { // keysOf refuses a host given twice
			var s HostStats
			if err := decodeStrict(dec, &s); err != nil {
				return err
			}
			res.HostCount++
			res.HostCounts.add(s, 1)
			res.Hosts[host] = s
			if s.NotOK() {
				res.FailedHosts[host] = s
				res.NotOKHosts = append(res.NotOKHosts, host)
			}
			if len(res.Hosts) >= 2*MaxHosts {
				keepFirst(res.Hosts, MaxHosts)
			}
			if len(res.FailedHosts) >= 2*MaxFailedHosts {
				keepFirst(res.FailedHosts, MaxFailedHosts)
			}
			return nil
		})
		keepFirst(res.Hosts, MaxHosts)
		keepFirst(res.FailedHosts, MaxFailedHosts)
		return err
	case "failed_tasks":
		var seen int64
		res.FailedTasks = nil
		if null, err := openOrNull(dec, '['); null || err != nil {
			return err
		}
		err := elemsOf(dec, func() error {
			var t FailedTask
			if err := decodeStrict(dec, &t); err != nil {
				return err
			}
			if seen++; len(res.FailedTasks) < MaxFailedTasks {
				t.Host, t.Task = cutRunes(t.Host, MaxTaskMessage), cutRunes(t.Task, MaxTaskMessage)
				t.Message = cutRunes(t.Message, MaxTaskMessage)
				res.FailedTasks = append(res.FailedTasks, t)
			}
			return nil
		})
		res.FailedTaskCount = max(res.FailedTaskCount, seen)
		return err
	case "failed_task_count":
		n, err := decodeInt(dec)
		if err != nil {
			return err
		}
		res.FailedTaskCount = max(res.FailedTaskCount, n)
		return nil
	case "artifacts":
		var a json.RawMessage
		if err := dec.Decode(&a); err != nil {
			return err
		}
		res.Artifacts = ""
		if a = bytes.TrimSpace(a); len(a) == 0 || bytes.Equal(a, []byte("null")) {
			return nil
		}
		if a[0] != '{' {
			return &artifactsError{"the runner's report has artifacts that are not a JSON object"}
		}
		if err := strictValue(a, maxDepth, false); err != nil {
			return err
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, a); err != nil {
			return &artifactsError{fmt.Sprintf("the runner's report has malformed artifacts: %v", err)}
		}
		if buf.Len() > MaxArtifacts {
			return &artifactsError{fmt.Sprintf("the run's set_stats data (artifacts) is larger than %d MiB, more than "+
				"kubeplay keeps in the state: it was not read; keep large data out of set_stats", MaxArtifacts>>20)}
		}
		res.Artifacts = buf.String()
		return nil
	case "check":
		res.Check = nil
		if null, err := openOrNull(dec, '{'); null || err != nil {
			return err
		}
		res.Check = &Check{}
		return keysOf(dec, func(key string) error { return decodeCheck(dec, key, res.Check) })
	}
	return skip(dec)
}

// decodeCheck reads a key of the check's object: the first MaxChanges
// changes, their text cut as failed tasks' is and their diffs to MaxDiff
// characters, and the counts (never below what was seen).
func decodeCheck(dec *json.Decoder, key string, c *Check) error {
	switch key {
	case "changes":
		var seen int64
		c.Changes = nil
		if null, err := openOrNull(dec, '['); null || err != nil {
			return err
		}
		err := elemsOf(dec, func() error {
			var ch Change
			if err := decodeStrict(dec, &ch); err != nil {
				return err
			}
			if seen++; len(c.Changes) < MaxChanges {
				ch.Host, ch.Task = cutRunes(ch.Host, MaxTaskMessage), cutRunes(ch.Task, MaxTaskMessage)
				ch.Action = cutRunes(ch.Action, maxAction)
				n := int64(len([]rune(ch.Diff)))
				if n > MaxDiff {
					ch.Diff = string([]rune(ch.Diff)[:MaxDiff])
				}
				ch.DiffSize = max(ch.DiffSize, n)
				ch.LinesAdded, ch.LinesRemoved = max(ch.LinesAdded, 0), max(ch.LinesRemoved, 0)
				c.Changes = append(c.Changes, ch)
			}
			return nil
		})
		c.ChangeCount = max(c.ChangeCount, seen)
		return err
	case "change_count", "not_checkable":
		n, err := decodeInt(dec)
		if err != nil {
			return err
		}
		if key == "change_count" {
			c.ChangeCount = max(c.ChangeCount, n, int64(len(c.Changes)))
		} else {
			c.NotCheckable = max(0, n)
		}
		return nil
	}
	return skip(dec)
}

// keepFirst drops all but the first n hosts by name.
func keepFirst(hosts map[string]HostStats, n int) {
	if len(hosts) <= n {
		return
	}
	names := slices.Sorted(maps.Keys(hosts))
	for _, h := range names[n:] {
		delete(hosts, h)
	}
}

// keysOf reads an object's members once its '{' is read, calling fn with
// each key with the decoder at its value; fn must consume the value. A key
// given twice is an error: JSON leaves its meaning open, and a decoder
// that takes the last would let a writer of the stats' end override their
// start.
func keysOf(dec *json.Decoder, fn func(key string) error) error {
	return members(dec, false, fn)
}

// keySeed hashes keys to tell duplicates: a document's keys cost 8 bytes
// each however long they are.
var keySeed = maphash.MakeSeed()

// members is keysOf; with fold, keys that differ only in case count as
// the same, as encoding/json matches them to a struct's fields.
func members(dec *json.Decoder, fold bool, fn func(key string) error) error {
	seen := map[uint64]struct{}{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, ok := tok.(string)
		if !ok {
			return fmt.Errorf("unexpected %v for an object key", tok)
		}
		h := key
		if fold {
			h = strings.ToLower(key)
		}
		sum := maphash.String(keySeed, h)
		if _, dup := seen[sum]; dup {
			return fmt.Errorf("the key %.64q is given twice in an object", key)
		}
		seen[sum] = struct{}{}
		if err := fn(key); err != nil {
			return err
		}
	}
	return expectDelim(dec, '}')
}

// elemsOf reads an array's elements once its '[' is read, calling fn with
// the decoder at each.
func elemsOf(dec *json.Decoder, fn func() error) error {
	for dec.More() {
		if err := fn(); err != nil {
			return err
		}
	}
	return expectDelim(dec, ']')
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("unexpected %v, want %v", tok, want)
	}
	return nil
}

// openOrNull reads the next value's first token: true for null, false
// for the delimiter want (the value's body follows), an error otherwise.
func openOrNull(dec *json.Decoder, want json.Delim) (bool, error) {
	tok, err := dec.Token()
	if err != nil {
		return false, err
	}
	if tok == nil {
		return true, nil
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return false, fmt.Errorf("unexpected %v, want %v or null", tok, want)
	}
	return false, nil
}

// skip reads and drops one value, a token at a time, as strictly as the
// rest: no key twice, at most maxDepth levels.
func skip(dec *json.Decoder) error { return walk(dec, maxDepth, false) }

// walk reads one value, at most depth levels deep.
func walk(dec *json.Decoder, depth int, fold bool) error {
	if depth <= 0 {
		return fmt.Errorf("the document is nested more than %d levels deep", maxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		return members(dec, fold, func(string) error { return walk(dec, depth-1, fold) })
	case json.Delim('['):
		return elemsOf(dec, func() error { return walk(dec, depth-1, fold) })
	}
	return nil
}

// strictValue checks that doc is one JSON value as walk reads it.
func strictValue(doc []byte, depth int, fold bool) error {
	dec := json.NewDecoder(bytes.NewReader(doc))
	if err := walk(dec, depth, fold); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data follows a value")
	}
	return nil
}

// decodeStrict decodes the next value into the struct v once it is
// strict: encoding/json takes the last of a key given twice, in any case.
func decodeStrict(dec *json.Decoder, v any) error {
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return err
	}
	if err := strictValue(raw, maxDepth, true); err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}

// decodeInt reads an integer that fits an int64.
func decodeInt(dec *json.Decoder) (int64, error) {
	tok, err := dec.Token()
	if err != nil {
		return 0, err
	}
	return intOf(tok)
}

// intOf is a token (of a decoder that uses json.Number) as an int64.
func intOf(tok json.Token) (int64, error) {
	n, ok := tok.(json.Number)
	if !ok {
		return 0, fmt.Errorf("%v is not a number", tok)
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%.32s is not an integer kubeplay reads", n)
	}
	return i, nil
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
