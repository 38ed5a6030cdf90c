package acctest

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A test that finds every slot held waits until one is released, and takes
// it only then; with a slot to spare it does not wait.
func TestTakeSlot(t *testing.T) {
	for _, tc := range []struct {
		slots    int
		wantWait bool
	}{{1, true}, {2, false}} {
		dir := t.TempDir()
		var holding atomic.Bool
		held := make(chan struct{})
		var waited time.Duration
		var overlapped bool
		t.Run(fmt.Sprintf("%d slots", tc.slots), func(t *testing.T) {
			t.Run("first", func(t *testing.T) {
				t.Parallel()
				takeSlot(t, slotPool{dir: dir, n: tc.slots}, time.Now())
				holding.Store(true)
				// Registered after takeSlot's, so it runs before the slot is released.
				t.Cleanup(func() { holding.Store(false) })
				close(held)
				time.Sleep(time.Second)
			})
			t.Run("second", func(t *testing.T) {
				t.Parallel()
				<-held
				start := time.Now()
				takeSlot(t, slotPool{dir: dir, n: tc.slots}, time.Now())
				waited = time.Since(start)
				overlapped = holding.Load()
			})
		})
		if tc.wantWait && (overlapped || waited < 500*time.Millisecond) {
			t.Errorf("%d slot(s): the second test took a slot after %s while the first held it: %v", tc.slots, waited, overlapped)
		}
		if !tc.wantWait && (!overlapped || waited > 500*time.Millisecond) {
			t.Errorf("%d slots: the second test waited %s (beside the first: %v); want no wait", tc.slots, waited, overlapped)
		}
	}
}

// waiter is a testing.TB whose clean-ups run when release is called, so that
// a test can hold slots for several waiters at once, whatever go test's
// -parallel.
type waiter struct {
	*testing.T
	mu       sync.Mutex
	cleanups []func()
}

func (w *waiter) Cleanup(f func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cleanups = append(w.cleanups, f)
}

func (w *waiter) release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.cleanups) - 1; i >= 0; i-- {
		w.cleanups[i]()
	}
	w.cleanups = nil
}

// Waiters take the slot in the order they asked for one, whatever order
// they start looking in, those of a first pool before the rest, and a dead
// waiter's ticket (an unlocked file) does not hold up the rest.
func TestTakeSlotTurns(t *testing.T) {
	dir := t.TempDir()
	base := time.Now()
	// A dead waiter's ticket, older than everyone's.
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s0-%020d-1-00000000", ticketPrefix, base.Add(-time.Hour).UnixNano())), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	holder := &waiter{T: t}
	takeSlot(holder, slotPool{dir: dir, n: 1}, base)
	got := make(chan int)
	for i := 1; i <= 5; i++ {
		// Waiter i asked at base+i seconds but starts looking in the reverse
		// order; the fifth is of a first pool.
		go func() {
			time.Sleep(time.Duration(6-i) * 100 * time.Millisecond)
			w := &waiter{T: t}
			takeSlot(w, slotPool{dir: dir, n: 1, first: i == 5}, base.Add(time.Duration(i)*time.Second))
			got <- i
			time.Sleep(50 * time.Millisecond)
			w.release()
		}()
	}
	time.Sleep(time.Second) // the waiters queue meanwhile
	holder.release()
	var order []int
	for range 5 {
		select {
		case i := <-got:
			order = append(order, i)
		case <-time.After(30 * time.Second):
			t.Fatalf("waiters took the slot in the order %v, then none in 30 s", order)
		}
	}
	if fmt.Sprint(order) != "[5 1 2 3 4]" {
		t.Errorf("waiters took the slot in the order %v, want [5 1 2 3 4]", order)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ticketPrefix+"*")); len(left) != 0 {
		t.Errorf("tickets left: %v", left)
	}
}

// Beyond its n slots, a pool lends one more only while the CPU idles, and
// then at most one per extraWindow, up to max.
func TestTakeSlotExtra(t *testing.T) {
	for _, tc := range []struct {
		name     string
		idle     float64
		watched  bool
		wantLend bool
	}{
		{"idle", 0.6, true, true},
		{"busy", 0.1, true, false},
		{"not watched long enough", 0.9, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := slotPool{dir: t.TempDir(), n: 1, max: 3, idle: func(time.Duration) (float64, bool) { return tc.idle, tc.watched }}
			holder := &waiter{T: t}
			takeSlot(holder, p, time.Now())
			took := func(w *waiter) chan struct{} {
				done := make(chan struct{})
				go func() {
					takeSlot(w, p, time.Now())
					close(done)
				}()
				return done
			}
			// The waiter still waiting takes the holder's slot once it is
			// released, before the test's directory goes.
			finish := func(w *waiter, done chan struct{}) {
				holder.release()
				select {
				case <-done:
					w.release()
				case <-time.After(30 * time.Second):
					t.Fatal("a waiter did not take the slot released 30 s ago")
				}
			}
			second := &waiter{T: t}
			secondDone := took(second)
			select {
			case <-secondDone:
				defer second.release()
				if !tc.wantLend {
					t.Errorf("CPU %.0f%% idle (watched long enough: %v): a second test took a slot beyond the pool's one", 100*tc.idle, tc.watched)
					holder.release()
					return
				}
			case <-time.After(2 * time.Second):
				if tc.wantLend {
					t.Error("CPU 60% idle: a second test waited 2 s for a slot beyond the pool's one")
				}
				finish(second, secondDone)
				return
			}
			// A third is not lent one within extraWindow of the second's.
			third := &waiter{T: t}
			thirdDone := took(third)
			select {
			case <-thirdDone:
				t.Errorf("a third test was lent a slot within %s of the second's", extraWindow)
				third.release()
				holder.release()
			case <-time.After(2 * time.Second):
				finish(third, thirdDone)
			}
		})
	}
}

// idleShare is the idle share since the newest sample at least a window
// old; too short a watch or a stale sample gives none.
func TestCPUWatchIdleShare(t *testing.T) {
	t0 := time.Now()
	var next cpuSample
	w := &cpuWatch{read: func() (cpuSample, error) { return next, nil }}
	at := func(sec float64, idle, total uint64) (float64, bool) {
		next = cpuSample{at: t0.Add(time.Duration(sec * float64(time.Second))), idle: idle, total: total}
		return w.idleShare(5 * time.Second)
	}
	if _, ok := at(0, 0, 0); ok {
		t.Error("one sample gave a share")
	}
	if _, ok := at(3, 100, 200); ok {
		t.Error("3 s of samples gave a share over 5 s")
	}
	// Over 0..6 s: 300 of 1,000 ticks idle.
	if got, ok := at(6, 300, 1000); !ok || got != 0.3 {
		t.Errorf("share over 0..6 s = %v, %v; want 0.3", got, ok)
	}
	// At 9 s, the base is the 3 s sample: (500-100)/(1,600-200).
	if got, ok := at(9, 500, 1600); !ok || got != 400.0/1400 {
		t.Errorf("share over 3..9 s = %v, %v; want %v", got, ok, 400.0/1400)
	}
	// 30 s without a sample: stale, no share until a window passes again.
	if _, ok := at(39, 600, 2000); ok {
		t.Error("a share from a 30 s old sample")
	}
	if got, ok := at(44, 1100, 3000); !ok || got != 0.5 {
		t.Errorf("share over 39..44 s = %v, %v; want 0.5", got, ok)
	}
}

// readProcStat reads this machine's CPU times, and they grow.
func TestReadProcStat(t *testing.T) {
	a, err := readProcStat()
	if err != nil {
		t.Skipf("no /proc/stat here: %v", err)
	}
	time.Sleep(100 * time.Millisecond)
	b, err := readProcStat()
	if err != nil {
		t.Fatal(err)
	}
	if a.total == 0 || b.total < a.total || b.idle < a.idle || b.idle-a.idle > b.total-a.total {
		t.Errorf("samples %+v then %+v: want total > 0, both growing, idle within total", a, b)
	}
}
