package acctest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/nodefit"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/waitfor"
)

// TestAccSchedulerFairness: on the test cluster's full node, a pod that waits
// for room gets a slot that frees while other pods come and go. With the
// scheduler's default backoff (up to 10 s) it was always backing off when
// room freed and lost every slot to newer pods (45 in 145 s, never placed),
// which is how a run in CI outlived its pod_pending_timeout; tools/testcluster
// sets the backoff to 1 s.
func TestAccSchedulerFairness(t *testing.T) {
	acctest.Disruptive(t, "fills the node's CPU")
	kube := acctest.Kube(t)
	ns := acctest.Namespace(t, kube, "kp-fairness")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f := &fairness{t: t, ctx: ctx, pods: kube.CoreV1().Pods(ns)}
	t.Cleanup(f.deleteAll)

	node, slots := f.freeSlots(kube)
	if slots < 2 {
		t.Fatalf("node %s has room for %d pods of %s: too few to take turns", node, slots, slotCPU.String())
	}
	for range slots {
		f.create("")
	}
	if _, err := waitfor.Lists(ctx, f.pods, metav1.ListOptions{}, func(l *corev1.PodList) (bool, error) {
		for _, p := range l.Items {
			if p.Spec.NodeName == "" {
				return false, nil
			}
		}
		return len(l.Items) == slots, nil
	}); err != nil {
		t.Fatalf("filling node %s with %d pods: %v", node, slots, err)
	}
	waiting := f.create("")
	f.waiting = waiting
	// The node must be full: a waiting pod placed at once would pass without testing anything.
	if _, err := waitfor.Until(ctx, waitfor.Named(f.pods, waiting), &corev1.Pod{}, func(ev watch.Event) (bool, error) {
		p, _ := ev.Object.(*corev1.Pod)
		if p == nil || p.Spec.NodeName != "" {
			return false, fmt.Errorf("pod %s was placed at once: node %s was not full with %d pods of %s", waiting, node, slots, slotCPU.String())
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatal(err)
	}

	// A: the oldest pod ends and one bound to the node at once takes its room,
	// unless the scheduler placed the waiting pod first.
	missed := 0
	for range 10 {
		if f.placed(waiting) {
			break
		}
		f.endOldest(true)
		f.create(node)
		time.Sleep(2 * time.Second) // the workload's pace, not a poll
		if !f.placed(waiting) {
			missed++
		}
	}
	// B: every 3 s a pod is created, then the oldest running pod ends.
	start := time.Now()
	for !f.placed(waiting) && time.Since(start) < 2*time.Minute {
		f.create("")
		time.Sleep(3 * time.Second)
		f.endOldest(false)
		time.Sleep(500 * time.Millisecond)
		if !f.placed(waiting) {
			missed++
		}
	}
	if !f.placed(waiting) {
		t.Fatalf("the waiting pod missed %d freed slots and was never placed: the scheduler's backoff starves it. Start the cluster "+
			"with tools/testcluster/up.sh, whose kube-scheduler-config.yaml sets podMaxBackoffSeconds to 1", missed)
	}
	// With the 1 s backoff it misses 1 to 3 (a bound pod can take the room before the
	// scheduler's next try); without it, 45 in 145 s and it was never placed.
	t.Logf("the waiting pod was placed after missing %d freed slots (%d pods filled node %s)", missed, slots, node)
}

// slotCPU is what each pod of the test requests: a run pod's default.
var slotCPU = resource.MustParse("250m")

type fairness struct {
	t       *testing.T
	ctx     context.Context
	pods    typedcorev1.PodInterface
	names   []string // in creation order; "" once deleted
	waiting string
}

// freeSlots is the node with the most CPU left, and how many pods of slotCPU fit there.
func (f *fairness) freeSlots(kube kubernetes.Interface) (string, int) {
	nodes, err := kube.CoreV1().Nodes().List(f.ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		f.t.Fatalf("listing nodes: %v (%d)", err, len(nodes.Items))
	}
	best, most := "", int64(-1)
	for _, n := range nodes.Items {
		free := n.Status.Allocatable.Cpu().MilliValue()
		pods, err := kube.CoreV1().Pods("").List(f.ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", n.Name).String()})
		if err != nil {
			f.t.Fatal(err)
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			req := nodefit.Requests(&p)
			free -= req.Cpu().MilliValue()
		}
		if free > most {
			best, most = n.Name, free
		}
	}
	return best, int(most / slotCPU.MilliValue())
}

// create makes a pod that sleeps and requests slotCPU, bound to node when given.
func (f *fairness) create(node string) string {
	f.t.Helper()
	name := fmt.Sprintf("p%d", len(f.names)+1)
	_, err := f.pods.Create(f.ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			AutomountServiceAccountToken:  ptr.To(false),
			Containers: []corev1.Container{{
				Name: "c", Image: acctest.TestImage(), Command: []string{"sleep", "infinity"},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: slotCPU}},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatalf("creating pod %s: %v", name, err)
	}
	f.names = append(f.names, name)
	return name
}

func (f *fairness) placed(name string) bool {
	f.t.Helper()
	p, err := f.pods.Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatalf("reading pod %s: %v", name, err)
	}
	return p.Spec.NodeName != ""
}

// endOldest deletes the oldest pod on a node but the waiting one and, with wait,
// waits until it is gone.
func (f *fairness) endOldest(wait bool) {
	f.t.Helper()
	for i, name := range f.names {
		if name == "" || name == f.waiting || !f.placed(name) {
			continue
		}
		f.names[i] = "" // ended
		opts := metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}
		var err error
		if wait {
			err = waitfor.Delete(f.ctx, f.pods, name, opts, &corev1.Pod{})
		} else {
			err = f.pods.Delete(f.ctx, name, opts)
		}
		if err != nil {
			f.t.Fatalf("deleting pod %s: %v", name, err)
		}
		return
	}
	f.t.Fatal("no pod of the test is on a node")
}

// deleteAll deletes the test's pods and waits until they are gone, so that the
// next disruptive test finds the node's CPU free.
func (f *fairness) deleteAll() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := f.pods.DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{}); err != nil {
		f.t.Errorf("deleting the test's pods: %v", err)
		return
	}
	if _, err := waitfor.Lists(ctx, f.pods, metav1.ListOptions{}, func(l *corev1.PodList) (bool, error) {
		return len(l.Items) == 0, nil
	}); err != nil {
		f.t.Errorf("waiting for the test's pods to go: %v", err)
	}
}
