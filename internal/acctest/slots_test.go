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
				takeSlot(t, dir, tc.slots, time.Now())
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
				takeSlot(t, dir, tc.slots, time.Now())
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
// they start looking in, and a dead waiter's ticket (an unlocked file) does
// not hold up the rest.
func TestTakeSlotTurns(t *testing.T) {
	dir := t.TempDir()
	base := time.Now()
	// A dead waiter's ticket, older than everyone's.
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s%020d-1-00000000", ticketPrefix, base.Add(-time.Hour).UnixNano())), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	holder := &waiter{T: t}
	takeSlot(holder, dir, 1, base)
	got := make(chan int)
	for i := 1; i <= 4; i++ {
		// Waiter i asked at base+i seconds but starts looking in the reverse order.
		go func() {
			time.Sleep(time.Duration(5-i) * 100 * time.Millisecond)
			w := &waiter{T: t}
			takeSlot(w, dir, 1, base.Add(time.Duration(i)*time.Second))
			got <- i
			time.Sleep(50 * time.Millisecond)
			w.release()
		}()
	}
	time.Sleep(time.Second) // the waiters queue meanwhile
	holder.release()
	var order []int
	for range 4 {
		select {
		case i := <-got:
			order = append(order, i)
		case <-time.After(30 * time.Second):
			t.Fatalf("waiters took the slot in the order %v, then none in 30 s", order)
		}
	}
	if fmt.Sprint(order) != "[1 2 3 4]" {
		t.Errorf("waiters took the slot in the order %v, want [1 2 3 4]", order)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ticketPrefix+"*")); len(left) != 0 {
		t.Errorf("tickets left: %v", left)
	}
}

// BenchmarkOldestTicket: one waiter's look at the queue, in a directory of
// the slots' own and in one that also holds the 400 entries the temporary
// directory held during make test-all (the tests' working directories and
// plugin sockets).
//
//	go test ./internal/acctest -run '^$' -bench OldestTicket
func BenchmarkOldestTicket(b *testing.B) {
	for _, others := range []int{0, 400} {
		b.Run(fmt.Sprintf("%d other entries", others), func(b *testing.B) {
			dir := b.TempDir()
			for i := range others {
				if err := os.Mkdir(filepath.Join(dir, fmt.Sprintf("plugintest%09d", i)), 0o700); err != nil {
					b.Fatal(err)
				}
			}
			// Ten waiters, the benchmark's the last: each look opens the first.
			var mine string
			for i := range 10 {
				f, name, err := newTicket(dir, time.Unix(int64(i), 0))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { f.Close() })
				mine = filepath.Base(name)
			}
			b.ResetTimer()
			for b.Loop() {
				if oldestTicket(dir, mine) {
					b.Fatal("the last waiter's ticket is not the oldest")
				}
			}
		})
	}
}
