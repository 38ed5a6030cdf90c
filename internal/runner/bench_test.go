package runner_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podexec"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
)

// The run-path benchmarks compare kubeplay's runner with the least a
// client-go program can do for the same 2-task playbook: create the pod,
// watch it to Running, exec ansible-playbook, delete it and wait until it is
// gone. Both count a run as finished when its pod is gone.
//
//	TF_ACC=1 go test ./internal/runner -run '^$' -bench 'RunPath' -benchtime 10x -count 3
func benchEnv(b *testing.B) (*rest.Config, kubernetes.Interface, string) {
	b.Helper()
	cfg, kube := acctest.Clients(b)
	return cfg, kube, acctest.Namespace(b, kube, "kp-bench")
}

func BenchmarkRunPathKubeplay(b *testing.B) {
	cfg, kube, ns := benchEnv(b)
	e := &env{r: &runner.Runner{Config: cfg, Kube: kube}, kube: kube, ns: ns}
	for b.Loop() {
		res := e.r.Run(context.Background(), e.spec(bundle.Bundle{Playbook: twoTasks}))
		if res.Status != runner.StatusSuccessful || res.Hosts["localhost"].OK != 2 {
			b.Fatalf("run: %+v", res)
		}
	}
}

func BenchmarkRunPathDirectClientGo(b *testing.B) {
	cfg, kube, ns := benchEnv(b)
	e := &env{kube: kube, ns: ns}
	cmd := []string{"sh", "-c", "cat > /tmp/p.yml && ansible-playbook -i localhost, -c local /tmp/p.yml"}
	for b.Loop() {
		out, err := e.direct(context.Background(), cfg, cmd, twoTasks)
		if err != nil || !strings.Contains(out, "ok=2") {
			b.Fatalf("run: %v, output %q", err, out)
		}
	}
}

// direct is the least a client-go program does for a run: create the pod,
// watch it to Running, exec cmd with stdin, delete the pod and wait until it
// is gone. It returns the command's output.
func (e *env) direct(ctx context.Context, cfg *rest.Config, cmd []string, stdin string) (string, error) {
	pods := e.kube.CoreV1().Pods(e.ns)
	pod, err := pods.Create(ctx, e.pod(acctest.TestImage()), metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	deleted := false
	defer func() {
		if !deleted { // a failed run leaves no pod either
			_ = runner.DeletePod(context.Background(), e.kube, e.ns, pod.Name, pod.UID)
		}
	}()
	w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + pod.Name, ResourceVersion: pod.ResourceVersion})
	if err != nil {
		return "", err
	}
	if _, err := watchtools.UntilWithoutRetry(ctx, w, func(ev watch.Event) (bool, error) {
		p, ok := ev.Object.(*corev1.Pod)
		return ok && p.Status.Phase == corev1.PodRunning, nil
	}); err != nil {
		return "", err
	}
	var out strings.Builder
	code, err := podexec.Run(ctx, cfg, e.kube, e.ns, pod.Name, "worker", cmd, strings.NewReader(stdin), &out, io.Discard)
	if err == nil && code != 0 {
		err = fmt.Errorf("exit code %d", code)
	}
	if err != nil {
		return out.String(), err
	}
	deleted = true
	return out.String(), runner.DeletePod(ctx, e.kube, e.ns, pod.Name, pod.UID)
}

// BenchmarkRun100Node takes Terraform out of the 100-run benchmark to show
// what the node allows: 100 runs of "sleep 2", 10 at a time, done once by
// kubeplay's runner and once by the direct client-go program, each against
// its own ideal (10 runs alone, at phases of the kubelet's relist spread
// over its second). A run is finished when its pod is gone, and a slot is
// reused only then.
//
//	TF_ACC=1 go test ./internal/runner -run '^$' -bench Run100Node -benchtime 1x
func BenchmarkRun100Node(b *testing.B) {
	cfg, kube, ns := benchEnv(b)
	e := &env{r: &runner.Runner{Config: cfg, Kube: kube}, kube: kube, ns: ns}
	sleep := []string{"sleep", "2"}
	paths := []struct {
		name string
		run  func() error
	}{
		{"kubeplay", func() error {
			res := e.r.Run(context.Background(), e.spec(bundle.Bundle{Command: sleep}))
			if res.Status != runner.StatusSuccessful {
				return fmt.Errorf("run: %s: %s", res.Status, res.Message)
			}
			return nil
		}},
		{"direct", func() error {
			_, err := e.direct(context.Background(), cfg, sleep, "")
			return err
		}},
	}
	for b.Loop() {
		for _, p := range paths {
			// 10 waves of one run alone. Runs back to back start in step
			// with the kubelet's 1 s relist, which makes every one equally
			// lucky or unlucky; a pause in each tenth of a second samples
			// the phase evenly instead.
			var one time.Duration
			for k := range 10 {
				time.Sleep(acctest.RelistPhase(k))
				start := time.Now()
				if err := p.run(); err != nil {
					b.Fatal(err)
				}
				one += time.Since(start)
			}
			start := time.Now()
			var g errgroup.Group
			g.SetLimit(10)
			for range 100 {
				g.Go(p.run)
			}
			if err := g.Wait(); err != nil {
				b.Fatal(err)
			}
			hundred := time.Since(start)
			b.ReportMetric(hundred.Seconds(), "s-100-"+p.name)
			b.ReportMetric(one.Seconds()/10, "s-1-"+p.name)
			b.ReportMetric(hundred.Seconds()/one.Seconds(), "x-ideal-"+p.name)
		}
		pods, err := kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil || len(pods.Items) != 0 {
			b.Fatalf("pods left: %v %v", err, pods)
		}
	}
}

// BenchmarkRunLargeOutput runs a command that prints 200 MB and reports the
// peak of the Go heap above its level before the run (sampled every 10 ms),
// the size of the kept tail, and the peak of the output kept on the pod's
// disk (du of the run's segments, every 500 ms): output memory and disk
// must stay bounded.
//
//	TF_ACC=1 go test ./internal/runner -run '^$' -bench 'LargeOutput' -benchtime 1x
func BenchmarkRunLargeOutput(b *testing.B) {
	cfg, kube, ns := benchEnv(b)
	e := &env{r: &runner.Runner{Config: cfg, Kube: kube}, kube: kube, ns: ns}
	const size = 200 << 20
	for b.Loop() {
		stop := heapPeak()
		var lines atomic.Int64
		s := e.spec(bundle.Bundle{Command: []string{"sh", "-c", fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x | fold -w 99", size)}})
		s.OnLine = func(string) { lines.Add(1) }
		var disk atomic.Int64
		done := make(chan struct{})
		s.OnCreated = func(ctx context.Context, pod *corev1.Pod) error {
			go func() {
				tick := time.NewTicker(500 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-done:
						return
					case <-tick.C:
					}
					var out bytes.Buffer
					_, _ = podexec.Run(context.Background(), cfg, kube, pod.Namespace, pod.Name, "worker",
						[]string{"sh", "-c", "du -sk /tmp/kubeplay.*/out 2>/dev/null | awk '{s+=$1} END {print s+0}'"}, nil, &out, io.Discard)
					if kib, err := strconv.ParseInt(strings.TrimSpace(out.String()), 10, 64); err == nil && kib<<10 > disk.Load() {
						disk.Store(kib << 10)
					}
				}
			}()
			return nil
		}
		res := e.r.Run(context.Background(), s)
		close(done)
		above := stop()
		if res.Status != runner.StatusSuccessful || len(res.Output) > 64<<10 {
			b.Fatalf("status %s (%s), tail %d bytes", res.Status, res.Message, len(res.Output))
		}
		// fold leaves the last, partial line without a newline.
		if !strings.HasSuffix(res.Output, strings.Repeat("x", 99)+"\n"+strings.Repeat("x", size%99)) {
			b.Fatalf("the tail is not the command's last output: %q", res.Output[max(0, len(res.Output)-200):])
		}
		if n := lines.Load(); n < size/100 {
			b.Fatalf("only %d lines streamed", n)
		}
		b.ReportMetric(above, "peak-heap-MiB-above-idle")
		b.ReportMetric(float64(len(res.Output)), "tail-bytes")
		b.ReportMetric(float64(disk.Load())/(1<<20), "peak-pod-output-MiB")
		if disk.Load() > bundle.OutputCap+bundle.SegmentSize {
			b.Fatalf("the pod kept %d bytes of output, past the cap %d", disk.Load(), bundle.OutputCap)
		}
	}
}
