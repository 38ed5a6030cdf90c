package runner_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
)

// manyHosts is the benchmark's inventory: n hosts on the local connection.
func manyHosts(n int) string {
	var inv strings.Builder
	inv.WriteString("[all]\n")
	for i := range n {
		fmt.Fprintf(&inv, "host-%04d.example.com\n", i)
	}
	inv.WriteString("[all:vars]\nansible_connection=local\nansible_python_interpreter=/usr/bin/python3\n")
	return inv.String()
}

const oneDebug = "- hosts: all\n  gather_facts: false\n  tasks:\n    - debug: {msg: hello}\n"

// heapPeak samples the Go heap every 10 ms until stop is called, and
// returns its peak above the level at the start.
func heapPeak() (stop func() float64) {
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		var m runtime.MemStats
		for {
			select {
			case <-done:
				return
			case <-t.C:
				runtime.ReadMemStats(&m)
				if m.HeapInuse > peak.Load() {
					peak.Store(m.HeapInuse)
				}
			}
		}
	}()
	return func() float64 {
		close(done)
		return float64(peak.Load()-min(peak.Load(), base.HeapInuse)) / (1 << 20)
	}
}

// BenchmarkManyHosts runs one debug task on 5,000 hosts (local connection,
// 10 forks) through kubeplay's runner and through the minimal client-go
// program (the inventory on exec stdin, ansible-playbook run directly), in
// alternation so that both meet the same load. It reports each path's
// time, their ratio, each one's peak Go heap above idle, and the process'
// peak RSS (getrusage maxrss) after each, the CPU time this process spent
// on each path, and the median of the per-pair ratios.
//
//	TF_ACC=1 go test ./internal/runner -run '^$' -bench ManyHosts -benchtime 1x -timeout 60m
//
// KUBEPLAY_BENCH_HOSTS sets another host count, for quicker profiling.
func BenchmarkManyHosts(b *testing.B) {
	const forks = 10
	n := 5000
	if s := os.Getenv("KUBEPLAY_BENCH_HOSTS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			b.Fatalf("KUBEPLAY_BENCH_HOSTS=%q: want a positive host count", s)
		}
		n = v
	}
	cfg, kube, ns := benchEnv(b)
	e := &env{r: &runner.Runner{Config: cfg, Kube: kube}, kube: kube, ns: ns}
	inv := manyHosts(n)
	// The mkdir keeps the worker from ending the pod: it waits 45 s for a
	// run directory (podspec.WorkerStartTimeout), and this run lasts minutes.
	// The direct path runs with the settings the bundle's script exports
	// (all but kubeplay's own callback), and sends the playbook's stdout and
	// stderr back over the exec stream as kubectl exec would.
	direct := []string{"sh", "-c", fmt.Sprintf("mkdir -p "+bundle.RunDirPrefix+"direct && cat > /tmp/inv && printf '%%s' %s > /tmp/p.yml && "+
		"ANSIBLE_NOCOLOR=1 ANSIBLE_FORCE_COLOR=0 ANSIBLE_RETRY_FILES_ENABLED=0 PYTHONUNBUFFERED=1 ANSIBLE_HOST_KEY_CHECKING=1 "+
		"ansible-playbook -i /tmp/inv --forks %d /tmp/p.yml 2>&1", bundle.Quote(oneDebug), forks)}
	var kp, dr, kpCPU, drCPU time.Duration
	var ratios []float64
	for b.Loop() {
		stop := heapPeak()
		start, cpu := time.Now(), cpuTime()
		res := e.r.Run(context.Background(), e.spec(bundle.Bundle{Playbook: oneDebug, Inventory: inv, Forks: forks}))
		kp += time.Since(start)
		kpCPU += cpuTime() - cpu
		b.ReportMetric(stop(), "peak-heap-MiB-kubeplay")
		b.ReportMetric(maxRSS(), "maxrss-MiB-after-kubeplay")
		if res.Status != runner.StatusSuccessful || len(res.Hosts) != n {
			b.Fatalf("run: %s (%s), %d hosts", res.Status, res.Message, len(res.Hosts))
		}

		kpTook := time.Since(start)
		stop = heapPeak()
		start, cpu = time.Now(), cpuTime()
		out, err := e.direct(context.Background(), cfg, direct, inv)
		dr += time.Since(start)
		ratios = append(ratios, kpTook.Seconds()/time.Since(start).Seconds())
		drCPU += cpuTime() - cpu
		b.ReportMetric(stop(), "peak-heap-MiB-direct")
		if err != nil || !strings.Contains(out, fmt.Sprintf("host-%04d.example.com", n-1)) {
			b.Fatalf("direct: %v, output tail %q", err, out[max(0, len(out)-500):])
		}
	}
	b.ReportMetric(kp.Seconds()/float64(b.N), "s-kubeplay")
	b.ReportMetric(dr.Seconds()/float64(b.N), "s-direct")
	b.ReportMetric(kp.Seconds()/dr.Seconds(), "x-direct")
	// Load on a shared machine moves both paths by more than their
	// difference: the median of the pairs' ratios resists one noisy pair.
	b.ReportMetric(acctest.Median(ratios), "x-direct-median")
	// The provider shares the node's cores with the playbook: its own CPU
	// time is what it can take from Ansible.
	b.ReportMetric(kpCPU.Seconds()/float64(b.N), "cpu-s-kubeplay")
	b.ReportMetric(drCPU.Seconds()/float64(b.N), "cpu-s-direct")
}

// cpuTime is the CPU time (user and system) this process has used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// maxRSS is the process' peak resident set so far, in MiB.
func maxRSS() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return float64(ru.Maxrss) / 1024
}
