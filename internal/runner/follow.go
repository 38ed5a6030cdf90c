package runner

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/outputtail"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podexec"
)

// Re-attaching: the first wait after a broken session, doubled up to the
// last. A session that got output starts again from the first.
var reattachBackoff = []time.Duration{100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 4 * time.Second}

const (
	// ackEvery is how many output bytes the provider receives between the
	// beats that tell the pod so, which it may then rotate away.
	ackEvery = bundle.SegmentSize
	// cancelGrace is how long a canceled session may take to pass the
	// cancel on to the pod before it is cut.
	cancelGrace = 5 * time.Second
)

// follower follows one run in its pod over as many exec sessions as it
// takes: the first delivers the bundle (again only while the pod has not
// said that the run started: see bundle.DeliverCommand), the others re-attach
// from the last byte received. Every byte of output reaches out once, in
// order, whatever broke in between.
type follower struct {
	r     *Runner
	s     Spec
	pod   *corev1.Pod
	dir   string
	size  int64 // the bundle's
	out   io.Writer
	errs  *outputtail.Tail
	grace time.Duration

	mu      sync.Mutex
	pos     int64 // output bytes received
	started bool  // a session said the run exists
	lastUp  time.Time
	lost    int64
	seq     uint64
}

func newFollower(r *Runner, s Spec, pod *corev1.Pod, out io.Writer, errs *outputtail.Tail) (*follower, error) {
	size, err := s.Bundle.Size()
	if err != nil {
		return nil, because(ReasonBundleFailed, fmt.Errorf("writing the bundle: %w", err))
	}
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	grace := s.Bundle.LeaseGrace
	if grace <= 0 {
		grace = bundle.DefaultLeaseGrace
	}
	return &follower{r: r, s: s, pod: pod, dir: bundle.RunDir(hex.EncodeToString(id)), size: size, out: out, errs: errs,
		grace: grace, lastUp: time.Now()}, nil
}

// sessionEnd is how one exec session ended.
type sessionEnd struct {
	result   *bundle.Result // the whole result and all the output came
	err      error          // the exec's error: a broken stream, a refusal
	code     int            // the exec's exit status, when it reported one
	writeErr error          // the bundle could not be written in full
	resErr   error          // the result came and could not be read
	noRun    bool           // the pod has no run in dir
	got      bool           // the session received output or attached
}

// follow runs sessions until the run's result and every byte of its output
// have come, the run is lost, or ctx ends.
func (f *follower) follow(ctx context.Context) (bundle.Result, error) {
	wait := 0
	for attempt := 1; ; attempt++ {
		end := f.session(ctx, attempt)
		switch {
		case end.result != nil:
			return *end.result, nil
		case end.writeErr != nil:
			// A project file changed while it was sent: the unpack failed, nothing ran.
			return bundle.Result{}, because(ReasonBundleFailed, end.writeErr)
		case end.resErr != nil:
			return bundle.Result{}, because(ReasonResultUnreadable, fmt.Errorf("the runner in pod %s reported an unreadable result: %w", f.pod.Name, end.resErr))
		case ctx.Err() != nil:
			return bundle.Result{}, ctx.Err()
		}
		// Whatever else ended the session, a pod that went is the cause.
		if gone, why := f.r.vanished(ctx, f.pod, f.s.Container); gone != "" {
			return bundle.Result{}, because(why, fmt.Errorf("pod %s %s during the run: %w", f.pod.Name, gone, cmpErr(end.err)))
		}
		switch {
		case end.err == nil && end.code != 0 && !f.isStarted():
			// The delivery itself failed: no sh, tar or head in the image, or the unpack.
			return bundle.Result{}, because(ReasonBundleFailed, fmt.Errorf("the bundle could not run in pod %s (exit %d): %s",
				f.pod.Name, end.code, strings.TrimSpace(f.errs.String())))
		case end.noRun && f.isStarted():
			return bundle.Result{}, because(ReasonStreamLost, fmt.Errorf("the run's directory %s is gone from pod %s (its container "+
				"restarted, or something removed it): the run's end is unknown", f.dir, f.pod.Name))
		case end.err == nil && end.code != 0:
			return bundle.Result{}, because(ReasonStreamLost, fmt.Errorf("following the run in pod %s failed (exit %d): %s",
				f.pod.Name, end.code, strings.TrimSpace(f.errs.String())))
		case end.err != nil && !podexec.Transient(end.err):
			return bundle.Result{}, end.err
		}
		since := time.Since(f.upAt())
		if since > f.grace {
			if lost := f.r.nodeLost(ctx, f.pod, f.s.Container, cmpErr(end.err)); lost != nil {
				return bundle.Result{}, lost
			}
			return bundle.Result{}, because(ReasonStreamLost, fmt.Errorf("the provider could not reach the run in pod %s for %s, "+
				"longer than its disconnect grace period (%s), after which the pod ends the run: %w",
				f.pod.Name, since.Round(time.Second), f.grace, cmpErr(end.err)))
		}
		if end.got {
			wait = 0
		}
		d := reattachBackoff[min(wait, len(reattachBackoff)-1)]
		wait++
		f.r.info("the run's stream broke; following it again", map[string]any{"pod": f.pod.Name, "attempt": attempt + 1,
			"from_byte": f.position(), "after": d.String(), "error": cmpErr(end.err).Error()})
		select {
		case <-ctx.Done():
			return bundle.Result{}, ctx.Err()
		case <-time.After(d):
		}
	}
}

func cmpErr(err error) error {
	if err == nil {
		return errors.New("the stream closed without the run's result")
	}
	return err
}

func (f *follower) isStarted() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.started
}

func (f *follower) position() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pos
}

func (f *follower) upAt() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastUp
}

func (f *follower) up() {
	f.mu.Lock()
	f.lastUp = time.Now()
	f.mu.Unlock()
}

// session is one exec: a delivery while the run has not started, else a
// re-attach from the last byte received.
func (f *follower) session(ctx context.Context, attempt int) sessionEnd {
	deliver := !f.isStarted()
	command := bundle.FollowCommand(f.dir, f.position())
	if deliver {
		command = bundle.DeliverCommand(f.dir, f.size, attempt)
	}
	execCtx, cancelExec := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelExec()
	ss := &followSession{f: f, poke: make(chan struct{}, 1), finished: make(chan struct{}), ended: make(chan struct{})}
	ss.results = bundle.NewResultStream(f.s.Bundle.Marker, errsWriter{ss}, bundle.MaxResultSize)
	pr, pw := io.Pipe()
	writerDone := make(chan struct{})
	var closing atomic.Bool
	go func() {
		defer close(writerDone)
		if err := ss.feed(ctx, pw, deliver); err != nil && deliver && !closing.Load() {
			ss.writeErr = err
		}
	}()
	// Once the result is in, the output may all have come before it: done
	// may be due. A cancel is passed on to the pod over the session, and
	// done once everything came; a session that does not end by itself
	// soon after either is cut.
	stopWatch := make(chan struct{})
	go func() {
		resultIn := ss.results.Done()
		for {
			select {
			case <-resultIn:
				resultIn = nil
				ss.checkDone(f.position())
				continue
			case <-ctx.Done():
			case <-ss.finished:
			case <-stopWatch:
				return
			}
			break
		}
		select {
		case <-time.After(cancelGrace):
			cancelExec()
		case <-stopWatch:
		}
	}()
	code, err := podexec.Run(execCtx, f.r.Config, f.r.Kube, f.pod.Namespace, f.pod.Name, f.s.Container, command, pr, ss, ctlWriter{ss})
	close(stopWatch)
	closing.Store(true)
	close(ss.ended)
	// EOF for client-go's stdin copy, which may still read: it then ends
	// quietly, where an error is logged ("Copying stdin failed").
	_ = pw.Close()
	<-writerDone
	ss.flushLine()
	end := sessionEnd{err: err, code: code, noRun: ss.noRun, got: ss.got.Load()}
	end.writeErr = ss.writeErr
	if end.writeErr != nil {
		return end
	}
	select {
	case <-ss.results.Done():
	default:
		return end // no result, or part of one: the stream broke
	}
	res, perr := ss.results.Result()
	switch {
	case perr == nil && f.position() >= res.OutputSize:
		end.result = &res
	case perr != nil && !errors.Is(perr, bundle.ErrNoResult):
		end.resErr = perr
	}
	return end
}

// followSession is one session's sides: stdout (the output) and stderr
// before the result (control lines, the scripts' own errors).
type followSession struct {
	f        *follower
	results  *bundle.ResultStream
	poke     chan struct{}
	finished chan struct{}
	ended    chan struct{} // the exec returned
	fin      sync.Once
	line     []byte
	writeErr error
	noRun    bool
	got      atomic.Bool // output came, or the run said it is attached; stdout's, stderr's and stdin's goroutines
	sinceAck int64
}

// Write takes output from stdout.
func (ss *followSession) Write(p []byte) (int, error) {
	f := ss.f
	f.mu.Lock()
	f.pos += int64(len(p))
	pos := f.pos
	f.mu.Unlock()
	ss.got.Store(true)
	if _, err := f.out.Write(p); err != nil {
		return 0, err
	}
	ss.sinceAck += int64(len(p))
	if ss.sinceAck >= ackEvery {
		ss.sinceAck = 0
		select {
		case ss.poke <- struct{}{}:
		default:
		}
	}
	ss.checkDone(pos)
	return len(p), nil
}

// checkDone says done once the result and every byte of output are in.
func (ss *followSession) checkDone(pos int64) {
	select {
	case <-ss.results.Done():
	default:
		return
	}
	res, err := ss.results.Result()
	if err != nil || pos >= res.OutputSize {
		ss.fin.Do(func() { close(ss.finished) })
	}
}

// ctlWriter takes the session's stderr: control lines are handled as they
// come (the ResultStream holds back what may be its separator's start);
// the rest, whole lines in order, goes on to the ResultStream.
type ctlWriter struct{ ss *followSession }

func (c ctlWriter) Write(p []byte) (int, error) {
	ss := c.ss
	ss.line = append(ss.line, p...)
	for {
		i := bytes.IndexByte(ss.line, '\n')
		if i < 0 {
			if len(ss.line) > 4096 { // not a control line: pass it on as it comes
				_, _ = ss.results.Write(ss.line)
				ss.line = ss.line[:0]
			}
			return len(p), nil
		}
		if !ss.control(string(ss.line[:i])) {
			_, _ = ss.results.Write(ss.line[:i+1])
		}
		ss.line = ss.line[i+1:]
	}
}

func (ss *followSession) flushLine() {
	if len(ss.line) > 0 {
		_, _ = ss.results.Write(ss.line)
		ss.line = nil
	}
}

// errsWriter takes what came on stderr before the result that is no
// control line: the scripts' own errors.
type errsWriter struct{ ss *followSession }

func (e errsWriter) Write(p []byte) (int, error) { return e.ss.f.errs.Write(p) }

// control handles a control line, and says whether it was one.
func (ss *followSession) control(line string) bool {
	c, ok := bundle.ParseControl(line)
	if !ok {
		return false
	}
	f := ss.f
	switch c.Kind {
	case "attached":
		f.mu.Lock()
		f.started = true
		f.mu.Unlock()
		f.up()
		ss.got.Store(true)
	case "none":
		ss.noRun = true
	case "lost":
		// The follower ends after it; the gap counts where it is, once the
		// bytes before it have come.
		f.mu.Lock()
		if f.pos == c.From {
			f.pos = c.To
			f.lost += c.To - c.From
			f.mu.Unlock()
			_, _ = fmt.Fprintf(f.out, "\n[kubeplay: %d bytes of output were lost here: the pod rotated them away before the provider could read them]\n", c.To-c.From)
			f.r.info("output lost", map[string]any{"pod": f.pod.Name, "from": c.From, "to": c.To})
			return true
		}
		f.mu.Unlock()
	}
	return true
}

// feed writes the session's stdin: the bundle for a delivery, then beats
// until the session ends; a cancel, or done once all came.
func (ss *followSession) feed(ctx context.Context, pw *io.PipeWriter, deliver bool) error {
	f := ss.f
	if deliver {
		// Large writes make large exec frames: tar writes headers and
		// padding in 512-byte pieces.
		w := bufio.NewWriterSize(pw, 256<<10)
		err := f.s.Bundle.Write(w)
		if err == nil {
			err = w.Flush()
		}
		if err != nil {
			if !errors.Is(err, io.ErrClosedPipe) {
				err = fmt.Errorf("writing the bundle: %w", err)
			}
			_ = pw.CloseWithError(err)
			return err
		}
		// The pod has read it all.
		f.s.Timeline.Begin(StepPlaybook, time.Now())
	}
	beat := func() error {
		f.mu.Lock()
		f.seq++
		line := bundle.Beat(f.pos, f.seq)
		f.mu.Unlock()
		_, err := io.WriteString(pw, line)
		return err
	}
	if err := beat(); err != nil {
		return err
	}
	tick := time.NewTicker(bundle.BeatInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			_, _ = io.WriteString(pw, bundle.CancelLine)
			return pw.Close()
		case <-ss.finished:
			if f.s.Timeline.Current() != StepCleanup {
				f.s.Timeline.Begin(StepCleanup, time.Now())
			}
			_, _ = io.WriteString(pw, bundle.DoneLine)
			return pw.Close()
		case <-ss.ended:
			return nil
		case <-tick.C:
		case <-ss.poke:
		}
		if err := beat(); err != nil {
			return err
		}
		if ss.got.Load() {
			f.up()
		}
	}
}
