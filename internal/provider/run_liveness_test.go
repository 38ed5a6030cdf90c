// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/capacity"
)

// livenessTimes are what killedProvider measured.
type livenessTimes struct {
	// PodEnded: from the SIGKILL until the killed run's pod ended.
	PodEnded time.Duration
	// NextRun: from the start of the next apply in the group until its run
	// pod was created, past the quota and both ledgers.
	NextRun time.Duration
	// ns and group are the group's, for the leak check.
	ns, group string
}

// killedProvider applies a run of `sleep 300` (create timeout 30m, so its
// deadline is far) in a group with max_concurrent_runs = 1 and max_forks =
// 2 that it holds whole, kills terraform and the provider with SIGKILL once
// the run's pod runs, waits for the pod to end with no kubeplay process
// running, then applies a run in the same group and times its wait.
func killedProvider(tb testing.TB, e *testEnv, timeout time.Duration) livenessTimes {
	tb.Helper()
	terraformBin, cliConfig, err := providerCLI(tb)
	if err != nil {
		tb.Fatal(err)
	}
	ns := acctest.Namespace(tb, e.kube, "kp-liveness")
	group := randName("liveness")
	dirs := map[string]string{}
	for name, body := range map[string]string{
		"group": fmt.Sprintf(`resource "kubeplay_container_group" "g" {
  name                = %q
  namespace           = %q
  image               = %q
  max_concurrent_runs = 1
  max_forks           = 2
  pod_pending_timeout = "5m"
}
`, group, ns, acctest.TestImage()),
		// The run tells the pod's log that it started: killed before the
		// exec, the provider would leave a pod that ends itself later
		// (podspec.WorkerStartTimeout), which is not what this measures.
		"killed": livenessRun(group, "echo "+livenessStarted+" >/proc/1/fd/1; sleep 300"),
		"next":   livenessRun(group, "true"),
	} {
		dirs[name] = tb.TempDir()
		cfg := cliHeader(e.kubeconfig, e.catalog) + body
		if err := os.WriteFile(filepath.Join(dirs[name], "main.tf"), []byte(cfg), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	apply := []string{"apply", "-auto-approve", "-input=false", "-no-color"}
	if err := terraformCLI(terraformBin, cliConfig, dirs["group"], apply...); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		for _, d := range []string{dirs["next"], dirs["group"]} {
			_ = terraformCLI(terraformBin, cliConfig, d, "destroy", "-auto-approve", "-no-color")
		}
	})

	s := &signalEnv{e: e, ns: ns, dir: dirs["killed"], terraformBin: terraformBin, cliConfig: cliConfig}
	cmd, out := s.start(tb)
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("the killed apply's output:\n%s", out.String())
		}
	})
	orphan := s.waitPod(tb, "running", 5*time.Minute, running)
	waitLogLine(tb, e, ns, orphan, livenessStarted)
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		tb.Fatal(err)
	}
	killed := time.Now()
	_ = cmd.Wait()
	// The killed run's claims are short, not its 30 minute deadline.
	for _, kind := range []string{capacity.Runs, capacity.Forks} {
		led := capacity.Ledger{Kube: e.kube, Namespace: ns, Group: group, Kind: kind}
		cm, err := e.kube.CoreV1().ConfigMaps(ns).Get(context.Background(), led.ConfigMapName(), metav1.GetOptions{})
		if err != nil {
			tb.Fatal(err)
		}
		if len(cm.Data) != 1 {
			tb.Fatalf("ledger %s holds %v, want the killed run's claim", cm.Name, cm.Data)
		}
		for k, v := range cm.Data {
			var entry capacity.Entry
			if err := json.Unmarshal([]byte(v), &entry); err != nil {
				tb.Fatal(err)
			}
			if left := time.Until(entry.Expires); left > capacity.ClaimTTL+5*time.Second {
				tb.Errorf("the killed run's claim %s in %s expires in %s, want at most %s", k, cm.Name, left, capacity.ClaimTTL)
			}
		}
	}

	times := livenessTimes{ns: ns, group: group}
	s.waitPod(tb, "ended", timeout, func(p *corev1.Pod) bool {
		return p.Name == orphan && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed)
	})
	times.PodEnded = time.Since(killed)

	ctx, cancel := context.WithTimeout(context.Background(), 2*timeout)
	defer cancel()
	w, err := e.kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "kubeplay.io/run"})
	if err != nil {
		tb.Fatal(err)
	}
	created := make(chan time.Time, 1)
	go func() {
		_, _ = watchtools.UntilWithoutRetry(ctx, w, func(ev watch.Event) (bool, error) {
			p, ok := ev.Object.(*corev1.Pod)
			if ok && ev.Type == watch.Added && p.Name != orphan {
				created <- time.Now()
				return true, nil
			}
			return false, nil
		})
	}()
	start := time.Now()
	if err := terraformCLI(terraformBin, cliConfig, dirs["next"], apply...); err != nil {
		tb.Fatalf("the next run in the group: %v", err)
	}
	select {
	case at := <-created:
		times.NextRun = at.Sub(start)
	default:
		tb.Fatal("the next run succeeded, but its pod was not seen")
	}
	return times
}

const livenessStarted = "kubeplay-liveness-run-started"

// waitLogLine follows the pod's log until line appears. The kubelet ends a
// follow without an error when its runtime status call fails, as under
// make test-all's load on a slower machine: a follow that ends early is
// opened again while the pod runs.
func waitLogLine(tb testing.TB, e *testEnv, ns, pod, line string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for follows := 1; ; follows++ {
		logs, err := e.kube.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Follow: true}).Stream(ctx)
		if err != nil {
			tb.Fatalf("following pod %s's log: %v", pod, err)
		}
		sc := bufio.NewScanner(logs)
		for sc.Scan() {
			if sc.Text() == line {
				_ = logs.Close()
				return
			}
		}
		_ = logs.Close()
		p, err := e.kube.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil || p.Status.Phase != corev1.PodRunning || ctx.Err() != nil {
			// The typed client's Get returns an empty pod with its error.
			tb.Fatalf("pod %s never logged %q in %d follows of its log (the last ended: %v; the pod: %q, %v)",
				pod, line, follows, sc.Err(), p.Status.Phase, err)
		}
		tb.Logf("pod %s: the follow of its log ended while it runs (%v); following again", pod, sc.Err())
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func livenessRun(group, command string) string {
	return fmt.Sprintf(`resource "kubeplay_run" "r" {
  container_group = %q
  forks           = 2
  command         = ["sh", "-c", %q]
  timeouts {
    create = "30m"
  }
}
`, group, command)
}

// TestAccRun_killedProviderFreesCapacity: after kill -9 of the provider
// mid-run, the run's pod ends within a minute with no kubeplay process
// running (its watchdog heard no beat for the group's 30 s disconnect
// grace), and the next run in the group gets
// the quota and ledger slots within a minute (the killed run's claims
// expire unrenewed), not at the killed run's 30 minute deadline. On the
// local test cluster the pod ends about 34 s after the kill (the grace,
// the watchdog's 2 s tick and the pod's end), and the next run, started
// then, gets its slot in under a second: the claims expired meanwhile.
func TestAccRun_killedProviderFreesCapacity(t *testing.T) {
	e := newTestEnv(t)
	const bound = time.Minute
	times := killedProvider(t, e, 3*bound)
	t.Logf("FAULT both_killed ended in %.1f s: the pod ended itself; the next run got the slot in %.1f s",
		times.PodEnded.Seconds(), times.NextRun.Seconds())
	acctest.CheckNoLeaks(t, e.kube, groupLeaks(times.ns, times.group))
	t.Logf("after SIGKILL: run pod ended in %s; next run's pod created %s after its apply began",
		times.PodEnded.Round(time.Millisecond), times.NextRun.Round(time.Millisecond))
	if times.PodEnded > bound {
		t.Errorf("the killed run's pod ended %s after the kill, want within %s", times.PodEnded, bound)
	}
	if times.NextRun > bound {
		t.Errorf("the next run waited %s for capacity, want within %s", times.NextRun, bound)
	}
}

// BenchmarkKilledProviderLiveness measures, per kill -9 of the provider
// mid-run, how long the run's pod lives on (pod-end-s) and how long the
// next run in the group waits for its slot (next-run-s, from the start of
// its apply until its pod is created).
//
//	TF_ACC=1 go test ./internal/provider -run '^$' -bench KilledProviderLiveness -benchtime 1x -timeout 30m
func BenchmarkKilledProviderLiveness(b *testing.B) {
	e := benchTestEnv(b)
	var ended, next time.Duration
	for i := 0; i < b.N; i++ {
		times := killedProvider(b, e, 5*time.Minute)
		ended += times.PodEnded
		next += times.NextRun
	}
	b.ReportMetric(ended.Seconds()/float64(b.N), "pod-end-s")
	b.ReportMetric(next.Seconds()/float64(b.N), "next-run-s")
	b.ReportMetric(0, "ns/op")
}
