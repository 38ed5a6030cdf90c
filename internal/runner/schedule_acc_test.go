package runner_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
)

// progress records a run's progress events and tells when one contains a
// word.
type progress struct {
	mu     sync.Mutex
	events []string
	at     map[string]time.Time
	wait   map[string]chan struct{}
}

func newProgress(words ...string) *progress {
	p := &progress{at: map[string]time.Time{}, wait: map[string]chan struct{}{}}
	for _, w := range words {
		p.wait[w] = make(chan struct{})
	}
	return p
}

func (p *progress) event(ev string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = append(p.events, ev)
	for w, ch := range p.wait {
		if _, seen := p.at[w]; !seen && strings.Contains(ev, w) {
			p.at[w] = time.Now()
			close(ch)
		}
	}
}

// when is when an event first contained word.
func (p *progress) when(word string) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.at[word]
	return at, ok
}

func (p *progress) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.events, "\n")
}

// postEvent posts an event on pod as an autoscaler would.
func (e *env) postEvent(t *testing.T, pod *corev1.Pod, component, reason, message string) {
	now := metav1.Now()
	_, err := e.kube.CoreV1().Events(e.ns).Create(context.Background(), &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: pod.Name + ".", Namespace: e.ns},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: e.ns, Name: pod.Name, UID: pod.UID,
			ResourceVersion: pod.ResourceVersion},
		Reason: reason, Message: message, Type: corev1.EventTypeNormal, Count: 1,
		Source: corev1.EventSource{Component: component}, FirstTimestamp: now, LastTimestamp: now,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Errorf("posting %s on pod %s: %v", reason, pod.Name, err)
	}
}

func scheduleDetail(res runner.Result) string {
	for _, s := range res.Timeline {
		if s.Name == runner.StepSchedule {
			return s.Detail
		}
	}
	return ""
}

// TestAccRunUnschedulable: a pod that no node of the cluster can hold (a
// node selector no node matches, more CPU than any node allocates) fails
// once the autoscaler's grace has passed with no answer, in seconds and
// not at the pending timeout, naming the selector or the numbers; a
// NotTriggerScaleUp event fails it at once, with the autoscaler's words.
func TestAccRunUnschedulable(t *testing.T) {
	acctest.Parallel(t)
	grace := runner.AutoscalerGrace
	cases := []struct {
		name   string
		modify func(p *corev1.Pod)
		// refuse posts NotTriggerScaleUp once the run waits for an autoscaler.
		refuse bool
		want   []string
	}{
		{name: "no matching node", modify: func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"kubeplay.test/no-such-node": "true"}
		}, want: []string{"(Unschedulable)", "has the labels the pod selects (nodeSelector kubeplay.test/no-such-node=true)",
			"no cluster autoscaler answered within 20s", "label a node"}},
		{name: "larger than any node", modify: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("64")
		}, want: []string{"(Unschedulable)", "it requests cpu 64 (node ", "no cluster autoscaler answered within 20s"}},
		{name: "the autoscaler will not help", refuse: true, modify: func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"kubeplay.test/no-such-node": "true"}
		}, want: []string{"cluster-autoscaler will not add a node for it (NotTriggerScaleUp: pod didn't trigger scale-up: " +
			"1 node(s) didn't match Pod's node affinity/selector)", "(nodeSelector kubeplay.test/no-such-node=true)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t) // a namespace each: e.gone checks that none of its pods is left
			s := e.spec(bundle.Bundle{Command: []string{"true"}})
			s.PendingTimeout = 2 * time.Minute
			tc.modify(s.Pod)
			prog := newProgress("for a cluster autoscaler")
			s.OnEvent = prog.event
			var created *corev1.Pod
			s.OnCreated = func(_ context.Context, p *corev1.Pod) error { created = p; return nil }
			ended := make(chan struct{})
			if tc.refuse {
				go func() {
					select {
					case <-prog.wait["for a cluster autoscaler"]:
						e.postEvent(t, created, "cluster-autoscaler", "NotTriggerScaleUp",
							"pod didn't trigger scale-up: 1 node(s) didn't match Pod's node affinity/selector")
					case <-ended:
					}
				}()
			}
			start := time.Now()
			res := e.r.Run(context.Background(), s)
			took := time.Since(start)
			close(ended)
			if res.Status != runner.StatusError || res.Reason != runner.ReasonUnschedulable {
				t.Fatalf("want status %s, reason %s; got %+v\nprogress:\n%s", runner.StatusError, runner.ReasonUnschedulable, res, prog)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.Message, w) {
					t.Errorf("the message does not say %q: %s", w, res.Message)
				}
			}
			began, _ := prog.when("for a cluster autoscaler")
			waited := time.Since(began)
			switch {
			case tc.refuse && took > grace:
				t.Errorf("NotTriggerScaleUp ended the run after %s, not at once", took)
			case !tc.refuse && (took < grace || took > grace+10*time.Second):
				t.Errorf("failed after %s; want after the autoscaler's grace of %s, within 10 s more", took, grace)
			}
			if d := scheduleDetail(res); !strings.Contains(d, "waited for a cluster autoscaler") {
				t.Errorf("the schedule step's detail is %q", d)
			}
			t.Logf("%s: error after %s (%s after the wait for an autoscaler began): %s\nprogress:\n%s", tc.name,
				took.Round(time.Millisecond), waited.Round(time.Millisecond), res.Message, prog)
			e.gone(res)
		})
	}
}

// TestAccRunWaitsForScaleUp: a pod that no node matches waits past the
// autoscaler's grace when a cluster autoscaler says it scales up for it
// (the test posts TriggeredScaleUp on the pod, as cluster-autoscaler does),
// and is scheduled on the node that then joins. The node is a Node object
// with no kubelet, labelled as the pod selects and tainted so that only
// this test's pod tolerates it, deleted when the test ends: the pod is
// bound to it but never runs, so the test ends the run once the pod is
// scheduled.
func TestAccRunWaitsForScaleUp(t *testing.T) {
	if os.Getenv(acctest.EnvKubeconfig) != "" {
		t.Skip("adds a Node object to the local test cluster; KUBEPLAY_TEST_KUBECONFIG names another cluster")
	}
	e := newEnv(t)
	ctx := context.Background()
	id := make([]byte, 4)
	_, _ = rand.Read(id)
	pool := "scaled-" + hex.EncodeToString(id)
	nodeName := "kubeplay-fake-" + pool
	taint := "kubeplay.test/" + pool

	s := e.spec(bundle.Bundle{Command: []string{"true"}})
	s.PendingTimeout = 2 * time.Minute
	s.Pod.Spec.NodeSelector = map[string]string{"kubeplay.test/pool": pool}
	// The test's taint, and the one admission gives every new node until its kubelet reports it ready.
	s.Pod.Spec.Tolerations = []corev1.Toleration{
		{Key: taint, Operator: corev1.TolerationOpExists},
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	}
	joined := "node " + nodeName + " joined"
	prog := newProgress("for a cluster autoscaler", "cluster-autoscaler adds a node", joined, "scheduled on node "+nodeName)
	s.OnEvent = prog.event
	var created *corev1.Pod
	s.OnCreated = func(_ context.Context, p *corev1.Pod) error { created = p; return nil }
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()

	t.Cleanup(func() {
		err := e.kube.CoreV1().Nodes().Delete(context.Background(), nodeName, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting node %s: %v", nodeName, err)
		}
	})
	go func() {
		select {
		case <-prog.wait["for a cluster autoscaler"]:
		case <-runCtx.Done():
			return
		}
		e.postEvent(t, created, "cluster-autoscaler", "TriggeredScaleUp", "pod triggered scale-up: [{"+pool+" 0->1 (max: 3)}]")
		// The node joins after the grace, which the scale-up's answer extends.
		select {
		case <-time.After(runner.AutoscalerGrace + 5*time.Second):
		case <-runCtx.Done():
			return
		}
		prog.event(joined)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{"kubeplay.test/pool": pool, "kubeplay.test/fake-node": "true"}},
			Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: taint, Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
			// Smaller than the real node, so that tests that size pods by the largest node are not misled.
			Status: corev1.NodeStatus{
				Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi"),
					corev1.ResourcePods: resource.MustParse("4")},
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi"),
					corev1.ResourcePods: resource.MustParse("4")},
			},
		}
		if _, err := e.kube.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
			t.Errorf("creating node %s: %v", nodeName, err)
		}
	}()
	go func() {
		// The pod is bound to a node that will never run it: end the run there,
		// and remove the pod, which no kubelet will confirm gone.
		select {
		case <-prog.wait["scheduled on node "+nodeName]:
		case <-runCtx.Done():
			return
		}
		cancel()
		err := e.kube.CoreV1().Pods(e.ns).Delete(context.Background(), created.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting pod %s: %v", created.Name, err)
		}
	}()

	start := time.Now()
	res := e.r.Run(runCtx, s)
	took := time.Since(start)
	scheduled, ok := prog.when("scheduled on node " + nodeName)
	began, _ := prog.when("for a cluster autoscaler")
	joinedAt, _ := prog.when(joined)
	if !ok || res.Status != runner.StatusCanceled {
		t.Fatalf("want the pod scheduled on node %s and the run then canceled; got %+v after %s\nprogress:\n%s", nodeName, res, took, prog)
	}
	if _, ok := prog.when("cluster-autoscaler adds a node"); !ok {
		t.Errorf("the progress does not tell of the scale-up:\n%s", prog)
	}
	if w := scheduled.Sub(began); w < runner.AutoscalerGrace {
		t.Errorf("scheduled %s after the wait for an autoscaler began: it did not wait past the grace", w)
	}
	if d := scheduleDetail(res); !strings.Contains(d, "waited for a node the cluster autoscaler added: TriggeredScaleUp from cluster-autoscaler") {
		t.Errorf("the schedule step's detail is %q", d)
	}
	t.Logf("the run waited %s for the scale-up, then its pod was scheduled %s after the node joined\nprogress:\n%s",
		scheduled.Sub(began).Round(time.Millisecond), scheduled.Sub(joinedAt).Round(time.Millisecond), prog)
	e.gone(res)
}
