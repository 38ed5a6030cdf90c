package runner

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The scheduler's messages, as Kubernetes 1.30 to 1.37 word them, and one
// of an older scheduler.
const (
	msgCPU        = "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.."
	msgSelector   = "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.."
	msgTaint      = "0/2 nodes are available: 2 node(s) had untolerated taint(s). preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.."
	msgMixed      = "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {dedicated: infra}. preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling.."
	msgNotReady   = "0/1 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.."
	msgAnti       = "0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.."
	msgOldTaint   = "0/3 nodes are available: 1 node(s) didn't match node selector, 2 node(s) had taint {dedicated: infra}, that the pod didn't tolerate."
	msgNoNodes    = "no nodes available to schedule pods"
	msgCordoned   = "0/1 nodes are available: 1 node(s) were unschedulable. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.."
	msgVolumeComm = "0/1 nodes are available: 1 node(s) had volume node affinity conflict, waiting for a volume."
)

// TestSchedulerMessages: the scheduler's messages of a full cluster are a
// shortage; those of a selector or a taint no node lifecycle lifts are a
// placement; the rest, and unknown forms, are neither.
func TestSchedulerMessages(t *testing.T) {
	for _, c := range []struct {
		msg                 string
		shortage, placement bool
		reasons             int
	}{
		{msgCPU, true, false, 1},
		{"0/3 nodes are available: 1 Insufficient memory, 2 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod..", true, false, 2},
		{"0/2 nodes are available: 2 Too many pods.", true, false, 1},
		{"0/1 nodes are available: 1 Insufficient example.com/gpu.", true, false, 1},
		{msgSelector, false, true, 1},
		{msgTaint, false, true, 1},
		{msgOldTaint, false, true, 2},
		{msgMixed, false, false, 2},
		{msgNotReady, false, false, 1},
		{msgAnti, false, false, 1},
		{msgCordoned, false, false, 1},
		{msgVolumeComm, false, false, 1},
		{msgNoNodes, false, false, 0},
		{"0/1 nodes are available: .", false, false, 0},
		{"0/1 nodes", false, false, 0},
		{"", false, false, 0},
	} {
		reasons, _ := schedulerReasons(c.msg)
		if shortageOnly(c.msg) != c.shortage || placementOnly(c.msg) != c.placement || len(reasons) != c.reasons {
			t.Errorf("%q: shortage %v, placement %v, reasons %q; want %v, %v, %d", c.msg, shortageOnly(c.msg), placementOnly(c.msg), reasons,
				c.shortage, c.placement, c.reasons)
		}
	}
}

// FuzzSchedulerReasons: any message is read without panic; a message read
// as a shortage or a placement names only such reasons, each without its
// count, and every reason comes from the message. Dropping its final
// periods (schedulerSays) reads it the same.
func FuzzSchedulerReasons(f *testing.F) {
	for _, m := range []string{msgCPU, msgSelector, msgTaint, msgMixed, msgNotReady, msgOldTaint, msgVolumeComm,
		"0/3 nodes are available: 1 Insufficient memory, 2 Too many pods."} {
		f.Add(m)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		reasons, ok := schedulerReasons(msg)
		said := schedulerSays(msg)
		if strings.HasSuffix(said, ".") || shortageOnly(said) != shortageOnly(msg) || placementOnly(said) != placementOnly(msg) {
			t.Fatalf("%q reads otherwise without its final periods: %q", msg, said)
		}
		if ok != (len(reasons) > 0) {
			t.Fatalf("%q: ok %v with %d reasons", msg, ok, len(reasons))
		}
		for _, r := range reasons {
			if !strings.Contains(msg, r) {
				t.Fatalf("%q: reason %q is not in the message", msg, r)
			}
		}
		if shortageOnly(msg) {
			for _, r := range reasons {
				if !strings.HasPrefix(r, "Insufficient ") && r != "Too many pods" {
					t.Fatalf("%q read as a shortage, but names %q", msg, r)
				}
			}
		}
		if placementOnly(msg) {
			if shortageOnly(msg) {
				t.Fatalf("%q read as a shortage and a placement", msg)
			}
			for _, r := range reasons {
				if !strings.HasPrefix(r, "node(s) ") || slices.ContainsFunc(lifecycleTaints, func(k string) bool { return strings.Contains(r, k) }) {
					t.Fatalf("%q read as a placement, but names %q", msg, r)
				}
			}
		}
	})
}

func nodeWith(name, cpu, mem string) corev1.Node {
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourcePods: resource.MustParse("110"),
	}}}
}

func labelled(n corev1.Node, kv ...string) corev1.Node {
	n.Labels = map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		n.Labels[kv[i]] = kv[i+1]
	}
	return n
}

func tainted(n corev1.Node, key string, effect corev1.TaintEffect) corev1.Node {
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: "x", Effect: effect})
	return n
}

func requesting(cpu, mem string) *corev1.Pod {
	p := testPod("p")
	p.Spec.Containers = []corev1.Container{{Name: "worker", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem),
	}}}}
	return p
}

// TestNoNodeFits: a pod no node could ever hold, for its selector, a taint
// or its size, is told with the selector, the taint or the numbers; one a
// node could hold once room frees is not, nor one that only the node
// lifecycle's taints keep off.
func TestNoNodeFits(t *testing.T) {
	two, eight := nodeWith("a", "2", "4Gi"), nodeWith("b", "8", "2Gi")
	selecting := func(p *corev1.Pod, kv ...string) *corev1.Pod {
		p.Spec.NodeSelector = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Spec.NodeSelector[kv[i]] = kv[i+1]
		}
		return p
	}
	tolerating := func(p *corev1.Pod, key string) *corev1.Pod {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists})
		return p
	}
	affine := requesting("1", "1Gi")
	affine.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"}}}},
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "gpu", Operator: corev1.NodeSelectorOpExists}}},
		}}}}
	initHeavy := requesting("1", "1Gi")
	initHeavy.Spec.InitContainers = []corev1.Container{{Name: "unpack", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("12"),
	}}}}
	for _, c := range []struct {
		name  string
		pod   *corev1.Pod
		nodes []corev1.Node
		want  string // in the cause; "" when a node fits
	}{
		{"b holds 4 CPUs and 1Gi", requesting("4", "1Gi"), []corev1.Node{two, eight}, ""},
		{"4 CPUs and 3Gi", requesting("4", "3Gi"), []corev1.Node{two, eight}, "requests that no single node holds together"},
		{"16 CPUs", requesting("16", "1Gi"), []corev1.Node{two, eight}, "it requests cpu 16 (the largest of 2 nodes allocates 8)"},
		{"an init container's 12 CPUs", initHeavy, []corev1.Node{two, eight}, "cpu 12"},
		{"no node", requesting("1", "1Gi"), nil, "the cluster has no node"},
		{"selector", selecting(requesting("1", "1Gi"), "disktype", "ssd", "zone", "a"), []corev1.Node{two, labelled(eight, "disktype", "ssd")},
			"no node of the cluster (2 nodes) has the labels the pod selects (nodeSelector disktype=ssd,zone=a)"},
		{"selector matched", selecting(requesting("1", "1Gi"), "disktype", "ssd"), []corev1.Node{two, labelled(eight, "disktype", "ssd")}, ""},
		{"affinity", affine, []corev1.Node{labelled(two, "zone", "c")},
			"(required node affinity zone in (a,b) or gpu)"},
		{"affinity matched", affine, []corev1.Node{labelled(two, "zone", "c"), labelled(eight, "gpu", "")}, ""},
		{"taint", selecting(requesting("1", "1Gi"), "disktype", "ssd"),
			[]corev1.Node{two, tainted(labelled(eight, "disktype", "ssd"), "dedicated", corev1.TaintEffectNoSchedule)},
			"every node that has the labels the pod selects (nodeSelector disktype=ssd) has a taint the pod does not tolerate (b dedicated=x:NoSchedule)"},
		{"taint tolerated", tolerating(requesting("1", "1Gi"), "dedicated"), []corev1.Node{tainted(two, "dedicated", corev1.TaintEffectNoExecute)}, ""},
		{"PreferNoSchedule keeps no pod off", requesting("1", "1Gi"), []corev1.Node{tainted(two, "dedicated", corev1.TaintEffectPreferNoSchedule)}, ""},
		{"a node not ready yet", requesting("1", "1Gi"), []corev1.Node{tainted(two, corev1.TaintNodeNotReady, corev1.TaintEffectNoSchedule)}, ""},
		{"a cordoned node", requesting("1", "1Gi"), []corev1.Node{tainted(two, corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule)}, ""},
		{"the node it may use is too small", tolerating(requesting("4", "1Gi"), "dedicated"),
			[]corev1.Node{tainted(two, "dedicated", corev1.TaintEffectNoSchedule), tainted(eight, "other", corev1.TaintEffectNoSchedule)},
			"cpu 4 (node a allocates 2), of the nodes it may use"},
	} {
		got := noNodeFits(c.pod, c.nodes)
		switch {
		case c.want == "" && got != nil:
			t.Errorf("%s: a node fits, got %v", c.name, got)
		case c.want != "" && (got == nil || !strings.Contains(got.cause, c.want) || got.remedy == ""):
			t.Errorf("%s: got %v, want a cause with %q and a remedy", c.name, got, c.want)
		}
	}
}

// TestRunningOrFailedUnplaced: a pod the scheduler could not place is left
// to waitRunning, with the scheduler's message (without the two periods its
// condition ends with) and its nominated node.
func TestRunningOrFailedUnplaced(t *testing.T) {
	st := corev1.PodStatus{Phase: corev1.PodPending, NominatedNodeName: "n1", Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msgCPU}}}
	_, err := runningOrFailed(withStatus(testPod("p"), st), "worker")
	var u unplaced
	if !asUnplaced(err, &u) || u.message != strings.TrimSuffix(msgCPU, "..") || u.nominated != "n1" || ReasonOf(err) != ReasonUnschedulable {
		t.Errorf("got %v (%+v)", err, u)
	}
}

func asUnplaced(err error, u *unplaced) bool { return errors.As(err, u) }
