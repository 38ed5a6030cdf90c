package nodefit

import (
	"errors"
	"math"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// node is a node with labels and allocatable "name=quantity" pairs.
func node(name string, labels map[string]string, alloc ...string) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{}}}
	for _, a := range alloc {
		k, v, _ := strings.Cut(a, "=")
		n.Status.Allocatable[corev1.ResourceName(k)] = resource.MustParse(v)
	}
	return n
}

// std is a node of 2 CPUs, 4Gi and 110 pods.
func std(name string) corev1.Node { return node(name, nil, "cpu=2", "memory=4Gi", "pods=110") }

// pod requests "name=quantity" pairs in one container.
func pod(reqs ...string) *corev1.Pod {
	rl := corev1.ResourceList{}
	for _, r := range reqs {
		k, v, _ := strings.Cut(r, "=")
		rl[corev1.ResourceName(k)] = resource.MustParse(v)
	}
	return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "worker", Resources: corev1.ResourceRequirements{Requests: rl}}}}}
}

func with(p *corev1.Pod, f func(*corev1.PodSpec)) *corev1.Pod {
	f(&p.Spec)
	return p
}

func tainted(n corev1.Node, taints ...corev1.Taint) corev1.Node {
	n.Spec.Taints = taints
	return n
}

func cordoned(n corev1.Node) corev1.Node {
	n.Spec.Unschedulable = true
	return n
}

var infra = corev1.Taint{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}

func affinity(terms ...corev1.NodeSelectorTerm) func(*corev1.PodSpec) {
	return func(s *corev1.PodSpec) {
		s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
	}
}

func zoneIn(zones ...string) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
		Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: zones}}}
}

// TestHold: which nodes count, and how many pods each holds, by the
// scheduler's filters and each node's allocatable.
func TestHold(t *testing.T) {
	ssd := map[string]string{"disk": "ssd"}
	cases := []struct {
		name  string
		pod   *corev1.Pod
		nodes []corev1.Node
		total int64
		// holds is "node:holds:by" for each node the pod can land on.
		holds []string
		left  map[string]Reason
		short string
	}{
		{name: "cpu bounds one node", pod: pod("cpu=250m", "memory=64Mi"), nodes: []corev1.Node{std("a")},
			total: 8, holds: []string{"a:8:cpu"}},
		{name: "memory bounds", pod: pod("cpu=100m", "memory=1Gi"), nodes: []corev1.Node{std("a")},
			total: 4, holds: []string{"a:4:memory"}},
		{name: "rounds down", pod: pod("cpu=300m"), nodes: []corev1.Node{node("a", nil, "cpu=1900m", "pods=110")},
			total: 6, holds: []string{"a:6:cpu"}},
		{name: "pods bound", pod: pod("cpu=10m"), nodes: []corev1.Node{node("a", nil, "cpu=2", "pods=3")},
			total: 3, holds: []string{"a:3:pods"}},
		{name: "zero requests: only pods", pod: pod(), nodes: []corev1.Node{std("a")},
			total: 110, holds: []string{"a:110:pods"}},
		{name: "an explicit zero request is not checked", pod: pod("cpu=0", "example.com/gpu=0"), nodes: []corev1.Node{std("a")},
			total: 110, holds: []string{"a:110:pods"}},
		{name: "no pods allocatable: none", pod: pod("cpu=1"), nodes: []corev1.Node{node("a", nil, "cpu=2")},
			total: 0, holds: []string{"a:0:pods"}},
		{name: "extended resource", pod: pod("cpu=100m", "example.com/gpu=1"),
			nodes: []corev1.Node{node("gpu", nil, "cpu=8", "pods=110", "example.com/gpu=2"), std("plain")},
			total: 2, holds: []string{"gpu:2:example.com/gpu", "plain:0:example.com/gpu"}},
		{name: "summed over nodes", pod: pod("cpu=500m"), nodes: []corev1.Node{std("b"), std("a"), node("c", nil, "cpu=1", "pods=110")},
			total: 10, holds: []string{"a:4:cpu", "b:4:cpu", "c:2:cpu"}},
		{name: "nodeSelector", pod: with(pod("cpu=1"), func(s *corev1.PodSpec) { s.NodeSelector = ssd }),
			nodes: []corev1.Node{std("hdd"), node("fast", ssd, "cpu=4", "pods=110")},
			total: 4, holds: []string{"fast:4:cpu"}, left: map[string]Reason{"hdd": Unselected}},
		{name: "nodeSelector matches none", pod: with(pod("cpu=1"), func(s *corev1.PodSpec) { s.NodeSelector = ssd }),
			nodes: []corev1.Node{std("a"), std("b")}, left: map[string]Reason{"a": Unselected, "b": Unselected}},
		{name: "required affinity", pod: with(pod("cpu=1"), affinity(zoneIn("z1", "z2"))),
			nodes: []corev1.Node{node("in", map[string]string{"zone": "z2"}, "cpu=2", "pods=110"), node("out", map[string]string{"zone": "z3"}, "cpu=2", "pods=110")},
			total: 2, holds: []string{"in:2:cpu"}, left: map[string]Reason{"out": Unselected}},
		{name: "affinity terms are ORed", pod: with(pod("cpu=1"), affinity(zoneIn("z1"), zoneIn("z3"))),
			nodes: []corev1.Node{node("in", map[string]string{"zone": "z1"}, "cpu=2", "pods=110"), node("out", map[string]string{"zone": "z3"}, "cpu=2", "pods=110")},
			total: 4, holds: []string{"in:2:cpu", "out:2:cpu"}},
		{name: "nodeName", pod: with(pod("cpu=1"), func(s *corev1.PodSpec) { s.NodeName = "b" }),
			nodes: []corev1.Node{std("a"), std("b")}, total: 2, holds: []string{"b:2:cpu"}, left: map[string]Reason{"a": Unselected}},
		{name: "untolerated taint", pod: pod("cpu=1"), nodes: []corev1.Node{tainted(std("infra"), infra), std("a")},
			total: 2, holds: []string{"a:2:cpu"}, left: map[string]Reason{"infra": Untolerated}},
		{name: "NoExecute taint", pod: pod("cpu=1"),
			nodes: []corev1.Node{tainted(std("a"), corev1.Taint{Key: "k", Effect: corev1.TaintEffectNoExecute})},
			left:  map[string]Reason{"a": Untolerated}},
		{name: "PreferNoSchedule does not keep pods off", pod: pod("cpu=1"),
			nodes: []corev1.Node{tainted(std("a"), corev1.Taint{Key: "k", Effect: corev1.TaintEffectPreferNoSchedule})},
			total: 2, holds: []string{"a:2:cpu"}},
		{name: "tolerated taint", pod: with(pod("cpu=1"), func(s *corev1.PodSpec) {
			s.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "infra", Effect: corev1.TaintEffectNoSchedule}}
		}), nodes: []corev1.Node{tainted(std("infra"), infra)}, total: 2, holds: []string{"infra:2:cpu"}},
		{name: "cordoned", pod: pod("cpu=1"), nodes: []corev1.Node{cordoned(std("a")), std("b")},
			total: 2, holds: []string{"b:2:cpu"}, left: map[string]Reason{"a": Cordoned}},
		{name: "a pod that tolerates the cordon", pod: with(pod("cpu=1"), func(s *corev1.PodSpec) {
			s.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists}}
		}), nodes: []corev1.Node{cordoned(std("a"))}, total: 2, holds: []string{"a:2:cpu"}},
		{name: "larger than every node", pod: pod("cpu=4", "memory=1Gi"), nodes: []corev1.Node{std("a"), std("b")},
			holds: []string{"a:0:cpu", "b:0:cpu"}, short: "cpu 4 (the largest of 2 nodes allocates 2)"},
		{name: "larger than the one node", pod: pod("cpu=4"), nodes: []corev1.Node{std("a")},
			holds: []string{"a:0:cpu"}, short: "cpu 4 (node a allocates 2)"},
		{name: "no single node holds it whole", pod: pod("cpu=3", "memory=3Gi"),
			nodes: []corev1.Node{node("a", nil, "cpu=4", "memory=1Gi", "pods=110"), node("b", nil, "cpu=1", "memory=8Gi", "pods=110")},
			holds: []string{"a:0:memory", "b:0:cpu"}, short: "requests that no single node holds together"},
		{name: "init container larger than the containers", pod: with(pod("cpu=250m"), func(s *corev1.PodSpec) {
			s.InitContainers = []corev1.Container{{Name: "unpack", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}
		}), nodes: []corev1.Node{std("a")}, total: 2, holds: []string{"a:2:cpu"}},
		{name: "overhead counts", pod: with(pod("cpu=750m"), func(s *corev1.PodSpec) {
			s.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}
		}), nodes: []corev1.Node{std("a")}, total: 2, holds: []string{"a:2:cpu"}},
		{name: "exabytes do not overflow", pod: pod("memory=1"), nodes: []corev1.Node{node("a", nil, "memory=8Ei", "pods=110")},
			total: 110, holds: []string{"a:110:pods"}},
		{name: "no nodes", pod: pod("cpu=1")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep := Hold(c.pod, c.nodes)
			if rep.Total != c.total {
				t.Errorf("total %d, want %d", rep.Total, c.total)
			}
			var holds []string
			for _, n := range rep.Nodes {
				holds = append(holds, n.Name+":"+itoa(n.Holds)+":"+string(n.By))
			}
			if strings.Join(holds, " ") != strings.Join(c.holds, " ") {
				t.Errorf("nodes %v, want %v", holds, c.holds)
			}
			left := map[string]Reason{}
			for _, l := range rep.Left {
				left[l.Name] = l.Reason
			}
			if len(left) != len(c.left) {
				t.Errorf("left %v, want %v", left, c.left)
			}
			for k, v := range c.left {
				if left[k] != v {
					t.Errorf("node %s left for %v, want %v", k, left[k], v)
				}
			}
			if got := strings.Join(rep.Short, ", "); got != c.short {
				t.Errorf("short %q, want %q", got, c.short)
			}
		})
	}
}

func itoa(n int64) string { return resource.NewQuantity(n, resource.DecimalSI).String() }

// TestQuotient: exact for any size, capped at MaxInt64.
func TestQuotient(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int64
	}{
		{"2", "250m", 8}, {"1900m", "300m", 6}, {"64Mi", "100Mi", 0}, {"8Ei", "1", math.MaxInt64}, {"1Ei", "1Ki", 1 << 50},
	} {
		if got := quotient(resource.MustParse(c.a), resource.MustParse(c.b)); got != c.want {
			t.Errorf("%s / %s = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

// TestWords: what the warnings quote.
func TestWords(t *testing.T) {
	p := with(pod("cpu=250m", "memory=64Mi"), func(s *corev1.PodSpec) {
		s.NodeSelector = map[string]string{"disk": "ssd", "arch": "arm64"}
		affinity(zoneIn("z1", "z2"), corev1.NodeSelectorTerm{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "gpu", Operator: corev1.NodeSelectorOpExists}},
			MatchFields:      []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}}},
		})(s)
	})
	if got, want := Selector(p), "nodeSelector arch=arm64,disk=ssd and required node affinity zone in (z1,z2) or gpu,metadata.name in (n1)"; got != want {
		t.Errorf("Selector = %q, want %q", got, want)
	}
	if got := Selector(pod()); got != "" {
		t.Errorf("Selector of a pod that asks nothing = %q", got)
	}
	if got, want := Quantities(Requests(p)), "cpu 250m, memory 64Mi"; got != want {
		t.Errorf("Quantities = %q, want %q", got, want)
	}
	ssd := map[string]string{"disk": "ssd"}
	withSSD := func(n corev1.Node) corev1.Node { n.Labels = ssd; return n }
	sel := with(pod("cpu=1"), func(s *corev1.PodSpec) { s.NodeSelector = ssd })
	rep := Hold(sel, []corev1.Node{std("a"), cordoned(withSSD(std("b"))), tainted(withSSD(std("c")), infra),
		tainted(withSSD(std("d")), infra, corev1.Taint{Key: "gpu", Effect: corev1.TaintEffectNoExecute}), cordoned(std("e"))})
	if got, want := rep.WhyLeft(), "2 do not match the pod's nodeSelector disk=ssd; 2 have a taint that the pod does not "+
		"tolerate (dedicated=infra:NoSchedule); 1 is cordoned"; got != want {
		t.Errorf("WhyLeft = %q, want %q", got, want)
	}
	plain := Hold(pod("cpu=1"), []corev1.Node{cordoned(std("a")), cordoned(std("b")), tainted(std("c"), infra)})
	if got, want := plain.WhyLeft(), "1 has a taint that the pod does not tolerate (dedicated=infra:NoSchedule); 2 are cordoned"; got != want {
		t.Errorf("WhyLeft = %q, want %q", got, want)
	}
	many := Hold(pod("cpu=500m", "example.com/gpu=1"), []corev1.Node{node("a", nil, "cpu=2", "example.com/gpu=8", "pods=110"), std("b"), std("c")})
	if got, want := many.NodeList(2), "a: cpu 2 allocatable, room for 4; b: no example.com/gpu allocatable, room for 0; and 1 more"; got != want {
		t.Errorf("NodeList = %q, want %q", got, want)
	}
}

// TestRead: the nodes come from the cluster; an error to list them is
// returned as it is.
func TestRead(t *testing.T) {
	a, b := std("a"), cordoned(std("b"))
	rep, err := Read(t.Context(), fake.NewClientset(&a, &b), pod("cpu=1"))
	if err != nil || rep.Total != 2 || len(rep.Left) != 1 {
		t.Errorf("Read = %+v, %v", rep, err)
	}
	kube := fake.NewClientset()
	forbidden := errors.New(`nodes is forbidden: User "u" cannot list resource "nodes"`)
	kube.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, forbidden })
	if _, err := Read(t.Context(), kube, pod("cpu=1")); !errors.Is(err, forbidden) {
		t.Errorf("Read = %v, want %v", err, forbidden)
	}
}
