package bundle

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// hugeResult writes to w the runner's separator and a result document with
// hosts hosts (31 bytes each) and tasks failed tasks, in chunks as the exec
// stream delivers them, without holding the document in memory.
func hugeResult(w io.Writer, hosts, tasks int, artifacts string) {
	buf := make([]byte, 0, 64<<10)
	flush := func(force bool) {
		if len(buf) >= 32<<10 || force {
			_, _ = w.Write(buf)
			buf = buf[:0]
		}
	}
	buf = append(buf, "\n"+testMarker+"\n"+"{\"rc\":2}\n"+`{"hosts":{`...)
	for i := range hosts {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = fmt.Appendf(buf, `"host-%07d.example":{"ok":1}`, i)
		flush(false)
	}
	buf = append(buf, `},"failed_tasks":[`...)
	for i := range tasks {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = fmt.Appendf(buf, `{"host":"host-%07d.example","task":"t","message":"m","unreachable":false}`, i)
		flush(false)
	}
	buf = fmt.Appendf(buf, `],"failed_task_count":%d,"artifacts":%s}`, tasks, artifacts)
	flush(true)
}

// peakHeap runs fn and returns the most heap it saw in use above what was
// in use before, sampling every 200µs. The heap in use counts garbage not
// yet collected, so the collector runs at Go's default pace, whatever GOGC
// the test process was given.
func peakHeap(fn func()) uint64 {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > base && m.HeapAlloc-base > peak.Load() {
				peak.Store(m.HeapAlloc - base)
			}
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Microsecond):
			}
		}
	}()
	fn()
	close(stop)
	<-done
	runtime.ReadMemStats(&ms)
	if ms.HeapAlloc > base && ms.HeapAlloc-base > peak.Load() {
		peak.Store(ms.HeapAlloc - base)
	}
	return peak.Load()
}

// Finding 9: a 31 MiB result of a million hosts, as a playbook or an image
// can write it, costs the provider a bounded amount of memory and leaves a
// bounded result for the state; one under the size limit is decoded with
// its hosts and failed tasks capped and counted.
func TestResultMemoryBounded(t *testing.T) {
	const bound = 48 << 20
	var res Result
	var err error
	peak := peakHeap(func() {
		s := NewResultStream(testMarker, io.Discard, MaxResultSize)
		hugeResult(s, 1_000_000, 0, "null")
		res, err = s.Result()
	})
	t.Logf("31 MiB, 1e6 hosts: peak heap %.1f MiB, %d hosts kept, err %v", float64(peak)/(1<<20), len(res.Hosts), err)
	var tooLarge *ResultTooLargeError
	if err != nil && !errors.As(err, &tooLarge) {
		t.Fatalf("error %v, want a ResultTooLargeError or a capped result", err)
	}
	if len(res.Hosts) > MaxHosts || peak > bound {
		t.Fatalf("%d hosts kept (cap %d), peak heap %d MiB (bound %d MiB)", len(res.Hosts), MaxHosts, peak>>20, bound>>20)
	}
	if err == nil || !strings.Contains(err.Error(), "MiB") {
		t.Fatalf("want an error that names the limit, got %v", err)
	}

	// Under the limit: hosts and failed tasks past their caps are counted,
	// not kept.
	hosts, tasks := MaxResultSize/31/2, 20_000
	peak = peakHeap(func() {
		s := NewResultStream(testMarker, io.Discard, MaxResultSize)
		hugeResult(s, hosts, tasks, `{"k":"v"}`)
		res, err = s.Result()
	})
	t.Logf("%d hosts, %d failed tasks: peak heap %.1f MiB", hosts, tasks, float64(peak)/(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Hosts) != MaxHosts || res.HostCount != int64(hosts) || len(res.FailedTasks) != MaxFailedTasks ||
		res.FailedTaskCount != int64(tasks) || res.ExitCode != 2 || res.Artifacts != `{"k":"v"}` {
		t.Fatalf("%d hosts of %d, %d tasks of %d, rc %d, artifacts %q", len(res.Hosts), res.HostCount,
			len(res.FailedTasks), res.FailedTaskCount, res.ExitCode, res.Artifacts)
	}
	// The hosts kept are the first by name.
	if _, ok := res.Hosts[fmt.Sprintf("host-%07d.example", MaxHosts-1)]; !ok {
		t.Fatal("the first hosts by name were not kept")
	}
	if peak > bound {
		t.Fatalf("peak heap %d MiB (bound %d MiB)", peak>>20, bound>>20)
	}
}

// Artifacts over MaxArtifacts are refused with the stats, saying so; the
// exit code stands.
func TestResultArtifactsBounded(t *testing.T) {
	big := `{"k":"` + strings.Repeat("x", MaxArtifacts) + `"}`
	r, err := ParseResult(report1(0, `{"hosts":{},"artifacts":`+big+`}`))
	if err != nil || r.StatsErr == nil || !strings.Contains(r.StatsErr.Error(), "artifacts") || !strings.Contains(r.StatsErr.Error(), "MiB") {
		t.Fatalf("artifacts of %d bytes: %v, %v", len(big), err, r.StatsErr)
	}
	if r, err := ParseResult(report1(0, `{"artifacts":{"k":"`+strings.Repeat("x", MaxArtifacts-16)+`"}}`)); err != nil || r.StatsErr != nil {
		t.Fatalf("artifacts under the cap: %v, %v", err, r.StatsErr)
	}
}
