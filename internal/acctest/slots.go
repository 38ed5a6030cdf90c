package acctest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// SlotsEnv names the number of acceptance tests that may use the cluster at
// once on this machine, across every test process (make testacc sets it from
// TESTACC_SLOTS); unset or 0, no bound but go test's -parallel of each process.
// Several processes run beside each other (a package each, a pass per Terraform
// CLI), each with -parallel tests: on a slower machine of two cores, 60 tests
// at once left every test a thirtieth of a core and their time bounds failed.
const SlotsEnv = "KUBEPLAY_TEST_SLOTS"

// SlotsMaxEnv names how many tests may use the cluster at once while the
// machine's CPU idles (make testacc sets it from TESTACC_SLOTS_MAX): a test
// that finds SlotsEnv's slots all held takes one beyond them when the CPU was
// at least extraIdle idle over the last extraWindow and no one took such a
// slot in that window. Tests that mostly wait on pods left a fast machine's
// CPU a quarter to a half idle at SlotsEnv's bound, which a slow machine's
// tests, whose CPU never idles, need. Unset or not above SlotsEnv's, none.
const SlotsMaxEnv = "KUBEPLAY_TEST_SLOTS_MAX"

// SlotsFirstEnv, set to 1 in a test process's environment, puts its tests'
// turns for a slot before those of every process without it (make testacc
// sets it for the processes of TESTACC_EARLY and TESTACC_PROCESSWIDE, whose
// tests are the longest): a phase that starts its longest tests last ends on
// them, with the CPU idle.
const SlotsFirstEnv = "KUBEPLAY_TEST_SLOTS_FIRST"

const (
	extraWindow = 5 * time.Second
	extraIdle   = 0.25
)

// slotPool is the machine's slots: the files of dir, n of them always and up
// to max while idle says the CPU idles.
type slotPool struct {
	dir    string
	n, max int
	first  bool // its waiters' turns come before those of pools without it
	// idle is the CPU's idle share over the last window; false when it has
	// not watched for that long.
	idle func(window time.Duration) (float64, bool)
}

// slot is a test's hold on one of the machine's slots.
type slot struct {
	f     *os.File  // the slot's file, locked
	since time.Time // when the test first asked for a slot
}

// slots holds each test's slot, so that Exclusive can give it back while it waits.
var slots sync.Map

// giveBack releases t's slot, if it holds one, and returns when t first asked for it.
func giveBack(t testing.TB) (time.Time, bool) {
	v, _ := slots.LoadAndDelete(t)
	held, ok := v.(slot)
	if !ok {
		return time.Time{}, false
	}
	held.f.Close()
	return held.since, true
}

// machineSlot holds one of SlotsEnv's slots until the test ends, waiting its
// turn when all are held. The wait comes before the test's own clocks start;
// it is logged when it is longer than a second.
func machineSlot(t testing.TB) {
	t.Helper()
	retakeSlot(t, time.Now())
}

// retakeSlot is machineSlot for a test that first asked for a slot at since.
func retakeSlot(t testing.TB, since time.Time) {
	t.Helper()
	if n, err := strconv.Atoi(os.Getenv(SlotsEnv)); err == nil && n > 0 {
		p := slotPool{dir: os.TempDir(), n: n, idle: machineCPU.idleShare, first: os.Getenv(SlotsFirstEnv) == "1"}
		p.max, _ = strconv.Atoi(os.Getenv(SlotsMaxEnv))
		takeSlot(t, p, since)
	}
}

// takeSlot holds one of p's slots until t ends: a slot is a file whose
// lock the kernel releases when its process dies, so a killed test process
// holds none. Waiters take turns in the order they asked (since), those of a
// first pool before the rest: each waits with a ticket, a locked file of dir
// named by both, and only the first live ticket may take a free slot. Turns matter: with random turns, some
// tests waited 20 minutes while others that came later ran, and the suite
// ended on those.
func takeSlot(t testing.TB, p slotPool, since time.Time) {
	t.Helper()
	dir := p.dir
	start := time.Now()
	ticket, name, err := newTicket(dir, p.first, since)
	if err != nil {
		t.Fatalf("acctest: machine slot: %v", err)
	}
	defer func() {
		os.Remove(name)
		ticket.Close()
	}()
	for {
		if oldestTicket(dir, filepath.Base(name)) {
			f := freeSlot(t, dir, 0, p.n)
			if f == nil {
				f = p.extraSlot(t)
			}
			if f != nil {
				held := slot{f: f, since: since}
				slots.Store(t, held)
				t.Cleanup(func() {
					// Unless Exclusive gave this slot back (and may hold another).
					if slots.CompareAndDelete(t, held) {
						f.Close()
					}
				})
				if waited := time.Since(start); waited > time.Second {
					t.Logf("acctest: waited %s for one of the machine's %d test slots (%s)", waited.Round(time.Second), p.n, SlotsEnv)
				}
				return
			}
		}
		// A file lock cannot wait for any of several files, nor for a turn: look again soon.
		time.Sleep(time.Duration(100+rand.IntN(100)) * time.Millisecond)
	}
}

const ticketPrefix = "kubeplay-acctest-turn-"

// newTicket makes the waiter's ticket: locked under a name no one looks at,
// then renamed, so that no one sees it unlocked and takes it for a dead
// waiter's.
// The open file keeps its lock under the new name, which is returned.
func newTicket(dir string, first bool, since time.Time) (*os.File, string, error) {
	f, err := os.CreateTemp(dir, "kubeplay-acctest-ticket-*")
	if err != nil {
		return nil, "", err
	}
	class := 1
	if first {
		class = 0
	}
	name := filepath.Join(dir, fmt.Sprintf("%s%d-%020d-%d-%08x", ticketPrefix, class, since.UnixNano(), os.Getpid(), rand.Uint32()))
	if err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err == nil {
		err = os.Rename(f.Name(), name)
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, "", err
	}
	return f, name, nil
}

// oldestTicket reports whether mine is the oldest live ticket of dir. A
// ticket that is not locked is a dead waiter's: it is removed.
func oldestTicket(dir, mine string) bool {
	names, err := filepath.Glob(filepath.Join(dir, ticketPrefix+"*"))
	if err != nil {
		return true
	}
	slices.Sort(names)
	for _, name := range names {
		if filepath.Base(name) == mine {
			return true
		}
		f, err := os.Open(name)
		if err != nil {
			continue // taken its slot and gone
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			os.Remove(name)
			f.Close()
			continue
		}
		f.Close()
		return false
	}
	return true
}

// extraSlot locks and returns one of the slots beyond n when the CPU idled
// over the last extraWindow and no one took such a slot within it, or nil.
// A stamp file's time is when one was last taken, by any process.
func (p slotPool) extraSlot(t testing.TB) *os.File {
	t.Helper()
	if p.max <= p.n || p.idle == nil {
		return nil
	}
	stamp := filepath.Join(p.dir, "kubeplay-acctest-extra.stamp")
	if fi, err := os.Stat(stamp); err == nil && time.Since(fi.ModTime()) < extraWindow {
		return nil
	}
	share, ok := p.idle(extraWindow)
	if !ok || share < extraIdle {
		return nil
	}
	f := freeSlot(t, p.dir, p.n, p.max)
	if f == nil {
		return nil
	}
	// Were the stamp not written, the next such slot could only come sooner.
	now := time.Now()
	_ = os.WriteFile(stamp, nil, 0o600)
	_ = os.Chtimes(stamp, now, now)
	t.Logf("acctest: took a slot beyond the machine's %d (%s; at most %d, %s): the CPU was %.0f%% idle over the last %s",
		p.n, SlotsEnv, p.max, SlotsMaxEnv, 100*share, extraWindow)
	return f
}

// freeSlot locks and returns one of dir's slot files from..to-1 that no one holds, or nil.
func freeSlot(t testing.TB, dir string, from, to int) *os.File {
	t.Helper()
	for i := from; i < to; i++ {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("kubeplay-acctest-slot-%d.lock", i)), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			t.Fatalf("acctest: machine slot: %v", err)
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			return f
		}
		f.Close()
	}
	return nil
}

// machineCPU watches the machine's CPU for extraSlot.
var machineCPU = &cpuWatch{read: readProcStat}

// cpuWatch keeps samples of the CPU's cumulative idle and total time.
type cpuWatch struct {
	read    func() (cpuSample, error)
	mu      sync.Mutex
	samples []cpuSample // oldest first
}

type cpuSample struct {
	at          time.Time
	idle, total uint64
}

// idleShare takes a sample and returns the idle share of the CPU's time
// since the newest sample at least window old, if that one is less than two
// windows old (the caller polls about every 150 ms; older is stale).
func (w *cpuWatch) idleShare(window time.Duration) (float64, bool) {
	now, err := w.read()
	if err != nil {
		return 0, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.samples = append(w.samples, now)
	for len(w.samples) > 1 && now.at.Sub(w.samples[1].at) >= window {
		w.samples = w.samples[1:]
	}
	base := w.samples[0]
	age := now.at.Sub(base.at)
	if age > 2*window {
		w.samples = []cpuSample{now}
		return 0, false
	}
	if age < window || now.total <= base.total {
		return 0, false
	}
	return float64(now.idle-base.idle) / float64(now.total-base.total), true
}

// readProcStat reads the machine's CPU times from /proc/stat's first line:
// idle is idle and iowait; total, every field but guest time, which user
// time holds already.
func readProcStat() (cpuSample, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuSample{}, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return cpuSample{}, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	s := cpuSample{at: time.Now()}
	for i, f := range fields[1:9] { // user nice system idle iowait irq softirq steal
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return cpuSample{}, fmt.Errorf("/proc/stat: %w", err)
		}
		s.total += v
		if i == 3 || i == 4 {
			s.idle += v
		}
	}
	return s, nil
}
