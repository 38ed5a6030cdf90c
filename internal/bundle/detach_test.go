package bundle

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// session is one exec into a run, on this host, as the runner makes it:
// the bundle (for a delivery) then beats on stdin, the output on stdout,
// control lines and the result on stderr.
type session struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	mu     sync.Mutex
	out    bytes.Buffer
	before lockedBuffer
	rs     *ResultStream
	exited chan error
	seq    uint64
	from   int64 // the output's position the session started at
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (s *session) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.Write(p)
}

// output is what came on stdout so far.
func (s *session) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

// startSession runs command with PATH extended by path; stdin gets first.
func startSession(t *testing.T, command []string, first []byte, path ...string) *session {
	t.Helper()
	s := &session{t: t, exited: make(chan error, 1)}
	s.cmd = exec.Command(command[0], command[1:]...)
	s.cmd.Env = append(os.Environ(), "PATH="+strings.Join(append(path, os.Getenv("PATH")), string(filepath.ListSeparator)))
	s.rs = NewResultStream(testMarker, &s.before, MaxResultSize)
	s.cmd.Stdout, s.cmd.Stderr = s, s.rs
	w, err := s.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.stdin = w
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.exited <- s.cmd.Wait() }()
	t.Cleanup(func() { _ = s.stdin.Close(); _ = s.cmd.Process.Kill() })
	if len(first) > 0 {
		if _, err := w.Write(first); err != nil {
			t.Fatal(err)
		}
	}
	s.beat()
	return s
}

// deliver starts the run of b in run directory dir.
func deliver(t *testing.T, dir string, b *Bundle, attempt int, path ...string) *session {
	t.Helper()
	var buf bytes.Buffer
	if err := b.Write(&buf); err != nil {
		t.Fatal(err)
	}
	return startSession(t, DeliverCommand(dir, int64(buf.Len()), attempt), buf.Bytes(), path...)
}

// follow attaches to the run in dir from pos.
func follow(t *testing.T, dir string, pos int64) *session {
	t.Helper()
	s := startSession(t, FollowCommand(dir, pos), nil)
	s.from = pos
	return s
}

func (s *session) beat() {
	s.seq++
	_, _ = io.WriteString(s.stdin, Beat(s.from+int64(len(s.output())), s.seq))
}

// cut ends the session as a broken stream does: its stdin ends, and it must
// end at once, not after the disconnect grace (30 s); 20 s leaves room for
// a machine whose tests keep both CPUs busy (make test-all saw 5 s pass).
func (s *session) cut() {
	s.t.Helper()
	_ = s.stdin.Close()
	select {
	case err := <-s.exited:
		s.t.Logf("session ended: %v", err)
	case <-time.After(20 * time.Second):
		s.t.Fatal("the session did not end within 20 s of its stdin")
	}
}

// finish waits for the result and the whole output, says done, and waits
// for the session to end.
func (s *session) finish() Result {
	s.t.Helper()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case <-s.rs.Done():
		case err := <-s.exited:
			s.t.Fatalf("the session ended (%v) before the result; stderr %q", err, s.before.String())
		case <-tick.C:
			s.beat()
			continue
		case <-deadline:
			s.t.Fatalf("no result in 60 s; output %q, stderr %q", s.output(), s.before.String())
		}
		break
	}
	r, err := s.rs.Result()
	if err != nil {
		s.t.Fatalf("result: %v", err)
	}
	for end := time.Now().Add(10 * time.Second); s.from+int64(len(s.output())) < r.OutputSize; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			s.t.Fatalf("%d bytes of output, the result says %d; stderr %q", len(s.output()), r.OutputSize, s.before.String())
		}
	}
	_, _ = io.WriteString(s.stdin, DoneLine)
	_ = s.stdin.Close()
	select {
	case err := <-s.exited:
		if err != nil {
			s.t.Errorf("the session ended with %v after done, want exit 0", err)
		}
	case <-time.After(10 * time.Second):
		s.t.Fatal("the session did not end 10 s after done")
	}
	return r
}

// runDir is a fresh run directory path under the test's temp dir.
func runDir(t *testing.T) string {
	return filepath.Join(t.TempDir(), "kubeplay.test")
}

// runOnce delivers and follows a run to its end: the output, stderr before
// the result, and the result.
func runOnce(t *testing.T, b *Bundle, path ...string) (string, string, Result) {
	t.Helper()
	s := deliver(t, runDir(t), b, 1, path...)
	r := s.finish()
	return s.output(), s.before.String(), r
}

// useContainerLog points the run's copy of its output for `kubectl logs`
// (containerLog) at an empty file of the test's own until the test ends,
// and returns the file's path.
func useContainerLog(t *testing.T) string {
	t.Helper()
	log := filepath.Join(t.TempDir(), "container.log")
	if err := os.WriteFile(log, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	old := containerLog
	containerLog = log
	t.Cleanup(func() { containerLog = old })
	return log
}

func TestDetachedRunOutputAndLog(t *testing.T) {
	log := useContainerLog(t)
	b := Bundle{Command: []string{"sh", "-c", "echo one; echo two >&2; printf 'no newline'; exit 4"}, Marker: testMarker}
	out, before, r := runOnce(t, &b)
	if out != "one\ntwo\nno newline" || r.ExitCode != 4 || r.OutputSize != int64(len(out)) {
		t.Errorf("output %q, result %+v, stderr %q", out, r, before)
	}
	if strings.TrimSpace(before) != "kp-attached" {
		t.Errorf("stderr before the result %q, want kp-attached", before)
	}
	if got, _ := os.ReadFile(log); string(got) != out {
		t.Errorf("container log %q, want the output", got)
	}
}

// A run with secrets keeps its output out of the container's log, which
// no one redacts, and the log says why; the output itself is whole.
func TestDetachedRunPrivateOutput(t *testing.T) {
	log := useContainerLog(t)
	const secret = "s3cr3t-in-the-log-5c1e"
	b := Bundle{Command: []string{"sh", "-c", "echo the secret is " + secret}, Marker: testMarker, PrivateOutput: true}
	out, _, r := runOnce(t, &b)
	if out != "the secret is "+secret+"\n" || r.ExitCode != 0 {
		t.Errorf("output %q, result %+v", out, r)
	}
	got, _ := os.ReadFile(log)
	if strings.Contains(string(got), secret) || !strings.Contains(string(got), "output is not copied to this log") {
		t.Errorf("container log %q: want the notice and not the secret", got)
	}
}

// A cut stream leaves the run going; a follower from the byte it had gets
// the rest, and the whole is the output of an uncut run.
func TestDetachedRunSurvivesCuts(t *testing.T) {
	b := Bundle{Command: []string{"sh", "-c", `i=0; while [ $i -lt 40 ]; do echo "line $i"; echo "$i" >>ran; i=$((i+1)); sleep 0.05; done`},
		Marker: testMarker}
	dir := runDir(t)
	s := deliver(t, dir, &b, 1)
	var got strings.Builder
	for range 4 {
		time.Sleep(300 * time.Millisecond)
		s.cut()
		got.WriteString(s.output())
		s = follow(t, dir, int64(got.Len()))
	}
	r := s.finish()
	got.WriteString(s.output())
	var want strings.Builder
	for i := range 40 {
		want.WriteString("line " + strconv.Itoa(i) + "\n")
	}
	if got.String() != want.String() || r.ExitCode != 0 || r.OutputSize != int64(want.Len()) {
		t.Errorf("output after cuts %q, want %q; result %+v", got.String(), want.String(), r)
	}
	ran, _ := os.ReadFile(filepath.Join(dir, "b", "ran"))
	if n := strings.Count(string(ran), "\n"); n != 40 {
		t.Errorf("the loop ran %d times, want 40", n)
	}
}

// A second delivery of the same run (the first's stream broke) does not
// start it again.
func TestDeliveryRunsOnce(t *testing.T) {
	b := Bundle{Command: []string{"sh", "-c", `echo ran >>../once; sleep 1; echo done`}, Marker: testMarker}
	dir := runDir(t)
	s1 := deliver(t, dir, &b, 1)
	s2 := deliver(t, dir, &b, 2)
	s1.cut()
	r := s2.finish()
	if s2.output() != "done\n" || r.ExitCode != 0 {
		t.Errorf("second delivery: output %q result %+v", s2.output(), r)
	}
	if once, _ := os.ReadFile(filepath.Join(dir, "once")); string(once) != "ran\n" {
		t.Errorf("the command ran %q times", once)
	}
	if _, err := os.Stat(dir + ".p2"); !os.IsNotExist(err) {
		t.Errorf("the second attempt's directory is left: %v", err)
	}
}

// A follower of a directory with no run says so.
func TestFollowNoRun(t *testing.T) {
	s := follow(t, runDir(t), 0)
	err := <-s.exited
	_, _ = s.rs.Result() // flushes stderr
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitNoRun || !strings.Contains(s.before.String(), "kp-none") {
		t.Errorf("exit %v, stderr %q", err, s.before.String())
	}
}

// Without beats for its grace, the pod ends the run: the playbook with all
// it started, and the worker.
func TestWatchdogEndsAnAbandonedRun(t *testing.T) {
	worker := fakeWorker(t)
	b := Bundle{Command: []string{"sh", "-c", `sleep 300 & echo $! > child.pid; wait`}, Marker: testMarker, LeaseGrace: time.Second}
	dir := runDir(t)
	start := time.Now() // before the session's only beat
	s := deliver(t, dir, &b, 1)
	child := childPID(t, filepath.Join(dir, "b"))
	s.cut()
	select {
	case werr := <-worker:
		if ws, ok := exitStatus(werr); !ok || ws.Signal() != syscall.SIGTERM {
			t.Errorf("the worker ended with %v, want SIGTERM", werr)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the worker was not signalled within 15 s")
	}
	took := time.Since(start)
	if !gone(child) {
		t.Errorf("the command's child %d outlived the run", child)
	}
	if took < 2*time.Second {
		t.Errorf("the run ended %s after its start and only beat, before its grace", took)
	}
	r := follow(t, dir, 0).finish()
	if !r.Abandoned || r.ExitCode == 0 {
		t.Errorf("result %+v, want an abandoned run with the killed command's status", r)
	}
}

// Beats keep a silent run alive past its grace. The grace is three of the
// watchdog's looks (a group's least grace is five): the follower that
// writes the first beat has started 2 s after the run on a busy host.
func TestBeatsKeepARunAlive(t *testing.T) {
	worker := fakeWorker(t)
	b := Bundle{Command: []string{"sh", "-c", `sleep 13; echo finished`}, Marker: testMarker, LeaseGrace: 6 * time.Second}
	r := deliver(t, runDir(t), &b, 1).finish()
	if r.Abandoned || r.ExitCode != 0 {
		t.Errorf("result %+v", r)
	}
	select {
	case werr := <-worker:
		t.Errorf("the worker ended (%v)", werr)
	default:
	}
}

// untilBeatFile polls the run's beat file (a file in the pod, which no API
// watches) until it holds a line that ok accepts, calling meanwhile each
// 5 ms; it fails the test after a minute.
func (s *session) untilBeatFile(beat, what string, ok func(string) bool, meanwhile func()) {
	s.t.Helper()
	for end := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		if got, _ := os.ReadFile(beat); len(got) > 0 && ok(string(got)) {
			return
		}
		if time.Now().After(end) {
			s.t.Fatalf("%s was not in the beat file within a minute; stderr %q", what, s.before.String())
		}
		meanwhile()
	}
}

// A follower replaces the beat file whole, so that no one reads it empty,
// which is the watchdog's state before the first beat: a beat written in
// place (truncated, then written) read empty at the watchdog's look that
// came with it, and ended a run its provider kept beating.
func TestBeatFileNeverReadsEmpty(t *testing.T) {
	b := Bundle{Command: []string{"sh", "-c", `while [ ! -e stop ]; do sleep 0.05; done`}, Marker: testMarker}
	dir := runDir(t)
	beat := filepath.Join(dir, "beat")
	s := deliver(t, dir, &b, 1)
	// The follower starts in its own time (seconds, on a busy host).
	s.untilBeatFile(beat, "a beat", func(string) bool { return true }, s.beat)
	stop := make(chan struct{})
	counted := make(chan [2]int)
	go func() {
		reads, empty := 0, 0
		for {
			select {
			case <-stop:
				counted <- [2]int{reads, empty}
				return
			default:
			}
			if got, err := os.ReadFile(beat); err == nil && len(got) > 0 {
				reads++
			} else {
				empty++
			}
		}
	}()
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		s.beat()
	}
	// The follower forks a rename per beat: on a busy host it lags the beats,
	// and its "done" waits behind them. Count until the last beat is in.
	last := fmt.Sprintf(" %d\n", s.seq)
	s.untilBeatFile(beat, "the last beat", func(b string) bool { return strings.HasSuffix(b, last) }, func() {})
	close(stop)
	c := <-counted
	if err := os.WriteFile(filepath.Join(dir, "b", "stop"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s.finish()
	t.Logf("%d reads of the beat file while it was rewritten, %d of them empty or missing", c[0]+c[1], c[1])
	if c[0] == 0 || c[1] > 0 {
		t.Errorf("%d reads with a beat, %d empty or missing: want some and none", c[0], c[1])
	}
}

// Cancel ends the playbook at once, and the worker; a held node's worker stays.
func TestCancelEndsTheRun(t *testing.T) {
	for _, held := range []bool{false, true} {
		t.Run("held="+strconv.FormatBool(held), func(t *testing.T) {
			worker := fakeWorker(t)
			b := Bundle{Command: []string{"sh", "-c", `sleep 300 & echo $! > child.pid; wait`}, Marker: testMarker, Held: held}
			dir := runDir(t)
			s := deliver(t, dir, &b, 1)
			child := childPID(t, filepath.Join(dir, "b"))
			_, _ = io.WriteString(s.stdin, CancelLine)
			r := s.finish()
			if r.ExitCode == 0 {
				t.Errorf("result %+v, want the killed command's status", r)
			}
			if !gone(child) {
				t.Errorf("the command's child %d outlived the cancel", child)
			}
			select {
			case werr := <-worker:
				if held {
					t.Errorf("the held node's worker ended: %v", werr)
				}
			case <-time.After(time.Second):
				if !held {
					t.Error("the worker was not signalled")
				}
			}
		})
	}
}

// fakeWorker starts a process that stands for the pod's worker and writes
// its pid where the script looks for it. The channel gets its exit.
func fakeWorker(t *testing.T) <-chan error {
	t.Helper()
	w := exec.Command("sleep", "60")
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Process.Kill() })
	if err := os.WriteFile(workerPIDFile, []byte(strconv.Itoa(w.Process.Pid)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(workerPIDFile) })
	done := make(chan error, 1)
	go func() { done <- w.Wait() }()
	return done
}

// childPID waits up to 10 s for the command to write its child's pid to
// child.pid in dir, and returns it.
func childPID(t *testing.T, dir string) int {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		c, _ := os.ReadFile(filepath.Join(dir, "child.pid"))
		if child, _ := strconv.Atoi(strings.TrimSpace(string(c))); child != 0 {
			return child
		}
	}
	t.Fatal("the command did not start")
	return 0
}

// gone waits up to 5 s for pid to be no more.
func gone(pid int) bool {
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			return true
		}
	}
	return false
}

func exitStatus(err error) (syscall.WaitStatus, bool) {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return 0, false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ws, ok
}

// Output the provider does not read is kept up to OutputCap: past it the
// oldest segments go, and a follower from before the gap says how many
// bytes it lost, then the rest comes whole.
func TestOutputRotatesPastTheCap(t *testing.T) {
	const total = OutputCap + 16<<20
	b := Bundle{Command: []string{"sh", "-c", "head -c " + strconv.Itoa(total) + " /dev/zero | tr '\\0' x"}, Marker: testMarker}
	dir := runDir(t)
	s := deliver(t, dir, &b, 1)
	s.cut() // nothing read, nothing acknowledged
	// With no follower the watchdog ends the run after 30 s without a
	// beat: on a loaded machine (make test-all's phase 2) writing 80 MiB
	// took longer, the run was abandoned before its output passed the cap,
	// and the follower below, finding nothing lost, waited for its stdin.
	// So the test beats as a follower would, acknowledging nothing.
	beat, seq := filepath.Join(dir, "beat"), uint64(0)
	var r Result
	for end, next := time.Now().Add(3*time.Minute), time.Now(); ; time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "size")); err == nil {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the run did not end within 3 minutes")
		}
		if time.Now().After(next) {
			seq++
			if err := os.WriteFile(beat+".t", []byte(Beat(0, seq)), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(beat+".t", beat); err != nil {
				t.Fatal(err)
			}
			next = time.Now().Add(2 * time.Second)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "abandoned")); err == nil {
		t.Fatal("the watchdog ended the run, though the test beat it")
	}
	var kept int64
	segs, _ := os.ReadDir(filepath.Join(dir, "out"))
	for _, e := range segs {
		i, _ := e.Info()
		kept += i.Size()
	}
	if kept > OutputCap+SegmentSize {
		t.Errorf("the pod keeps %d bytes of output, more than the cap %d and a segment", kept, OutputCap)
	}
	f := follow(t, dir, 0)
	var err error
	select {
	case err = <-f.exited:
	case <-time.After(time.Minute):
		t.Fatalf("the follower from 0 did not end within a minute; stderr %q", f.before.String())
	}
	_, _ = f.rs.Result()
	lost, ok := ParseControl(strings.Split(strings.TrimSpace(f.before.String()), "\n")[1])
	if err != nil || !ok || lost.Kind != "lost" || lost.From != 0 || lost.To < total-OutputCap-SegmentSize {
		t.Fatalf("follower from 0: exit %v, stderr %q; want kp-lost 0 and the start of what is kept", err, f.before.String())
	}
	rest := follow(t, dir, lost.To)
	r = rest.finish()
	if got := lost.To + int64(len(rest.output())); got != total || r.OutputSize != total || strings.Trim(rest.output(), "x") != "" {
		t.Errorf("after the gap: %d bytes, result says %d, want %d of x", got, r.OutputSize, total)
	}
	t.Logf("kept %d bytes of %d; lost the first %d", kept, total, lost.To)
}

// A dd without iflag=skip_bytes (an older busybox) follows with tail and head.
func TestFollowWithoutSkipBytes(t *testing.T) {
	bin := t.TempDir()
	realDD, err := exec.LookPath("dd")
	if err != nil {
		t.Skip("no dd")
	}
	fake := "#!/bin/sh\nfor a in \"$@\"; do case $a in *skip_bytes*) echo 'dd: invalid input flag' >&2; exit 1 ;; esac; done\nexec " + realDD + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "dd"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	b := Bundle{Command: []string{"sh", "-c", `i=0; while [ $i -lt 30 ]; do echo "line $i"; i=$((i+1)); sleep 0.02; done`}, Marker: testMarker}
	dir := runDir(t)
	s := deliver(t, dir, &b, 1, bin)
	time.Sleep(200 * time.Millisecond)
	s.cut()
	got := s.output()
	f := startSession(t, FollowCommand(dir, int64(len(got))), nil, bin)
	f.from = int64(len(got))
	r := f.finish()
	var want strings.Builder
	for i := range 30 {
		want.WriteString("line " + strconv.Itoa(i) + "\n")
	}
	if got+f.output() != want.String() || r.OutputSize != int64(want.Len()) {
		t.Errorf("output %q, want %q", got+f.output(), want.String())
	}
}

func FuzzParseControl(f *testing.F) {
	for _, s := range []string{"kp-attached", "kp-none", "kp-lost 0 1048576", "kp-lost 5 3", "kp-lost -1 2", "kp-x", " kp-attached", "kp-lost 1 2 3", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		c, ok := ParseControl(line)
		if !ok {
			return
		}
		switch c.Kind {
		case "attached", "none":
			if line != "kp-"+c.Kind {
				t.Errorf("%q parsed as %+v", line, c)
			}
		case "lost":
			if c.From < 0 || c.To <= c.From || line != "kp-lost "+strconv.FormatInt(c.From, 10)+" "+strconv.FormatInt(c.To, 10) {
				t.Errorf("%q parsed as %+v", line, c)
			}
		default:
			t.Errorf("%q parsed as %+v", line, c)
		}
	})
}

// TestFollowSizeHalfWritten: a follower that finds the size file before it
// holds a number (as a non-atomic write would leave it, or any process of
// the run could) waits for the next wake-up instead of comparing with
// nothing: sh would print "[: Illegal number" into the stream the
// provider reads, in a loop. Then it sends the output once and the result.
func TestFollowSizeHalfWritten(t *testing.T) {
	dir := runDir(t)
	if err := os.MkdirAll(filepath.Join(dir, "out"), 0o700); err != nil {
		t.Fatal(err)
	}
	bdir := extract(t, &Bundle{Command: []string{"true"}, Marker: testMarker})
	if err := os.Symlink(bdir, filepath.Join(dir, "b")); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"out/0": "abc\n", "size": ""} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s := follow(t, dir, 0)
	for end := time.Now().Add(10 * time.Second); len(s.output()) < 4; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("no output in 10 s; stderr %q", s.before.String())
		}
	}
	time.Sleep(300 * time.Millisecond) // the follower now reads the empty size
	for name, content := range map[string]string{"size": "4\n",
		"result": `{"rc":0,"oom_kills":0,"output_size":4,"abandoned":false}` + "\nnull\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	wakes, _ := filepath.Glob(filepath.Join(dir, "w.*"))
	for _, w := range wakes {
		f, err := os.OpenFile(w, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = f.WriteString("\n")
		_ = f.Close()
	}
	r := s.finish()
	if s.output() != "abc\n" || r.OutputSize != 4 || r.ExitCode != 0 {
		t.Errorf("output %q, result %+v", s.output(), r)
	}
	if b := s.before.String(); strings.Contains(b, "Illegal") || strings.Contains(b, "[:") {
		t.Errorf("the follower printed a shell error: %q", b)
	}
}
