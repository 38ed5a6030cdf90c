// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner/runnertest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/waitfor"
)

func TestMain(m *testing.M) {
	// See package runnertest.
	_ = os.Setenv("KUBE_FEATURE_WatchListClient", "false")
	os.Exit(m.Run())
}

var podsResource = schema.GroupResource{Resource: "pods"}

func testPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "runs"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "worker", Image: "img"}}},
	}
}

func withStatus(p *corev1.Pod, s corev1.PodStatus) *corev1.Pod {
	p = p.DeepCopy()
	p.Status = s
	return p
}

func waiting(container, reason string) corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
		Name: container, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "why"}},
	}}}
}

func TestRunningOrFailed(t *testing.T) {
	running := corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
		{Name: "sidecar", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
		{Name: "worker", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
	}}
	for _, c := range []struct {
		name    string
		status  corev1.PodStatus
		done    bool
		wantErr string
	}{
		{"running", running, true, ""},
		{"only a sidecar runs", corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: running.ContainerStatuses[:1]}, false, ""},
		{"pending", corev1.PodStatus{Phase: corev1.PodPending}, false, ""},
		{"creating", waiting("worker", "ContainerCreating"), false, ""},
		{"failed", corev1.PodStatus{Phase: corev1.PodFailed, Reason: "DeadlineExceeded"}, false, "ended (Failed) before the run"},
		{"succeeded", corev1.PodStatus{Phase: corev1.PodSucceeded}, false, "ended (Succeeded)"},
		{"unschedulable", corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/1 nodes",
		}}}, false, "cannot be scheduled: Unschedulable: 0/1 nodes"},
		{"terminated", corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "worker", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 2}},
		}}}, false, "exited before the run (Error, exit 2)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			done, err := runningOrFailed(withStatus(testPod("p"), c.status), "worker")
			if done != c.done || (err == nil) != (c.wantErr == "") || (err != nil && !strings.Contains(err.Error(), c.wantErr)) {
				t.Errorf("got %v, %v; want %v, %q", done, err, c.done, c.wantErr)
			}
		})
	}
	for _, reason := range waitfor.StartFailures {
		_, err := runningOrFailed(withStatus(testPod("p"), waiting("init", reason)), "worker")
		if err == nil || !strings.Contains(err.Error(), "container init of pod p cannot start: "+reason+": why") {
			t.Errorf("%s: %v", reason, err)
		}
	}
}

func TestDescribe(t *testing.T) {
	s := waiting("worker", "ImagePullBackOff")
	s.Reason, s.Message = "Evicted", "low memory"
	got := describe(withStatus(testPod("p"), s))
	if want := "phase Pending; worker waiting: ImagePullBackOff why; Evicted: low memory"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestTransientAndQuota(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, c := range []struct {
		err       error
		transient bool
	}{
		{refused, true},
		{apierrors.NewServiceUnavailable("restarting"), true},
		{apierrors.NewTooManyRequests("slow down", 1), true},
		{apierrors.NewInternalError(errors.New("etcd")), true},
		{apierrors.NewNotFound(podsResource, "p"), false},
		{apierrors.NewForbidden(podsResource, "p", errors.New("no")), false},
	} {
		if got := transient(c.err); got != c.transient {
			t.Errorf("transient(%v) = %v", c.err, got)
		}
	}
}

// setStatus changes the pod's status in the fake, as the kubelet would.
func setStatus(t *testing.T, kube *fake.Clientset, name string, s corev1.PodStatus) {
	p, err := kube.CoreV1().Pods("runs").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Error(err)
		return
	}
	p.Status = s
	if _, err := kube.CoreV1().Pods("runs").UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Error(err)
	}
}

func TestWaitRunning(t *testing.T) {
	running := corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
		{Name: "worker", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
	}}
	for _, c := range []struct {
		name    string
		change  func(*testing.T, *fake.Clientset)
		wantErr string
	}{
		{"runs", func(t *testing.T, k *fake.Clientset) { setStatus(t, k, "p", running) }, ""},
		{"image pull fails", func(t *testing.T, k *fake.Clientset) { setStatus(t, k, "p", waiting("worker", "ErrImagePull")) }, "cannot start: ErrImagePull"},
		{"deleted", func(t *testing.T, k *fake.Clientset) {
			_ = k.CoreV1().Pods("runs").Delete(context.Background(), "p", metav1.DeleteOptions{})
		}, "pod p was deleted before it ran"},
		{"never starts", func(*testing.T, *fake.Clientset) {}, "did not start within the pending timeout of 300ms (phase Pending"},
	} {
		t.Run(c.name, func(t *testing.T) {
			kube := runnertest.NewClientset(withStatus(testPod("p"), corev1.PodStatus{Phase: corev1.PodPending}))
			r := &Runner{Kube: kube}
			time.AfterFunc(50*time.Millisecond, func() { c.change(t, kube) })
			// A change comes after 50 ms, which a starved CPU (the whole
			// suite on 2 cores) has stretched past 300 ms: the runs that
			// change wait up to 5 s, and must end well before that.
			pending := 5 * time.Second
			if c.name == "never starts" {
				pending = 300 * time.Millisecond
			}
			start := time.Now()
			p, err := r.waitRunning(t.Context(), Spec{Container: "worker", PendingTimeout: pending}, testPod("p"))
			if (err == nil) != (c.wantErr == "") || (err != nil && !strings.Contains(err.Error(), c.wantErr)) {
				t.Fatalf("error %v, want %q", err, c.wantErr)
			}
			if c.wantErr == "" && p.Status.Phase != corev1.PodRunning {
				t.Errorf("returned pod %v", p.Status)
			}
			if took := time.Since(start); c.name != "never starts" && took > pending/2 {
				t.Errorf("took %s: the wait does not end when the pod changes", took)
			}
		})
	}
}

// TestTimeoutMessage: a run past its timeout says in which step it ended
// and what that step waited for, not client-go's wait text.
func TestTimeoutMessage(t *testing.T) {
	at := time.Now()
	scheduling := NewTimeline(StepQueued, at)
	scheduling.Begin(StepCreate, at)
	scheduling.Begin(StepSchedule, at)
	scheduling.Renote(StepSchedule, "waited for room on a node: 0/1 nodes are available: 1 Insufficient cpu")
	ended := NewTimeline(StepPlaybook, at)
	ended.End(at)
	for _, c := range []struct {
		name string
		tl   *Timeline
		err  error
		want string
	}{
		{"scheduling", scheduling, wait.ErrorInterrupted(errors.New("timed out waiting for the condition")),
			"the run did not finish within its timeout; it ended in its schedule step (waited for room on a node: 0/1 nodes are available: 1 Insufficient cpu)"},
		{"playbook", NewTimeline(StepPlaybook, at), fmt.Errorf("following the run: %w", context.DeadlineExceeded),
			"the run did not finish within its timeout; it ended in its playbook step"},
		{"cleanup", NewTimeline(StepCleanup, at), context.DeadlineExceeded, "the run did not finish within its timeout"},
		{"other error", ended, errors.New("boom"), "the run did not finish within its timeout: boom"},
		{"no timeline", nil, errors.New("boom"), "the run did not finish within its timeout: boom"},
	} {
		if got := timeoutMessage(c.tl, c.err); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestFinish(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	boom := errors.New("boom")
	for _, c := range []struct {
		name       string
		ctx        context.Context
		err        error
		keep       bool
		status     string
		message    string
		podDeleted bool
	}{
		{"canceled", canceled, boom, false, StatusCanceled, "context canceled", true},
		{"timed out", expired, boom, false, StatusError, "the run did not finish within its timeout: boom", true},
		{"error", context.Background(), boom, false, StatusError, "boom", true},
		{"error, pod kept", context.Background(), boom, true, StatusError, "boom", false},
		{"successful", context.Background(), nil, true, StatusSuccessful, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			kube := runnertest.NewClientset(testPod("p"), &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: "e", Namespace: "runs"},
				InvolvedObject: corev1.ObjectReference{Name: "p"}, Type: corev1.EventTypeWarning, Reason: "Failed", Message: "pull",
			})
			r := &Runner{Kube: kube}
			res := r.finish(c.ctx, Spec{KeepPodOnFailure: c.keep}, Result{Status: StatusSuccessful}, testPod("p"), c.err)
			if res.Status != c.status || res.Message != c.message || res.PodKept == c.podDeleted || res.FinishedAt.IsZero() {
				t.Errorf("result %+v", res)
			}
			if wantEvents := c.status == StatusError; (len(res.Events) == 1) != wantEvents {
				t.Errorf("events %q", res.Events)
			}
			_, err := kube.CoreV1().Pods("runs").Get(context.Background(), "p", metav1.GetOptions{})
			if deleted := apierrors.IsNotFound(err); deleted != c.podDeleted {
				t.Errorf("pod deleted %v, want %v", deleted, c.podDeleted)
			}
		})
	}
}

func TestDeletePodRetriesTransientErrors(t *testing.T) {
	kube := runnertest.NewClientset(testPod("p"))
	fails := 2
	kube.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if fails > 0 {
			fails--
			return true, nil, apierrors.NewServiceUnavailable("restarting")
		}
		return false, nil, nil
	})
	if err := DeletePod(t.Context(), kube, "runs", "p", ""); err != nil || fails != 0 {
		t.Fatalf("%v (%d failures left)", err, fails)
	}
	if err := DeletePod(t.Context(), kube, "runs", "p", ""); err != nil {
		t.Errorf("deleting a pod that is gone: %v", err)
	}
	kube.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(podsResource, "p", errors.New("no"))
	})
	if err := DeletePod(t.Context(), kube, "runs", "p", ""); !apierrors.IsForbidden(err) {
		t.Errorf("a permanent error: %v", err)
	}
}

func TestCreateWaitsForQuota(t *testing.T) {
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "runs"}}
	kube := runnertest.NewClientset(quota)
	var full atomic.Bool
	full.Store(true)
	kube.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if full.Load() {
			return true, nil, apierrors.NewForbidden(podsResource, "", errors.New("exceeded quota: q"))
		}
		return false, nil, nil
	})
	r := &Runner{Kube: kube}
	s := Spec{Pod: testPod(""), PendingTimeout: 300 * time.Millisecond}
	s.Pod.GenerateName = "run-"
	if _, err := r.create(t.Context(), s); err == nil || !strings.Contains(err.Error(), "had no capacity for the run within the pending timeout of 300ms") {
		t.Fatalf("a full quota: %v", err)
	}
	time.AfterFunc(50*time.Millisecond, func() {
		full.Store(false)
		quota.Status.Used = corev1.ResourceList{corev1.ResourcePods: {}}
		_, _ = kube.CoreV1().ResourceQuotas("runs").UpdateStatus(context.Background(), quota, metav1.UpdateOptions{})
	})
	s.PendingTimeout = 5 * time.Second
	p, err := r.create(t.Context(), s)
	if err != nil || !strings.HasPrefix(p.Name, "run-") {
		t.Fatalf("after the quota changed: %v %v", p, err)
	}
}

// TestCreateWaitsOutQuotaConflicts: a create that quota admission keeps
// refusing with conflicts past createOnce's retries (many runs creating in
// one namespace) waits as for a full quota, then ends quota_exceeded with a
// remedy, not error/other with the API server's words alone.
func TestCreateWaitsOutQuotaConflicts(t *testing.T) {
	saved := createBackoff
	createBackoff = wait.Backoff{Duration: time.Millisecond, Steps: 3}
	t.Cleanup(func() { createBackoff = saved })
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "runs"}}
	kube := runnertest.NewClientset(quota)
	var conflicts atomic.Int32
	conflicts.Store(1 << 20)
	kube.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts.Add(-1) >= 0 {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "resourcequotas"}, "q", errors.New("the object has been modified"))
		}
		return false, nil, nil
	})
	r := &Runner{Kube: kube}
	s := Spec{Pod: testPod(""), PendingTimeout: 300 * time.Millisecond}
	s.Pod.GenerateName = "run-"
	_, err := r.create(t.Context(), s)
	if ReasonOf(err) != ReasonQuotaExceeded || !strings.Contains(err.Error(), "refused the run pod with conflicts of its ResourceQuota") ||
		!strings.Contains(err.Error(), "Lower the group's max_concurrent_runs") {
		t.Fatalf("conflicts through the pending timeout: %v (%s), want quota_exceeded with a remedy", err, ReasonOf(err))
	}
	// Conflicts past one createOnce's retries, then admitted: the create
	// waits for the quota's next change and succeeds.
	conflicts.Store(4)
	time.AfterFunc(50*time.Millisecond, func() {
		quota.Status.Used = corev1.ResourceList{corev1.ResourcePods: {}}
		_, _ = kube.CoreV1().ResourceQuotas("runs").UpdateStatus(context.Background(), quota, metav1.UpdateOptions{})
	})
	s.PendingTimeout = 5 * time.Second
	if p, err := r.create(t.Context(), s); err != nil || !strings.HasPrefix(p.Name, "run-") {
		t.Fatalf("after the conflicts: %v %v", p, err)
	}
}

// Run ends a run that cannot start as error, without a pod left.
func TestRunThatCannotStart(t *testing.T) {
	kube := runnertest.NewClientset()
	r := &Runner{Kube: kube}
	var logged []string
	r.Log = func(_ slog.Level, msg string, _ map[string]any) { logged = append(logged, msg) }
	s := Spec{Pod: testPod(""), Container: "worker", PendingTimeout: 200 * time.Millisecond, Bundle: bundle.Bundle{Command: []string{"true"}}}
	s.Pod.GenerateName = "run-"
	res := r.Run(t.Context(), s)
	if res.Status != StatusError || res.ExitCode != -1 || !strings.HasPrefix(res.PodName, "run-") || !strings.Contains(res.Message, "did not start") ||
		res.Reason != ReasonStartTimeout {
		t.Fatalf("result %+v", res)
	}
	if pods, _ := kube.CoreV1().Pods("runs").List(t.Context(), metav1.ListOptions{}); len(pods.Items) != 0 {
		t.Errorf("pods left: %d", len(pods.Items))
	}
	if len(logged) != 1 || logged[0] != "run pod created" {
		t.Errorf("log %q", logged)
	}
	kube.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewBadRequest("invalid pod")
	})
	res = r.Run(t.Context(), s)
	if res.Status != StatusError || res.PodName != "" || !strings.Contains(res.Message, "creating the run pod in namespace runs: invalid pod") ||
		res.Reason != ReasonPodRejected {
		t.Errorf("result %+v", res)
	}
}

func TestVanished(t *testing.T) {
	terminating := testPod("terminating")
	terminating.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	failed := withStatus(testPod("failed"), corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted"})
	deadline := withStatus(testPod("deadline"), corev1.PodStatus{Phase: corev1.PodFailed, Reason: "DeadlineExceeded"})
	oom := withStatus(testPod("oom"), corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "worker", LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}},
	}}})
	r := &Runner{Kube: runnertest.NewClientset(terminating, failed, deadline, oom, testPod("running"))}
	for name, want := range map[string]struct {
		how    string
		reason Reason
	}{
		"gone": {"was deleted", ReasonPodDeleted}, "terminating": {"was deleted (terminating)", ReasonPodDeleted},
		"failed": {"failed (Evicted)", ReasonEvicted}, "running": {"", ""},
		"deadline": {"reached its activeDeadlineSeconds (the run's timeout)", ReasonTimeout},
		"oom":      {"was killed for using more memory than its limit (OOMKilled)", ReasonOOMKilled},
	} {
		if got, why := r.vanished(t.Context(), testPod(name), "worker"); got != want.how || why != want.reason {
			t.Errorf("%s: %q (%s), want %q (%s)", name, got, why, want.how, want.reason)
		}
	}
}

// TestCreateRetriesTransientErrors: a run pod's create that the API server
// could not take (refused while it restarts, or cut after it was sent) is
// tried again under the same name, and one carried out before its
// connection broke is found by its name and mark, not made twice: the soak
// (TestAccSoak) saw runs end as cluster_unavailable for a create cut by an
// API server restart. A name that another pod took first is given up for a
// new one. TestAccCreateRetryRefusesImpostor is the adversarial case.
func TestCreateRetriesTransientErrors(t *testing.T) {
	saved := createBackoff
	createBackoff = wait.Backoff{Duration: time.Millisecond, Steps: 9}
	t.Cleanup(func() { createBackoff = saved })
	kube := runnertest.NewClientset()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	cut := &url.Error{Op: "Post", URL: "https://127.0.0.1:16443/api/v1/namespaces/runs/pods", Err: io.EOF}
	var names []string
	var made string
	kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca, ok := a.(k8stesting.CreateAction)
		if !ok {
			return true, nil, fmt.Errorf("got a %T", a)
		}
		p, ok := ca.GetObject().(*corev1.Pod)
		if !ok {
			return true, nil, fmt.Errorf("created a %T", ca.GetObject())
		}
		names = append(names, p.Name)
		switch len(names) {
		case 1: // the name was another pod's
			return true, nil, apierrors.NewAlreadyExists(podsResource, p.Name)
		case 2:
			return true, nil, refused
		case 3: // cut before the server had it
			return true, nil, cut
		case 4: // quota admission's lost race: not carried out
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "resourcequotas"}, "runs", errors.New("the object has been modified"))
		case 5: // carried out, then cut
			made = p.Name
			if err := kube.Tracker().Create(corev1.SchemeGroupVersion.WithResource("pods"), p.DeepCopy(), p.Namespace); err != nil {
				return true, nil, err
			}
			return true, nil, cut
		}
		return false, nil, nil
	})
	r := &Runner{Kube: kube}
	s := Spec{Pod: testPod(""), PendingTimeout: 5 * time.Second}
	s.Pod.GenerateName = "run-"
	s.Pod.Labels = map[string]string{"kubeplay.io/run": "r1"}
	p, err := r.create(t.Context(), s)
	if err != nil || p.Name != made {
		t.Fatalf("create = %v, %v; want the pod %q the cut create made", p, err, made)
	}
	if len(names) != 6 || names[0] == names[1] || names[1] != names[5] || !strings.HasPrefix(names[1], "run-") {
		t.Errorf("creates named %q: want a new name after the taken one, then that name each time", names)
	}
	pods, err := kube.CoreV1().Pods("runs").List(t.Context(), metav1.ListOptions{})
	if err != nil || len(pods.Items) != 1 {
		t.Errorf("%d pods (%v), want the one pod", len(pods.Items), err)
	}
	if s.Pod.Annotations[createMark] != "" || s.Pod.Name != "" {
		t.Error("create marked or named the spec's pod, which a launch retry creates again")
	}
	// A refusal that is no connection's ends the create at once.
	kube.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(podsResource, "", errors.New("denied by a webhook"))
	})
	if _, err := r.create(t.Context(), s); ReasonOf(err) != ReasonPodRejected {
		t.Errorf("a refused pod: %v (%s), want pod_rejected", err, ReasonOf(err))
	}
	// So does a conflict on anything but a quota.
	creates := 0
	kube.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		creates++
		return true, nil, apierrors.NewConflict(podsResource, "", errors.New("the object has been modified"))
	})
	if _, err := r.create(t.Context(), s); !apierrors.IsConflict(err) || creates != 1 {
		t.Errorf("a conflict on the pod: %v after %d creates, want it returned after one", err, creates)
	}
}
