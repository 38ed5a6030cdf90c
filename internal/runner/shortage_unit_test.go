package runner

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestShortageOnly: the scheduler's messages of a full cluster wait; those
// of a selector, an affinity, a taint or an unknown form do not.
func TestShortageOnly(t *testing.T) {
	for msg, want := range map[string]bool{
		"0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod..":                                                     true,
		"0/3 nodes are available: 1 Insufficient memory, 2 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod..":                              true,
		"0/2 nodes are available: 2 Too many pods. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod..":                                                        true,
		"0/1 nodes are available: 1 Insufficient example.com/gpu.":                                                                                                                               true,
		"0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling..":                        false,
		"0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {dedicated: infra}. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod..": false,
		"0/1 nodes are available: .": false,
		"0/1 nodes":                  false,
		"":                           false,
	} {
		if got := shortageOnly(msg); got != want {
			t.Errorf("shortageOnly(%q) = %v, want %v", msg, got, want)
		}
	}
}

// FuzzShortageOnly: any message is read without panic, and one read as a
// shortage names only shortages.
func FuzzShortageOnly(f *testing.F) {
	f.Add("0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod..")
	f.Add("0/3 nodes are available: 1 Insufficient memory, 2 Too many pods.")
	f.Add("0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.")
	f.Fuzz(func(t *testing.T, msg string) {
		if !shortageOnly(msg) {
			return
		}
		_, rest, _ := strings.Cut(msg, "nodes are available: ")
		rest, _, _ = strings.Cut(rest, ". preemption:")
		for _, r := range strings.Split(strings.TrimSuffix(strings.TrimSpace(rest), "."), ", ") {
			if !strings.Contains(r, "Insufficient ") && !strings.HasSuffix(r, "Too many pods") {
				t.Fatalf("%q read as a shortage, but names %q", msg, r)
			}
		}
	})
}

func nodeWith(name, cpu, mem string) corev1.Node {
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourcePods: resource.MustParse("110"),
	}}}
}

func requesting(cpu, mem string) *corev1.Pod {
	p := testPod("p")
	p.Spec.Containers = []corev1.Container{{Name: "worker", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem),
	}}}}
	return p
}

// TestNeverFits: a pod above every node's allocatable fails with the
// numbers; one that a node could hold, or a cluster whose nodes cannot be
// read, waits.
func TestNeverFits(t *testing.T) {
	ctx := t.Context()
	two, eight := nodeWith("a", "2", "4Gi"), nodeWith("b", "8", "2Gi")
	kube := fake.NewClientset(&two, &eight)
	if err := neverFits(ctx, kube, requesting("4", "1Gi")); err != nil {
		t.Errorf("node b holds 4 CPUs and 1Gi: %v", err)
	}
	err := neverFits(ctx, kube, requesting("4", "3Gi"))
	if err == nil || !strings.Contains(err.Error(), "can never be scheduled") || !strings.Contains(err.Error(), "no single node") {
		t.Errorf("4 CPUs and 3Gi fit no single node: %v", err)
	}
	err = neverFits(ctx, kube, requesting("16", "1Gi"))
	if err == nil || !strings.Contains(err.Error(), "cpu 16 (the largest of 2 nodes allocates 8)") {
		t.Errorf("16 CPUs: %v", err)
	}
	if err := neverFits(ctx, fake.NewClientset(), requesting("16", "1Gi")); err != nil {
		t.Errorf("no node could be read, so the run waits: %v", err)
	}
	init := requesting("1", "1Gi")
	init.Spec.InitContainers = []corev1.Container{{Name: "unpack", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("12"),
	}}}}
	if err := neverFits(ctx, kube, init); err == nil {
		t.Error("an init container's 12 CPUs fit no node")
	}
}

// TestRunningOrFailedShortage: a pod unschedulable for room waits (a
// shortage); for a selector it fails.
func TestRunningOrFailedShortage(t *testing.T) {
	cond := func(msg string) corev1.PodStatus {
		return corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg}}}
	}
	_, err := runningOrFailed(withStatus(testPod("p"), cond("0/1 nodes are available: 1 Insufficient cpu.")), "worker")
	if _, ok := err.(shortage); !ok {
		t.Errorf("Insufficient cpu: %v, want a shortage", err)
	}
	_, err = runningOrFailed(withStatus(testPod("p"), cond("0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.")), "worker")
	if _, ok := err.(shortage); ok || err == nil || !strings.Contains(err.Error(), "cannot be scheduled") {
		t.Errorf("selector: %v, want cannot be scheduled", err)
	}
}
