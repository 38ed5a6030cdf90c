// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner/runnertest"
)

// startError is a pod in phase whose worker the runtime could not start,
// saying msg.
func startError(phase corev1.PodPhase, msg string) *corev1.Pod {
	return withStatus(testPod("p"), corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{Name: "worker",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "StartError", ExitCode: 128, Message: msg}}}}})
}

func TestCanPass(t *testing.T) {
	failed := func(reason string, conds ...corev1.PodCondition) *corev1.Pod {
		return withStatus(testPod("p"), corev1.PodStatus{Phase: corev1.PodFailed, Reason: reason, Conditions: conds})
	}
	disrupted := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "DeletionByTaintManager"}
	// exited is a pod whose worker (args) exited with code after ran.
	exited := func(phase corev1.PodPhase, args []string, code int32, ran time.Duration) *corev1.Pod {
		p := testPod("p")
		p.Spec.Containers[0].Args = args
		start := time.Now().Add(-time.Hour)
		return withStatus(p, corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{Name: "worker",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", ExitCode: code,
				StartedAt: metav1.NewTime(start), FinishedAt: metav1.NewTime(start.Add(ran))}}}}})
	}
	gaveUp := podspec.WorkerStartTimeout
	for _, c := range []struct {
		name   string
		pod    *corev1.Pod
		pass   bool
		reason Reason
	}{
		{"evicted", failed("Evicted"), true, ReasonEvicted},
		{"node lost", failed("NodeLost"), true, ReasonNodeLost},
		{"node shut down", failed("Terminated"), true, ReasonNodeLost},
		{"disruption target", failed("", disrupted), true, ReasonNodeLost},
		{"deadline", failed("DeadlineExceeded"), false, ReasonStartFailed},
		{"succeeded", withStatus(testPod("p"), corev1.PodStatus{Phase: corev1.PodSucceeded}), false, ReasonStartFailed},
		// The default worker ends itself when no run came within its start
		// timeout: the kubelet reported it running too late.
		{"worker gave up, running", exited(corev1.PodRunning, podspec.WorkerArgs, 0, gaveUp), true, ReasonNodeStartFailed},
		{"worker gave up, succeeded", exited(corev1.PodSucceeded, podspec.WorkerArgs, 0, gaveUp), true, ReasonNodeStartFailed},
		{"worker exited early", exited(corev1.PodRunning, podspec.WorkerArgs, 0, time.Second), false, ReasonStartFailed},
		{"worker failed", exited(corev1.PodFailed, podspec.WorkerArgs, 1, gaveUp), false, ReasonStartFailed},
		{"own command exited", exited(corev1.PodSucceeded, []string{"sleep", "45"}, 0, gaveUp), false, ReasonStartFailed},
		{"image pull", withStatus(testPod("p"), waiting("worker", "ErrImagePull")), false, ReasonImagePull},
		{"image pull backoff", withStatus(testPod("p"), waiting("worker", "ImagePullBackOff")), false, ReasonImagePull},
		{"invalid image", withStatus(testPod("p"), waiting("worker", "InvalidImageName")), false, ReasonImagePull},
		{"unschedulable", withStatus(testPod("p"), corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		}}}), false, ReasonUnschedulable},
		{"config error", withStatus(testPod("p"), waiting("worker", "CreateContainerConfigError")), false, ReasonPodRejected},
		// The soak: a kubelet stopped while it started the container.
		{"start broken off, failed", startError(corev1.PodFailed, `failed to start containerd task "0535f1": context canceled: unknown`), true, ReasonNodeStartFailed},
		{"start broken off, running", startError(corev1.PodRunning, `failed to start containerd task "0535f1": context deadline exceeded: unknown`), true, ReasonNodeStartFailed},
		{"missing executable", startError(corev1.PodFailed, `failed to create containerd task: exec: "nope": executable file not found in $PATH: unknown`), false, ReasonStartFailed},
	} {
		_, err := runningOrFailed(c.pod, "worker")
		if err == nil || CanPass(err) != c.pass || ReasonOf(err) != c.reason {
			t.Errorf("%s: error %v, can pass %v, reason %q; want %v, %q", c.name, err, CanPass(err), ReasonOf(err), c.pass, c.reason)
		}
	}
	if _, err := runningOrFailed(exited(corev1.PodRunning, podspec.WorkerArgs, 0, gaveUp), "worker"); err == nil ||
		!strings.Contains(err.Error(), "worker waited 45s") || !strings.Contains(err.Error(), "launch_retries") {
		t.Errorf("a worker that gave up: %v; want the wait and the remedy named", err)
	}
	webhook := apierrors.NewInternalError(errors.New(`failed calling webhook "v.example.com": failed to call webhook: ` +
		`Post "https://v.svc:443/validate?timeout=10s": context deadline exceeded`))
	if !webhookTimeout(webhook) || webhookTimeout(apierrors.NewInternalError(errors.New(`failed calling webhook "v": denied`))) ||
		webhookTimeout(apierrors.NewForbidden(podsResource, "p", errors.New("timeout"))) {
		t.Error("webhookTimeout")
	}
	if CanPass(errors.New("pod p was deleted before it ran")) || !CanPass(fmt.Errorf("x: %w", because(ReasonPodDeleted, errors.New("y")))) {
		t.Error("CanPass goes by the reason, not by the words")
	}
	if ReasonOf(because(ReasonEvicted, because(ReasonStreamLost, errors.New("x")))) != ReasonEvicted {
		t.Error("the outermost reason wins")
	}
}

// launchCluster is a fake cluster whose kubelet does, per created pod in
// order, what its script says; pods beyond the script start running.
type launchCluster struct {
	kube    *fake.Clientset
	mu      sync.Mutex
	created []string
}

func newLaunchCluster(t *testing.T, script ...func(kube *fake.Clientset, name string)) *launchCluster {
	t.Helper()
	lc := &launchCluster{kube: runnertest.NewClientset()}
	// The fake's watches do not replay from a resourceVersion, as the API server's do: a
	// change made between the runner's list and its watch would be lost. So the fake kubelet
	// acts on a pod only once a watch opened after the pod's creation is registered (or after
	// 5 s, for a path that does not watch). Counted here, after the tracker registered it.
	var (
		watchMu sync.Mutex
		watches int64
		opened  = make(chan struct{}) // closed, and replaced, at each watch
	)
	count := func() (int64, <-chan struct{}) {
		watchMu.Lock()
		defer watchMu.Unlock()
		return watches, opened
	}
	lc.kube.PrependWatchReactor("pods", func(a k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := a.(k8stesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := lc.kube.Tracker().Watch(a.GetResource(), a.GetNamespace(), opts)
		if err != nil {
			return true, nil, err
		}
		watchMu.Lock()
		watches++
		close(opened)
		opened = make(chan struct{})
		watchMu.Unlock()
		return true, w, nil
	})
	// The watch count when each pod was created, in creation order: the runner creates the
	// pod, then watches it, sometimes before the fake kubelet below hears of the pod.
	var createdAt []int64
	lc.kube.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		n, _ := count()
		watchMu.Lock()
		createdAt = append(createdAt, n)
		watchMu.Unlock()
		return false, nil, nil
	})
	afterWatch := func(before int64, act func()) {
		timeout := time.After(5 * time.Second)
		for n, ch := count(); n <= before; n, ch = count() {
			select {
			case <-ch:
			case <-timeout:
				act()
				return
			}
		}
		act()
	}
	w, err := lc.kube.CoreV1().Pods("runs").Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type != watch.Added {
				continue
			}
			lc.mu.Lock()
			n := len(lc.created)
			lc.created = append(lc.created, p.Name)
			lc.mu.Unlock()
			act := func(kube *fake.Clientset, name string) { setPodStatus(kube, name, runningStatus()) }
			if n < len(script) {
				act = script[n]
			}
			watchMu.Lock()
			before := watches
			if n < len(createdAt) {
				before = createdAt[n]
			}
			watchMu.Unlock()
			go afterWatch(before, func() { act(lc.kube, p.Name) })
		}
	}()
	return lc
}

func (lc *launchCluster) pods() []string {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return append([]string(nil), lc.created...)
}

func runningStatus() corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
		{Name: "worker", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
	}}
}

// setPodStatus is setStatus for the fake kubelet's goroutines.
func setPodStatus(kube *fake.Clientset, name string, s corev1.PodStatus) {
	if p, err := kube.CoreV1().Pods("runs").Get(context.Background(), name, metav1.GetOptions{}); err == nil {
		p.Status = s
		_, _ = kube.CoreV1().Pods("runs").UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
	}
}

func deletePod(kube *fake.Clientset, name string) {
	_ = kube.CoreV1().Pods("runs").Delete(context.Background(), name, metav1.DeleteOptions{})
}

func launchSpec(retries int) Spec {
	s := Spec{Pod: testPod(""), Container: "worker", PendingTimeout: 2 * time.Second, LaunchRetries: retries}
	s.Pod.GenerateName = "run-"
	return s
}

func TestLaunchRetries(t *testing.T) {
	evict := func(kube *fake.Clientset, name string) {
		setPodStatus(kube, name, corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "node low on memory"})
	}
	pullFails := func(kube *fake.Clientset, name string) { setPodStatus(kube, name, waiting("worker", "ErrImagePull")) }
	for _, c := range []struct {
		name     string
		retries  int
		script   []func(*fake.Clientset, string)
		attempts int
		wantErr  string
	}{
		{"first launch runs", 3, nil, 1, ""},
		{"deleted before it ran, then runs", 3, []func(*fake.Clientset, string){deletePod}, 2, ""},
		{"evicted twice, then runs", 2, []func(*fake.Clientset, string){evict, evict}, 3, ""},
		{"no retries left", 1, []func(*fake.Clientset, string){deletePod, deletePod}, 2,
			"was deleted before it ran (launch attempt 2 of 2)"},
		{"retries off", 0, []func(*fake.Clientset, string){deletePod}, 1, "was deleted before it ran"},
		{"missing image is not retried", 3, []func(*fake.Clientset, string){pullFails}, 1, "cannot start: ErrImagePull"},
	} {
		t.Run(c.name, func(t *testing.T) {
			lc := newLaunchCluster(t, c.script...)
			r := &Runner{Kube: lc.kube}
			var retried []int
			s := launchSpec(c.retries)
			s.OnLaunchRetry = func(attempt int, err error) {
				if !CanPass(err) {
					t.Errorf("retried after %v", err)
				}
				retried = append(retried, attempt)
			}
			var res Result
			pod, err := r.launch(t.Context(), s, &res)
			if (err == nil) != (c.wantErr == "") || (err != nil && !strings.Contains(err.Error(), c.wantErr)) {
				t.Fatalf("error %v, want %q", err, c.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "pod "+res.PodName+" ") {
				t.Errorf("error %v does not name the last pod, %q", err, res.PodName)
			}
			if strings.HasSuffix(c.wantErr, "ErrImagePull") && CanPass(err) {
				t.Error("a missing image can pass")
			}
			if res.LaunchAttempts != c.attempts || len(retried) != c.attempts-1 {
				t.Errorf("%d attempts, %v retried; want %d attempts", res.LaunchAttempts, retried, c.attempts)
			}
			if got := lc.pods(); len(got) != c.attempts || pod == nil || pod.Name != got[len(got)-1] || res.PodName != pod.Name {
				t.Errorf("pods created %v, returned %v, recorded %q", got, pod, res.PodName)
			}
			// Every pod but the last is gone before the next is created.
			list, _ := lc.kube.CoreV1().Pods("runs").List(context.Background(), metav1.ListOptions{})
			for _, p := range list.Items {
				if p.Name != pod.Name {
					t.Errorf("pod %s of a failed launch is left", p.Name)
				}
			}
		})
	}
}

// A webhook that times out refuses a create; a fresh create may pass it.
func TestLaunchRetriesWebhookTimeout(t *testing.T) {
	lc := newLaunchCluster(t)
	refusals := 1
	lc.kube.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if refusals > 0 {
			refusals--
			return true, nil, apierrors.NewInternalError(errors.New(`failed calling webhook "v.example.com": ` +
				`failed to call webhook: Post "https://v.svc:443/?timeout=10s": context deadline exceeded`))
		}
		return false, nil, nil
	})
	var res Result
	pod, err := (&Runner{Kube: lc.kube}).launch(t.Context(), launchSpec(1), &res)
	if err != nil || res.LaunchAttempts != 2 || len(lc.pods()) != 1 || pod.Name != lc.pods()[0] {
		t.Fatalf("%v: %d attempts, pod %v", err, res.LaunchAttempts, pod)
	}
	// A refused spec is not retried.
	lc.kube.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(podsResource, "", errors.New("violates PodSecurity"))
	})
	res = Result{}
	if _, err := (&Runner{Kube: lc.kube}).launch(t.Context(), launchSpec(3), &res); err == nil || CanPass(err) || res.LaunchAttempts != 1 {
		t.Errorf("a forbidden pod: %v, %d attempts", err, res.LaunchAttempts)
	}
}

// A pod whose sandbox the kubelet cannot create is retried after its
// pending timeout; one that just does not start is not.
func TestLaunchRetriesSandbox(t *testing.T) {
	for _, sandbox := range []bool{true, false} {
		t.Run(fmt.Sprint("sandbox failed ", sandbox), func(t *testing.T) {
			stuck := func(kube *fake.Clientset, name string) {
				setPodStatus(kube, name, waiting("worker", "ContainerCreating"))
				if sandbox {
					_, _ = kube.CoreV1().Events("runs").Create(context.Background(), &corev1.Event{
						ObjectMeta:     metav1.ObjectMeta{Name: name + ".sandbox", Namespace: "runs"},
						InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: name, Namespace: "runs"},
						Type:           corev1.EventTypeWarning, Reason: "FailedCreatePodSandBox", Message: "failed to setup network",
					}, metav1.CreateOptions{})
				}
			}
			lc := newLaunchCluster(t, stuck)
			s := launchSpec(2)
			// The second attempt's pod must start within it: 300 ms did not on
			// make test-all's saturated CPU.
			s.PendingTimeout = 2 * time.Second
			var res Result
			_, err := (&Runner{Kube: lc.kube}).launch(t.Context(), s, &res)
			if sandbox && (err != nil || res.LaunchAttempts != 2) {
				t.Errorf("%v after %d attempts", err, res.LaunchAttempts)
			}
			if !sandbox && (err == nil || !strings.Contains(err.Error(), "did not start within the pending timeout") || res.LaunchAttempts != 1) {
				t.Errorf("%v after %d attempts", err, res.LaunchAttempts)
			}
		})
	}
}

// outOfCPU is the kubelet's admission refusing the pod: the scheduler bound
// it, but the node had no room by the kubelet's count (the soak saw this
// after a kubelet restart admitted another pod first).
func outOfCPU(kube *fake.Clientset, name string) {
	setPodStatus(kube, name, corev1.PodStatus{Phase: corev1.PodFailed, Reason: "OutOfcpu",
		Message: "Pod was rejected: Node didn't have enough resource: cpu, requested: 50, used: 1980, capacity: 2000"})
}

// TestLaunchWaitsOutKubeletRefusal: a pod the kubelet refused for want of
// room is a full node, which the run waits out within its pending timeout
// with fresh pods, without a launch retry; past the timeout it is
// unschedulable. A pod that ran before it failed is no refusal.
func TestLaunchWaitsOutKubeletRefusal(t *testing.T) {
	saved := refusedBackoff
	refusedBackoff = 10 * time.Millisecond
	t.Cleanup(func() { refusedBackoff = saved })

	lc := newLaunchCluster(t, outOfCPU, outOfCPU)
	s := launchSpec(0)
	s.OnLaunchRetry = func(attempt int, err error) { t.Errorf("launch retry %d after %v", attempt, err) }
	var res Result
	pod, err := (&Runner{Kube: lc.kube}).launch(t.Context(), s, &res)
	if err != nil || res.LaunchAttempts != 3 || len(lc.pods()) != 3 || pod.Name != lc.pods()[2] {
		t.Fatalf("%v: %d attempts, pods %v, returned %v", err, res.LaunchAttempts, lc.pods(), pod)
	}
	list, err := lc.kube.CoreV1().Pods("runs").List(t.Context(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Errorf("%d pods left (%v), want the running one", len(list.Items), err)
	}

	refuse := make([]func(*fake.Clientset, string), 100)
	for i := range refuse {
		refuse[i] = outOfCPU
	}
	lc = newLaunchCluster(t, refuse...)
	s = launchSpec(3)
	// Long enough for the fake kubelet's first refusal on a machine that
	// make test-all keeps busy (at 300 ms the timeout once came first).
	s.PendingTimeout = 2 * time.Second
	res = Result{}
	_, err = (&Runner{Kube: lc.kube}).launch(t.Context(), s, &res)
	if ReasonOf(err) != ReasonUnschedulable || err == nil || !strings.Contains(err.Error(), "no node had room for the run within the pending timeout") {
		t.Errorf("refused past the pending timeout: %v (%s), want unschedulable", err, ReasonOf(err))
	}

	ran := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "OutOfcpu", ContainerStatuses: []corev1.ContainerStatus{
		{Name: "worker", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}}}}
	if refusedForRoom(ran) {
		t.Error("a pod whose container ran counts as refused for room")
	}
	evicted := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted"}}
	if refusedForRoom(evicted) || !refusedForRoom(&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "OutOfmemory"}}) {
		t.Error("refusedForRoom tells an eviction, or OutOfmemory, wrongly")
	}
}
