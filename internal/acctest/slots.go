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

// DurationsEnv names a file of each test's duration in an earlier run, a
// line "name seconds" each (tools/testacc.sh writes it after every run).
// A waiter takes its turn earlier by its test's duration, so the longest
// tests take slots first and the suite does not end on a long test that
// began late: in make test-all the provider's tests began in source order,
// and its last two minutes ran three tests of 100 s each on an idle CPU.
const DurationsEnv = "KUBEPLAY_TEST_DURATIONS"

// testDurations is DurationsEnv's file, read once; an unset, missing or
// unreadable file gives none, and turns fall back to the order of asking.
var testDurations = sync.OnceValue(func() map[string]time.Duration {
	b, err := os.ReadFile(os.Getenv(DurationsEnv))
	if err != nil {
		return nil
	}
	return parseDurations(b)
})

// parseDurations reads DurationsEnv's lines, skipping any it cannot read.
func parseDurations(b []byte) map[string]time.Duration {
	m := map[string]time.Duration{}
	for _, line := range strings.Split(string(b), "\n") {
		name, secs, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		if f, err := strconv.ParseFloat(secs, 64); err == nil && f > 0 && f < 24*3600 {
			m[name] = time.Duration(f * float64(time.Second))
		}
	}
	return m
}

// turn is the time t's ticket is ordered by: when it asked, moved earlier by
// its test's duration in the earlier run.
func turn(t testing.TB, since time.Time) time.Time {
	return since.Add(-testDurations()[t.Name()])
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
		takeSlot(t, os.TempDir(), n, since)
	}
}

// takeSlot holds one of n slots of dir until t ends: a slot is a file whose
// lock the kernel releases when its process dies, so a killed test process
// holds none. Waiters take turns in the order they asked (since, moved
// earlier by turn): each waits with a ticket, a locked file of dir named by
// that time, and only the oldest live ticket may take a free slot. Turns
// matter: with random turns, some tests waited 20 minutes while others that
// came later ran, and the suite ended on those.
func takeSlot(t testing.TB, dir string, n int, since time.Time) {
	t.Helper()
	start := time.Now()
	ticket, name, err := newTicket(dir, turn(t, since))
	if err != nil {
		t.Fatalf("acctest: machine slot: %v", err)
	}
	defer func() {
		os.Remove(name)
		ticket.Close()
	}()
	for {
		oldest, ahead := oldestTicket(dir, filepath.Base(name))
		if oldest {
			if f := freeSlot(t, dir, n); f != nil {
				held := slot{f: f, since: since}
				slots.Store(t, held)
				t.Cleanup(func() {
					// Unless Exclusive gave this slot back (and may hold another).
					if slots.CompareAndDelete(t, held) {
						f.Close()
					}
				})
				if waited := time.Since(start); waited > time.Second {
					t.Logf("acctest: waited %s for one of the machine's %d test slots (%s)", waited.Round(time.Second), n, SlotsEnv)
				}
				return
			}
		}
		// A file lock cannot wait for any of several files, nor for a turn: look again.
		time.Sleep(pollInterval(ahead, n))
	}
}

// pollInterval is how long a waiter with ahead tickets before its own waits
// before it looks again: within 200 ms near the head of the queue, and less
// often further back, where no slot can come its way before those ahead of
// it have taken theirs (up to 5 s). Each look reads the directory: with 300
// waiters looking five to ten times a second, phase 1 of make test-all ran
// 64 s longer on a saturated CPU.
func pollInterval(ahead, n int) time.Duration {
	d := time.Duration(100+rand.IntN(100)) * time.Millisecond
	if ahead > n {
		d += time.Duration(ahead-n) * 50 * time.Millisecond
	}
	return min(d, 5*time.Second)
}

const ticketPrefix = "kubeplay-acctest-turn-"

// newTicket makes the waiter's ticket: locked under a name no one looks at,
// then renamed, so that no one sees it unlocked and takes it for a dead
// waiter's.
// The open file keeps its lock under the new name, which is returned.
func newTicket(dir string, since time.Time) (*os.File, string, error) {
	f, err := os.CreateTemp(dir, "kubeplay-acctest-ticket-*")
	if err != nil {
		return nil, "", err
	}
	name := filepath.Join(dir, fmt.Sprintf("%s%020d-%d-%08x", ticketPrefix, since.UnixNano(), os.Getpid(), rand.Uint32()))
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

// oldestTicket reports whether mine is the oldest live ticket of dir, and
// how many tickets come before it. A ticket that is not locked is a dead
// waiter's: it is removed.
func oldestTicket(dir, mine string) (bool, int) {
	names, err := filepath.Glob(filepath.Join(dir, ticketPrefix+"*"))
	if err != nil {
		return true, 0
	}
	slices.Sort(names)
	ahead := slices.Index(names, filepath.Join(dir, mine))
	for _, name := range names {
		if filepath.Base(name) == mine {
			return true, 0
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
		return false, ahead
	}
	return true, 0
}

// freeSlot locks and returns one of dir's n slot files that no one holds, or nil.
func freeSlot(t testing.TB, dir string, n int) *os.File {
	t.Helper()
	for i := range n {
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
