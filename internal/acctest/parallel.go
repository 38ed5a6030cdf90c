package acctest

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// marked holds the tests that Parallel, Disruptive or ProcessWide has
// seen, so that helpers a test calls more than once mark it once (a second
// t.Parallel panics).
var marked sync.Map

// Parallel runs an acceptance test in parallel with the package's other
// acceptance tests (go test -parallel). Such a test makes everything under
// names of its own and never depends on another test's absence. Helpers
// that start an acceptance test call it; a test already marked is left as
// it is, so a Disruptive or ProcessWide test stays serial.
func Parallel(t testing.TB) {
	tt, ok := t.(*testing.T)
	if !ok {
		return
	}
	if _, seen := marked.LoadOrStore(tt, true); seen {
		return
	}
	t.Cleanup(func() { marked.Delete(tt) })
	tt.Parallel()
	machineSlot(t)
}

// Disruptive keeps an acceptance test that disturbs the whole cluster
// (restarts the API server, stops a kubelet, fills the node) out of the
// parallel ones. make
// testacc runs the tests listed in TESTACC_DISRUPTIVE after the rest, apart
// from the parallel ones (the GNUmakefile says which may run beside each
// other); within one package Go runs it before the parallel tests start. Call
// it before any helper that calls Parallel; why is logged.
func Disruptive(t testing.TB, why string) {
	t.Helper()
	serial(t, "disruptive: "+why)
}

// ProcessWide keeps an acceptance test that sets what is process-wide
// (environment variables, the working directory) out of the parallel tests
// of its process. make testacc runs the tests listed in TESTACC_PROCESSWIDE
// one after another in a go test process of their own, beside the parallel
// ones; within one package Go runs it before the parallel tests start.
func ProcessWide(t testing.TB, why string) {
	t.Helper()
	if serial(t, "process-wide: "+why) {
		machineSlot(t)
	}
}

// serial marks t serial and logs why; it reports whether t was not marked before.
func serial(t testing.TB, why string) bool {
	t.Helper()
	first := true
	if tt, ok := t.(*testing.T); ok {
		if _, seen := marked.LoadOrStore(tt, false); seen {
			first = false
		} else {
			t.Cleanup(func() { marked.Delete(tt) })
		}
	}
	t.Log(why)
	return first
}

var (
	exclusiveMu sync.Mutex
	exclusive   = map[string]*sync.Mutex{}
	// holders: which test holds each lock, so a test's helpers may ask again.
	holders = map[string]testing.TB{}
)

// ClusterAPILock is the Exclusive lock of the tests that install
// cert-manager's or Cluster API's CRDs, or use the second cluster.
const ClusterAPILock = "cluster-api"

// Exclusive holds the lock called name until the test ends, so that
// parallel tests which share something of the cluster that names cannot
// keep apart (cluster-scoped CRDs of one API group, the second cluster) take
// turns on it, while the rest of the suite goes on beside them. A test that
// already holds it may ask again. The lock holds across processes (go test
// runs packages in processes of their own) through a file lock of the
// machine, whose test cluster they share.
func Exclusive(t testing.TB, name string) {
	t.Helper()
	exclusiveMu.Lock()
	if holders[name] == t {
		exclusiveMu.Unlock()
		return
	}
	mu, ok := exclusive[name]
	if !ok {
		mu = new(sync.Mutex)
		exclusive[name] = mu
	}
	exclusiveMu.Unlock()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "kubeplay-acctest-"+name+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("acctest: lock %s: %v", name, err)
	}
	locked := mu.TryLock()
	if !locked || syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		// A test that waits for the lock gives its machine slot back meanwhile, and takes one
		// again once it holds the lock: tests waiting their turn would otherwise hold slots
		// that the rest of the suite could use.
		if since, ok := giveBack(t); ok {
			// Its place in the queue is where it first asked for a slot.
			defer retakeSlot(t, since)
		}
		if !locked {
			mu.Lock()
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			mu.Unlock()
			t.Fatalf("acctest: lock %s: %v", name, err)
		}
	}
	exclusiveMu.Lock()
	holders[name] = t
	exclusiveMu.Unlock()
	t.Cleanup(func() {
		exclusiveMu.Lock()
		delete(holders, name)
		exclusiveMu.Unlock()
		f.Close() // releases the file lock
		mu.Unlock()
	})
}
