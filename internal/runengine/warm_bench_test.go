// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalogkey"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podexec"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runengine"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/waitfor"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/warmpool"
)

const twoTasks = `- hosts: all
  gather_facts: false
  tasks:
    - command: "true"
    - debug: {msg: done}
`

// BenchmarkWarmRun times a 2-task playbook run through the run engine, from
// the start of Engine.Run to its result (the end of the run's exec, before
// the pod's clean-up), on a warm pod and on the cold path, against the exec
// alone: the least a client-go program does once a pod runs, the same
// playbook piped over podexec into a running pod's ansible-playbook. Every
// iteration does all three; the warm pool is full and ready before the warm
// run starts. The figures are medians over the iterations.
//
//	TF_ACC=1 go test ./internal/runengine -run '^$' -bench WarmRun -benchtime 10x
func BenchmarkWarmRun(b *testing.B) {
	cfg, _ := acctest.Clients(b)
	c, err := kubeclient.NewClients(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ns := acctest.Namespace(b, c.Kube, "kp-warm-bench")
	ctx := context.Background()
	group := runengine.Group{Name: "bench", Namespace: ns, Pod: podspec.Group{Image: acctest.TestImage()},
		Warm: map[string]int64{"": 1}, PendingTimeout: time.Minute}
	cold := group
	cold.Warm = nil
	// As the provider does: one orphan sweep per group and process.
	key, err := catalogkey.New([]byte("kubeplay-bench-catalog-key-32-bytes"))
	if err != nil {
		b.Fatal(err)
	}
	e := runengine.New(c, runengine.Options{Sweeps: (&runengine.Once{}).Do, DryRuns: (&runengine.Once{}).Do,
		Key: func(context.Context) (*catalogkey.Key, error) { return key, nil }})
	run := func(g runengine.Group) (time.Duration, runner.Result) {
		req := runengine.Request{RunInfo: runengine.RunInfo{ID: runengine.NewID(), Name: "bench"}, Operation: runengine.OperationCreate,
			Group: g, Bundle: bundle.Bundle{Playbook: twoTasks}, OutputLimit: 64 << 10, Timeout: 2 * time.Minute}
		start := time.Now()
		out, err := e.Run(ctx, req)
		if err != nil || out.Status != runner.StatusSuccessful || out.Hosts["localhost"].OK != 2 {
			b.Fatalf("run: %v, %+v", err, out.Result)
		}
		return out.ResultAt.Sub(start), out.Result
	}
	tmpl, err := runengine.WarmTemplate(group, nil)
	if err != nil {
		b.Fatal(err)
	}
	tmpl.Key = key
	defer func() { _ = warmpool.Drain(context.Background(), c.Kube, key, ns, group.Name, nil) }()

	// The exec alone runs in a pod of the same spec, started once.
	pod, err := c.Kube.CoreV1().Pods(ns).Create(ctx, tmpl.Pod, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = runner.DeletePod(context.Background(), c.Kube, ns, pod.Name, pod.UID) }()
	if _, err := waitfor.Until(ctx, waitfor.Named(c.Kube.CoreV1().Pods(ns), pod.Name), &corev1.Pod{}, func(ev watch.Event) (bool, error) {
		p, ok := ev.Object.(*corev1.Pod)
		return ok && warmpool.Ready(p), nil
	}); err != nil {
		b.Fatal(err)
	}
	// The exec alone does not touch the pod's start timeout: the runner's
	// bundle marks the pod as in use, this marks it by hand.
	if _, err := podexec.Run(ctx, cfg, c.Kube, ns, pod.Name, "worker", []string{"mkdir", "-p", "/tmp/kubeplay.bench"}, nil, io.Discard, io.Discard); err != nil {
		b.Fatal(err)
	}
	cmd := []string{"sh", "-c", "cat > /tmp/p.yml && ansible-playbook -i localhost, -c local /tmp/p.yml"}
	execAlone := func() time.Duration {
		var out strings.Builder
		start := time.Now()
		code, err := podexec.Run(ctx, cfg, c.Kube, ns, pod.Name, "worker", cmd, strings.NewReader(twoTasks), &out, io.Discard)
		d := time.Since(start)
		if err != nil || code != 0 || !strings.Contains(out.String(), "ok=2") {
			b.Fatalf("exec: %d, %v, %q", code, err, out.String())
		}
		return d
	}
	var warm, coldRuns, exec []float64
	for b.Loop() {
		if _, err := warmpool.Fill(ctx, c.Kube, tmpl, 1); err != nil {
			b.Fatal(err)
		}
		acctest.WaitWarmReady(b, c.Kube, ns, group.Name, 1)
		d, res := run(group)
		if !strings.HasPrefix(res.PodName, "kubeplay-warm-") {
			b.Fatalf("the warm run ran in pod %s, not a warm pod", res.PodName)
		}
		warm = append(warm, d.Seconds())
		exec = append(exec, execAlone().Seconds())
		d, res = run(cold)
		if strings.HasPrefix(res.PodName, "kubeplay-warm-") {
			b.Fatalf("the cold run ran in warm pod %s", res.PodName)
		}
		coldRuns = append(coldRuns, d.Seconds())
	}
	w, x, k := acctest.Median(warm), acctest.Median(exec), acctest.Median(coldRuns)
	b.ReportMetric(w, "s-warm")
	b.ReportMetric(k, "s-cold")
	b.ReportMetric(x, "s-exec-alone")
	b.ReportMetric(w/x, "x-exec-warm")
	b.ReportMetric(k/x, "x-exec-cold")
	b.Logf("medians over %d iterations: warm %.3f s, cold %.3f s, exec alone %.3f s", len(warm), w, k, x)
}
