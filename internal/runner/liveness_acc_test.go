package runner_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
)

// waitPhase watches pod until cond holds, and returns when it did.
func (e *env) waitPhase(name string, timeout time.Duration, cond func(*corev1.Pod) bool) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	w, err := e.kube.CoreV1().Pods(e.ns).Watch(ctx, metav1.SingleObject(metav1.ObjectMeta{Name: name}))
	if err != nil {
		return nil, err
	}
	ev, err := watchtools.UntilWithoutRetry(ctx, w, func(ev watch.Event) (bool, error) {
		p, ok := ev.Object.(*corev1.Pod)
		return ok && cond(p), nil
	})
	if err != nil {
		return nil, err
	}
	p, _ := ev.Object.(*corev1.Pod)
	return p, nil
}

func ended(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// TestAccRunWorkerEndsWithoutRun: a run pod that no run execs into (its
// provider died between creating it and the exec) ends itself after
// podspec.WorkerStartTimeout, Succeeded, and so leaves the quota.
func TestAccRunWorkerEndsWithoutRun(t *testing.T) {
	e := newEnv(t)
	pod, err := e.kube.CoreV1().Pods(e.ns).Create(context.Background(), e.pod(acctest.TestImage()), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	running, err := e.waitPhase(pod.Name, 2*time.Minute, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	if err != nil {
		t.Fatal(err)
	}
	started := running.Status.ContainerStatuses[0].State.Running.StartedAt.Time
	p, err := e.waitPhase(pod.Name, podspec.WorkerStartTimeout+time.Minute, ended)
	if err != nil {
		t.Fatalf("the pod without a run did not end: %v", err)
	}
	term := p.Status.ContainerStatuses[0].State.Terminated
	if p.Status.Phase != corev1.PodSucceeded || term == nil {
		t.Fatalf("the pod ended %s (%+v), want Succeeded", p.Status.Phase, p.Status.ContainerStatuses)
	}
	lived := term.FinishedAt.Sub(started)
	if lived < podspec.WorkerStartTimeout-2*time.Second || lived > podspec.WorkerStartTimeout+15*time.Second {
		t.Errorf("the worker lived %s, want about %s", lived, podspec.WorkerStartTimeout)
	}
	t.Logf("a run pod without a run ended after %s", lived)
}

// TestAccRunKeptPodStaysRunning: a failed run whose pod is kept ends its
// script normally, which stops the watcher, so the end of the exec's stdin
// afterwards leaves the pod running for inspection, past the worker's start
// timeout.
func TestAccRunKeptPodStaysRunning(t *testing.T) {
	e := newEnv(t)
	s := e.spec(bundle.Bundle{Command: []string{"sh", "-c", "exit 3"}})
	s.KeepPodOnFailure = true
	res := e.r.Run(context.Background(), s)
	if res.Status != runner.StatusFailed || !res.PodKept {
		t.Fatalf("result %+v", res)
	}
	p, err := e.waitPhase(res.PodName, podspec.WorkerStartTimeout+10*time.Second, ended)
	if err == nil {
		t.Fatalf("the kept pod ended (%s): %+v", p.Status.Phase, p.Status.ContainerStatuses)
	}
	p, err = e.kube.CoreV1().Pods(e.ns).Get(context.Background(), res.PodName, metav1.GetOptions{})
	if err != nil || p.Status.Phase != corev1.PodRunning {
		t.Fatalf("the kept pod: %v, %v", p, err)
	}
}
