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
	name     string // Name's answer, when set
	mu       sync.Mutex
	cleanups []func()
}

func (w *waiter) Name() string {
	if w.name != "" {
		return w.name
	}
	return w.T.Name()
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
	var ws []queued
	for i := 1; i <= 4; i++ {
		// Waiter i asked at base+i seconds but starts looking in the reverse order.
		ws = append(ws, queued{w: &waiter{T: t, name: fmt.Sprint(i)}, since: base.Add(time.Duration(i) * time.Second), delay: time.Duration(5-i) * 100 * time.Millisecond})
	}
	order := takeTurns(t, dir, base, ws)
	if fmt.Sprint(order) != "[1 2 3 4]" {
		t.Errorf("waiters took the slot in the order %v, want [1 2 3 4]", order)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ticketPrefix+"*")); len(left) != 0 {
		t.Errorf("tickets left: %v", left)
	}
}

// A waiter whose test took longer in the earlier run takes its turn before
// one that asked sooner; a test the file does not name keeps its place.
func TestTakeSlotLongestFirst(t *testing.T) {
	saved := testDurations
	t.Cleanup(func() { testDurations = saved })
	testDurations = func() map[string]time.Duration {
		return parseDurations([]byte("TestLong 111.07\nTestShort 0.5\nnot a line\nTestBad x\n"))
	}
	base := time.Now()
	var ws []queued
	for i, name := range []string{"TestShort", "TestUnknown", "TestLong"} {
		// Each asked a second after the one before, and starts looking in that order.
		ws = append(ws, queued{w: &waiter{T: t, name: name}, since: base.Add(time.Duration(i+1) * time.Second), delay: time.Duration(i) * 100 * time.Millisecond})
	}
	order := takeTurns(t, t.TempDir(), base, ws)
	if fmt.Sprint(order) != "[TestLong TestShort TestUnknown]" {
		t.Errorf("waiters took the slot in the order %v, want [TestLong TestShort TestUnknown]", order)
	}
}

func TestParseDurations(t *testing.T) {
	got := parseDurations([]byte("TestA 1.5\n  TestB/sub 0.01  \nTestC\nTestD -3\nTestE 1e9\n\nTestF NaN\n"))
	want := map[string]time.Duration{"TestA": 1500 * time.Millisecond, "TestB/sub": 10 * time.Millisecond}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("parseDurations = %v, want %v", got, want)
	}
}

// queued is a waiter of takeTurns: it asked for a slot at since, and starts
// looking after delay.
type queued struct {
	w     *waiter
	since time.Time
	delay time.Duration
}

// takeTurns holds dir's one slot (asked for at base) while ws queue for it,
// then releases it, and returns the names of ws in the order they took it,
// each holding it for 50 ms.
func takeTurns(t *testing.T, dir string, base time.Time, ws []queued) []string {
	t.Helper()
	holder := &waiter{T: t}
	takeSlot(holder, dir, 1, base)
	got := make(chan string)
	for _, q := range ws {
		go func() {
			time.Sleep(q.delay)
			takeSlot(q.w, dir, 1, q.since)
			got <- q.w.Name()
			time.Sleep(50 * time.Millisecond)
			q.w.release()
		}()
	}
	time.Sleep(time.Second) // the waiters queue meanwhile
	holder.release()
	var order []string
	for range ws {
		select {
		case name := <-got:
			order = append(order, name)
		case <-time.After(30 * time.Second):
			t.Fatalf("waiters took the slot in the order %v, then none in 30 s", order)
		}
	}
	return order
}

// Waiters near the head of the queue look again within 200 ms; those further
// back less often, never less than every 5 s.
func TestPollInterval(t *testing.T) {
	for _, tc := range []struct {
		ahead, n int
		min, max time.Duration
	}{
		{0, 12, 100 * time.Millisecond, 200 * time.Millisecond},
		{12, 12, 100 * time.Millisecond, 200 * time.Millisecond},
		{32, 12, 1100 * time.Millisecond, 1200 * time.Millisecond},
		{10000, 12, 5 * time.Second, 5 * time.Second},
	} {
		if d := pollInterval(tc.ahead, tc.n); d < tc.min || d > tc.max {
			t.Errorf("pollInterval(%d, %d) = %s, want %s to %s", tc.ahead, tc.n, d, tc.min, tc.max)
		}
	}
}
