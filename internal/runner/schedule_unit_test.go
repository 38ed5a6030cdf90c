package runner

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner/runnertest"
)

func unschedulable(msg string) corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg}}}
}

// podEvent is an event on the pod of uid, as an autoscaler or the
// scheduler posts it.
func podEvent(name, pod, uid, component, reason, msg string, ago time.Duration) *corev1.Event {
	at := metav1.NewTime(time.Now().Add(-ago))
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name, Namespace: "runs"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "runs", Name: pod, UID: types.UID(uid)},
		Source:         corev1.EventSource{Component: component}, Reason: reason, Message: msg, Type: corev1.EventTypeNormal,
		FirstTimestamp: at, LastTimestamp: at,
	}
}

// TestAutoscalerAnswer: cluster-autoscaler's and Karpenter's events are
// answers, the newest wins; the scheduler's FailedScheduling is none.
func TestAutoscalerAnswer(t *testing.T) {
	up := podEvent("e1", "p", "u1", "cluster-autoscaler", eventTriggeredScaleUp, "pod triggered scale-up: [{ng-1 0->1 (max: 3)}]", time.Minute)
	not := podEvent("e2", "p", "u1", "cluster-autoscaler", eventNotTriggerScaleUp, "pod didn't trigger scale-up: 1 max node group size reached", 0)
	sched := podEvent("e3", "p", "u1", "default-scheduler", eventFailedScheduling, msgSelector, 0)
	nominated := podEvent("e4", "p", "u1", karpenter, eventNominated, "Pod should schedule on: nodeclaim/default-x", 0)
	karpFailed := podEvent("e5", "p", "u1", karpenter, eventFailedScheduling, "Failed to schedule pod, incompatible with nodepool", 0)
	other := podEvent("e6", "q", "u2", "cluster-autoscaler", eventTriggeredScaleUp, "pod triggered scale-up", 0)
	for _, c := range []struct {
		name    string
		events  []corev1.Event
		found   bool
		scaling bool
	}{
		{"none", nil, false, false},
		{"the scheduler's", []corev1.Event{*sched}, false, false},
		{"another pod's", []corev1.Event{*other}, false, false},
		{"scale-up", []corev1.Event{*up, *sched}, true, true},
		{"scale-up, then no more", []corev1.Event{*not, *up}, true, false},
		{"Karpenter nominates", []corev1.Event{*nominated}, true, true},
		{"Karpenter cannot", []corev1.Event{*karpFailed}, true, false},
	} {
		a, ok := latestAnswer(c.events, "u1")
		if ok != c.found || a.scaling != c.scaling {
			t.Errorf("%s: %+v %v; want found %v, scaling %v", c.name, a, ok, c.found, c.scaling)
		}
	}
}

// schedCluster is a fake cluster with nodes, a pending pod p (uid u1) and
// events.
func schedCluster(t *testing.T, status corev1.PodStatus, nodes []corev1.Node, events ...*corev1.Event) *fake.Clientset {
	t.Helper()
	pod := withStatus(testPod("p"), status)
	pod.UID = "u1"
	objs := []runtime.Object{pod}
	for i := range nodes {
		objs = append(objs, &nodes[i])
	}
	for _, e := range events {
		objs = append(objs, e)
	}
	return runnertest.NewClientset(objs...)
}

// place binds p to node and runs its container, as the scheduler and the
// kubelet would.
func place(t *testing.T, kube *fake.Clientset, node string) {
	p, err := kube.CoreV1().Pods("runs").Get(context.Background(), "p", metav1.GetOptions{})
	if err != nil {
		t.Error(err)
		return
	}
	p.Spec.NodeName = node
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
		{Name: "worker", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
	if _, err := kube.CoreV1().Pods("runs").Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Error(err)
	}
}

// TestWaitRunningScheduling: which unplaced pods wait and which fail, how
// soon, with what reason and words, and what the progress says.
func TestWaitRunningScheduling(t *testing.T) {
	defer func(g time.Duration) { autoscalerGrace = g }(autoscalerGrace)
	small := nodeWith("n1", "2", "4Gi")
	forbidNodes := func(kube *fake.Clientset) {
		kube.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", errors.New("cluster-scoped"))
		})
	}
	preempting := unschedulable(msgCPU)
	preempting.NominatedNodeName = "n1"
	for _, c := range []struct {
		name    string
		status  corev1.PodStatus
		pod     func(*corev1.Pod)
		nodes   []corev1.Node
		events  []*corev1.Event
		setup   func(*fake.Clientset)
		placeAt time.Duration // 0: never
		pending time.Duration
		grace   time.Duration // 0: 300ms
		// wantErr is in the error; "" for a pod that runs. reason is its reason.
		wantErr []string
		reason  Reason
		// failBy bounds how soon the run fails.
		failBy time.Duration
		said   string // in a progress event
	}{
		{name: "room: waits until placed", status: unschedulable(msgCPU), nodes: []corev1.Node{small},
			placeAt: 600 * time.Millisecond, said: "pod p waits for room on a node: 0/1 nodes are available: 1 Insufficient cpu"},
		{name: "room: past the pending timeout", status: unschedulable(msgCPU), nodes: []corev1.Node{small}, pending: 500 * time.Millisecond,
			wantErr: []string{"found no room on a node within the pending timeout of 500ms", "for incoming pod. Raise pod_pending_timeout", "priorityClassName (pod_spec_override)"}, reason: ReasonCapacityTimeout},
		{name: "preemption waits", status: preempting, nodes: []corev1.Node{small}, placeAt: 600 * time.Millisecond,
			said: "pod p waits for node n1, where the scheduler preempts lower-priority pods"},
		{name: "anti-affinity waits", status: unschedulable(msgAnti), nodes: []corev1.Node{small}, placeAt: 600 * time.Millisecond,
			said: "pod p waits for the scheduler: 0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules"},
		{name: "selector, no autoscaler: fails after the grace", status: unschedulable(msgSelector),
			pod: func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"disktype": "ssd"} }, nodes: []corev1.Node{small},
			wantErr: []string{"pod p cannot be scheduled (Unschedulable): no node of the cluster (1 node) has the labels the pod selects (nodeSelector disktype=ssd), " +
				"and no cluster autoscaler answered within 300ms", "label a node", "The scheduler says: 0/1 nodes are available"},
			reason: ReasonUnschedulable, failBy: 10 * time.Second, said: "waiting up to 300ms for a cluster autoscaler"},
		{name: "too large, no autoscaler", status: unschedulable(msgCPU), pod: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: *resourceQ("64")}
		}, nodes: []corev1.Node{small},
			wantErr: []string{"it requests cpu 64 (node n1 allocates 2), and no cluster autoscaler answered"},
			reason:  ReasonUnschedulable, failBy: 10 * time.Second},
		{name: "selector, scale-up: waits until placed", status: unschedulable(msgSelector),
			pod: func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"disktype": "ssd"} }, nodes: []corev1.Node{small},
			events:  []*corev1.Event{podEvent("e1", "p", "u1", "cluster-autoscaler", eventTriggeredScaleUp, "pod triggered scale-up: [{ng-1 0->1 (max: 3)}]", 0)},
			placeAt: time.Second, said: "cluster-autoscaler adds a node for pod p: pod triggered scale-up: [{ng-1 0->1 (max: 3)}]"},
		{name: "selector, Karpenter nominates: waits", status: unschedulable(msgSelector),
			pod: func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"disktype": "ssd"} }, nodes: []corev1.Node{small},
			events:  []*corev1.Event{podEvent("e1", "p", "u1", karpenter, eventNominated, "Pod should schedule on: nodeclaim/default-x", 0)},
			placeAt: time.Second},
		{name: "scale-up for another pod of the namespace: waits", status: unschedulable(msgSelector),
			pod: func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"disktype": "ssd"} }, nodes: []corev1.Node{small},
			events:  []*corev1.Event{podEvent("e1", "q", "u2", "cluster-autoscaler", eventTriggeredScaleUp, "pod triggered scale-up: [{ng-1 0->1 (max: 3)}]", time.Minute)},
			placeAt: time.Second, said: "scaled up for pod q of namespace runs"},
		{name: "an old scale-up for another pod: fails", status: unschedulable(msgSelector),
			pod: func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"disktype": "ssd"} }, nodes: []corev1.Node{small},
			events:  []*corev1.Event{podEvent("e1", "q", "u2", "cluster-autoscaler", eventTriggeredScaleUp, "pod triggered scale-up", time.Hour)},
			wantErr: []string{"no cluster autoscaler answered"}, reason: ReasonUnschedulable, failBy: 10 * time.Second},
		{name: "NotTriggerScaleUp fails at once", status: unschedulable(msgSelector),
			pod: func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"disktype": "ssd"} }, nodes: []corev1.Node{small},
			events: []*corev1.Event{podEvent("e1", "p", "u1", "cluster-autoscaler", eventNotTriggerScaleUp,
				"pod didn't trigger scale-up: 1 node(s) didn't match Pod's node affinity/selector", 0)},
			wantErr: []string{"(nodeSelector disktype=ssd), and cluster-autoscaler will not add a node for it (NotTriggerScaleUp: pod didn't trigger scale-up: 1 node(s)"},
			// A grace far past failBy: "at once" must not mean "within a grace of 300ms", which a loaded
			// machine's scheduling alone can pass (407ms in a make test-all).
			grace: 15 * time.Second, reason: ReasonUnschedulable, failBy: 5 * time.Second},
		{name: "nodes unreadable, selector: fails after the grace", status: unschedulable(msgSelector), setup: forbidNodes,
			pod:     func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"disktype": "ssd"} },
			wantErr: []string{"(nodeSelector disktype=ssd) allow, and the nodes could not be read to tell more (nodes is forbidden", "no cluster autoscaler answered"},
			reason:  ReasonUnschedulable, failBy: 10 * time.Second},
		{name: "nodes unreadable, room: waits", status: unschedulable(msgCPU), setup: forbidNodes, placeAt: 600 * time.Millisecond},
		{name: "pending timeout within the grace", status: unschedulable(msgSelector), nodes: []corev1.Node{small},
			pending: time.Second, grace: 5 * time.Second,
			pod:     func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"disktype": "ssd"} },
			wantErr: []string{"no cluster autoscaler answered within the pending timeout of 1s"}, reason: ReasonUnschedulable,
			said: "waiting up to the pending timeout for a cluster autoscaler"},
		{name: "scale-up past the pending timeout", status: unschedulable(msgSelector), nodes: []corev1.Node{small}, pending: 600 * time.Millisecond,
			pod:     func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"disktype": "ssd"} },
			events:  []*corev1.Event{podEvent("e1", "p", "u1", "cluster-autoscaler", eventTriggeredScaleUp, "pod triggered scale-up: [{ng-1 0->1 (max: 3)}]", 0)},
			wantErr: []string{"was not scheduled within the pending timeout of 600ms while cluster-autoscaler added a node for it"}, reason: ReasonCapacityTimeout},
	} {
		t.Run(c.name, func(t *testing.T) {
			autoscalerGrace = 300 * time.Millisecond
			if c.grace > 0 {
				autoscalerGrace = c.grace
			}
			kube := schedCluster(t, c.status, c.nodes, c.events...)
			if c.pod != nil {
				p, _ := kube.CoreV1().Pods("runs").Get(t.Context(), "p", metav1.GetOptions{})
				c.pod(p)
				if _, err := kube.CoreV1().Pods("runs").Update(t.Context(), p, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if c.setup != nil {
				c.setup(kube)
			}
			// When the pod was placed: the timer starts before the wait does.
			placed := make(chan time.Time, 1)
			if c.placeAt > 0 {
				time.AfterFunc(c.placeAt, func() {
					placed <- time.Now()
					place(t, kube, "n1")
				})
			}
			var mu sync.Mutex
			var said []string
			// Far past failBy, so that failing within failBy shows the run did not wait for it,
			// with room for a loaded machine.
			pending := c.pending
			if pending == 0 {
				pending = 20 * time.Second
			}
			tl := NewTimeline(StepSchedule, time.Now())
			s := Spec{Container: "worker", PendingTimeout: pending, Timeline: tl, OnEvent: func(e string) {
				mu.Lock()
				defer mu.Unlock()
				said = append(said, e)
			}}
			pod, _ := kube.CoreV1().Pods("runs").Get(t.Context(), "p", metav1.GetOptions{})
			start := time.Now()
			_, err := (&Runner{Kube: kube}).waitRunning(t.Context(), s, pod)
			took := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			if len(c.wantErr) == 0 {
				if err != nil {
					t.Fatalf("error %v; said %q", err, said)
				}
				if c.placeAt > 0 {
					select {
					case at := <-placed:
						if end := start.Add(took); end.Before(at) {
							t.Errorf("ran after %s, %s before the pod was placed", took, at.Sub(end))
						}
					default:
						t.Errorf("ran after %s, before the pod was placed", took)
					}
				}
			} else {
				for _, w := range c.wantErr {
					if err == nil || !strings.Contains(err.Error(), w) {
						t.Fatalf("error %v, want it to say %q; said %q", err, w, said)
					}
				}
				if ReasonOf(err) != c.reason {
					t.Errorf("reason %s, want %s", ReasonOf(err), c.reason)
				}
				if c.failBy > 0 && took > c.failBy {
					t.Errorf("failed after %s, want within %s", took, c.failBy)
				}
			}
			if c.said != "" && !strings.Contains(strings.Join(said, "\n"), c.said) {
				t.Errorf("progress %q, want %q", said, c.said)
			}
			if steps := tl.End(time.Now()); len(said) > 0 && steps[0].Detail == "" {
				t.Errorf("the schedule step has no detail; progress %q", said)
			}
			t.Logf("%s after %s: %v; progress %q", c.name, took.Round(time.Millisecond), err, said)
		})
	}
}

func resourceQ(s string) *resource.Quantity { q := resource.MustParse(s); return &q }
