package acctest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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
		takeSlot(t, slotsDir(t), n, since)
	}
}

// slotsDir is the slots' and the waiters' tickets' directory, one of their
// own: every waiter lists it about seven times a second, and the temporary
// directory holds hundreds of the tests' working directories and plugin
// sockets (BenchmarkOldestTicket).
func slotsDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "kubeplay-acctest-slots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("acctest: machine slot: %v", err)
	}
	return dir
}

// takeSlot holds one of n slots of dir until t ends: a slot is a file whose
// lock the kernel releases when its process dies, so a killed test process
// holds none. Waiters take turns in the order they asked (since): each waits
// with a ticket, a locked file of dir named by that time, and only the oldest
// live ticket may take a free slot. Turns matter: with random turns, some
// tests waited 20 minutes while others that came later ran, and the suite
// ended on those.
func takeSlot(t testing.TB, dir string, n int, since time.Time) {
	t.Helper()
	start := time.Now()
	ticket, name, err := newTicket(dir, since)
	if err != nil {
		t.Fatalf("acctest: machine slot: %v", err)
	}
	defer func() {
		os.Remove(name)
		ticket.Close()
	}()
	for {
		if oldestTicket(dir, filepath.Base(name)) {
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
		// A file lock cannot wait for any of several files, nor for a turn: look again soon.
		time.Sleep(time.Duration(100+rand.IntN(100)) * time.Millisecond)
	}
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
