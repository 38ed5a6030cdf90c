// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
)

// BenchmarkRun100 applies 100 runs of a command that sleeps 2 seconds in one
// terraform apply (-parallelism=20) in a group with max_concurrent_runs = 10,
// against the ideal of 10 waves of one such run applied alone (10 applies of
// one run, at phases of the kubelet's relist spread over its second). It
// records the peak of live run pods, checks that none is left, and counts
// the API server's requests per run from its metrics (every client's,
// kubelet and scheduler included).
//
//	TF_ACC=1 go test ./internal/provider -run '^$' -bench 'Run100$' -benchtime 1x -timeout 30m
func BenchmarkRun100(b *testing.B) { run100(b, 0) }

// BenchmarkRun100Warm is BenchmarkRun100 with a group that keeps 10 warm
// pods: the 100 runs start once the pool is ready, against the same ideal
// of cold single-run applies, measured in the same benchmark.
//
//	TF_ACC=1 go test ./internal/provider -run '^$' -bench Run100Warm -benchtime 1x -timeout 30m
func BenchmarkRun100Warm(b *testing.B) { run100(b, 10) }

// benchGroup is the group kubeplay_container_group.g of the scale
// benchmarks: 10 runs at a time, warm warm pods, and run pods small enough
// that 10 fit this 2-core node.
func benchGroup(name, ns string, warm int) string {
	return fmt.Sprintf(`resource "kubeplay_container_group" "g" {
  name                = %q
  namespace           = %q
  image               = %q
  warm_pods           = %d
  max_concurrent_runs = 10
  pod_pending_timeout = "10m"
  # 10 pods of the default 250m request would not fit this 2-core node.
  pod_spec_override = yamlencode({ spec = { containers = [{ name = "worker", resources = { requests = { cpu = "10m", memory = "16Mi" } } }] } })
}
`, name, ns, acctest.TestImage(), warm)
}

func run100(b *testing.B, warm int) {
	e := benchTestEnv(b)
	ns := acctest.Namespace(b, e.kube, "kp-scale")
	terraformBin, cliConfig, err := providerCLI(b)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	warmPods := 0
	write := func(n int) {
		cfg := cliHeader(e.kubeconfig, e.catalog) + benchGroup("scale", ns, warmPods) + fmt.Sprintf(`
resource "kubeplay_run" "r" {
  count           = %d
  container_group = kubeplay_container_group.g.name
  command         = ["sleep", "2"]
}
`, n)
		if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(cfg), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	apply := func(n int, args ...string) time.Duration {
		write(n)
		start := time.Now()
		if err := terraformCLI(terraformBin, cliConfig, dir, append([]string{"apply", "-auto-approve", "-input=false", "-no-color"}, args...)...); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	defer func() {
		if err := terraformCLI(terraformBin, cliConfig, dir, "destroy", "-auto-approve", "-input=false", "-no-color"); err != nil {
			b.Error(err)
		}
	}()
	apply(0)
	for b.Loop() {
		// The ideal: 10 waves of one run alone, measured as 10 applies of one
		// run. The kubelet sees a container start or stop at its 1 s relist,
		// so a run alone takes 3.6 to 4.5 s depending on where in that second
		// it starts; applies in a loop of fixed length start at the same
		// phase every time (here mostly the lucky one). Pauses spread over
		// a second, one in each tenth, sample the phase evenly, as runs
		// started by users meet it.
		var alone time.Duration
		var ones []time.Duration
		for k := range 10 {
			time.Sleep(acctest.RelistPhase(k))
			d := apply(1)
			ones = append(ones, d)
			alone += d
			apply(0)
		}
		one := alone / 10
		if warm > 0 {
			// The pool is started, and ready, before the runs come.
			warmPods = warm
			apply(0)
			acctest.WaitWarmReady(b, e.kube, ns, "scale", warm)
		}
		before := e.apiRequests(b)
		ctx, stop := context.WithCancel(context.Background())
		peak := e.observeForks(ctx, "scale", ns)
		hundred := apply(100, "-parallelism=20")
		stop()
		after := e.apiRequests(b)
		peaks := peak()
		// A run in a warm pod ends once its pod's deletion is accepted: its
		// pod goes within seconds of the apply, not before it ends.
		limit := time.Duration(0) // a cold run's pod is gone when its run ends
		if warm > 0 {
			limit = 30 * time.Second
		}
		left, settled := e.runPodsGone(ns, limit)
		if left != 0 {
			b.Fatalf("%d run pods left %s after the apply", left, limit)
		}
		if warm > 0 {
			b.ReportMetric(settled.Seconds(), "s-until-run-pods-gone")
		}
		// The quota stops counting a pod once its grace period is over, while
		// the kubelet may still be removing it: only live pods are limited.
		if peaks.Live > 10 {
			b.Fatalf("%d live run pods at once; max_concurrent_runs is 10", peaks.Live)
		}
		ideal := 10 * one
		b.ReportMetric(hundred.Seconds(), "s-100-runs")
		b.ReportMetric(one.Seconds(), "s-1-run")
		b.ReportMetric(slices.Min(ones).Seconds(), "s-1-run-min")
		b.ReportMetric(slices.Max(ones).Seconds(), "s-1-run-max")
		b.ReportMetric(hundred.Seconds()/ideal.Seconds(), "x-ideal")
		b.ReportMetric(float64(peaks.Live), "peak-live-pods")
		b.ReportMetric(float64(peaks.Objects), "peak-pod-objects")
		var total float64
		keys := make([]string, 0, len(after))
		for k, v := range after {
			if d := v - before[k]; d > 0 {
				total += d
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		var per []string
		for _, k := range keys {
			per = append(per, fmt.Sprintf("%s %.2f", k, (after[k]-before[k])/100))
		}
		b.Logf("API requests per run, by verb and resource: %s", strings.Join(per, "; "))
		b.ReportMetric(total/100, "api-requests/run")
		if warm > 0 {
			b.ReportMetric(float64(warmRuns(b, dir)), "runs-in-warm-pods")
		}
		warmPods = 0
		apply(0)
		if warm > 0 {
			// Without warm_pods the group keeps none: nothing is left.
			if pods, err := e.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{}); err != nil || len(pods.Items) != 0 {
				b.Fatalf("%d pods left after the pool was drained (%v)", len(pods.Items), err)
			}
		}
	}
}

// runPodsGone waits up to limit for ns to hold no run pod; it gives how
// many are left and how long it waited.
func (e *testEnv) runPodsGone(ns string, limit time.Duration) (int, time.Duration) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	left, _ := acctest.WaitPods(ctx, e.kube, ns, "kubeplay.io/run", func(pods []corev1.Pod) bool { return len(pods) == 0 })
	return len(left), time.Since(start)
}

// warmRuns counts the runs in dir's state that ran in a warm pod.
func warmRuns(b *testing.B, dir string) int {
	n := 0
	for _, a := range runStates(b, dir) {
		if name, _ := a["pod_name"].(string); strings.HasPrefix(name, "kubeplay-warm-") {
			n++
		}
	}
	return n
}

// benchTestEnv is newTestEnv for benchmarks.
func benchTestEnv(b *testing.B) *testEnv {
	b.Helper()
	e := &testEnv{t: b, kube: acctest.Kube(b), kubeconfig: acctest.Kubeconfig(b), catalog: randName("kp-catalog")}
	b.Cleanup(func() {
		_ = e.kube.CoreV1().Namespaces().Delete(context.Background(), e.catalog, metav1.DeleteOptions{})
	})
	return e
}

var requestMetric = regexp.MustCompile(`^apiserver_request_total\{(.*)\} ([0-9.e+]+)$`)
var metricLabel = regexp.MustCompile(`(\w+)="([^"]*)"`)

// apiRequests reads apiserver_request_total, summed by verb and resource.
func (e *testEnv) apiRequests(b testing.TB) map[string]float64 {
	raw, err := e.kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		b.Fatalf("reading the API server's metrics: %v", err)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := requestMetric.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		labels := map[string]string{}
		for _, l := range metricLabel.FindAllStringSubmatch(m[1], -1) {
			labels[l[1]] = l[2]
		}
		res := labels["resource"]
		if labels["subresource"] != "" {
			res += "/" + labels["subresource"]
		}
		v, _ := strconv.ParseFloat(m[2], 64)
		out[labels["verb"]+" "+res] += v
	}
	return out
}
