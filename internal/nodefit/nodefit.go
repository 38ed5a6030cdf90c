// Package nodefit tells how many pods of one spec a cluster's nodes can hold
// at once, by the scheduler's own filters: nodeName, nodeSelector and
// required node affinity, NoSchedule and NoExecute taints, cordoned nodes,
// and each node's allocatable resources and pods. It ignores what else runs
// on the nodes, so its figure is an upper bound for the nodes there are now.
package nodefit

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"gopkg.in/inf.v0"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/kubernetes"
	resourcehelper "k8s.io/component-helpers/resource"
	schedulinghelper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// Requests is what the scheduler holds for p on a node, computed as
// kube-scheduler does: the containers' requests, an init container's when
// larger (sidecars added), pod-level requests and overhead. Zero requests
// are left out, since the scheduler checks none.
func Requests(p *corev1.Pod) corev1.ResourceList {
	req := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
	for k, v := range req {
		if v.Sign() <= 0 {
			delete(req, k)
		}
	}
	return req
}

// TooLarge names, for requests that no single node can hold, each request
// beside the largest allocatable of any node ("cpu 16 (the largest of 2
// nodes allocates 8)"); nil when one node could hold them all.
func TooLarge(req corev1.ResourceList, nodes []corev1.Node) []string {
	for _, n := range nodes {
		fits := true
		for k, v := range req {
			if a, ok := n.Status.Allocatable[k]; !ok || v.Cmp(a) > 0 {
				fits = false
				break
			}
		}
		if fits {
			return nil
		}
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(req)) {
		largest, at := resource.Quantity{}, ""
		for _, n := range nodes {
			if a, ok := n.Status.Allocatable[k]; ok && (at == "" || a.Cmp(largest) > 0) {
				largest, at = a, n.Name
			}
		}
		v := req[k]
		if v.Cmp(largest) <= 0 {
			continue
		}
		switch {
		case len(nodes) == 1 && at == "":
			parts = append(parts, fmt.Sprintf("%s %s (node %s allocates none)", k, v.String(), nodes[0].Name))
		case len(nodes) == 1:
			parts = append(parts, fmt.Sprintf("%s %s (node %s allocates %s)", k, v.String(), at, largest.String()))
		case at == "":
			parts = append(parts, fmt.Sprintf("%s %s (none of %d nodes allocates any)", k, v.String(), len(nodes)))
		default:
			parts = append(parts, fmt.Sprintf("%s %s (the largest of %d nodes allocates %s)", k, v.String(), len(nodes), largest.String()))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "requests that no single node holds together")
	}
	return parts
}

// Reason is why a pod cannot land on a node.
type Reason int

const (
	// Unselected: the node is not the pod's nodeName, or its labels do not
	// match the pod's nodeSelector and required node affinity.
	Unselected Reason = iota + 1
	// Untolerated: the node has a NoSchedule or NoExecute taint that the
	// pod does not tolerate.
	Untolerated
	// Cordoned: the node is unschedulable (kubectl cordon).
	Cordoned
)

// Left is a node the pod cannot land on.
type Left struct {
	Name   string
	Reason Reason
	// Taint is the first taint the pod does not tolerate, for Reason Untolerated.
	Taint corev1.Taint
}

// Node is a node the pod can land on and how many such pods it holds.
type Node struct {
	Name  string
	Holds int64
	// By is what bounds Holds: the requested resource with the least room
	// per pod, or pods.
	By corev1.ResourceName
	// Allocatable is the node's allocatable of By; zero when it has none.
	Allocatable resource.Quantity
}

// Report is how many pods of one spec the nodes hold at once.
type Report struct {
	// Requests are the pod's non-zero requests.
	Requests corev1.ResourceList
	// Nodes are the nodes it can land on, Left the others, both by name.
	Nodes []Node
	Left  []Left
	// Total is the sum of the Nodes' Holds.
	Total int64
	// Short is TooLarge of the Nodes: set when they are some and none can
	// hold one pod.
	Short []string
	// Selector words what the pod asks of a node's name and labels (see
	// Selector).
	Selector string
}

// listTimeout bounds the read of the nodes.
const listTimeout = 30 * time.Second

// Read lists the cluster's nodes and reports how many pods like p they
// hold. It reads from the API server's watch cache: a plan needs no
// quorum read of every node.
func Read(ctx context.Context, kube kubernetes.Interface, p *corev1.Pod) (Report, error) {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return Report{}, err
	}
	return Hold(p, nodes.Items), nil
}

// Hold reports how many pods like p nodes hold at once. Each node that p
// can land on holds, of every resource p requests, its allocatable divided
// by the request, rounded down, and at most its allocatable pods; a
// requested resource the node does not allocate makes it hold none. What
// already runs there is not subtracted.
func Hold(p *corev1.Pod, nodes []corev1.Node) Report {
	rep := Report{Requests: Requests(p), Selector: Selector(p)}
	affinity := nodeaffinity.GetRequiredNodeAffinity(p)
	var landing []corev1.Node
	for _, n := range slices.SortedFunc(slices.Values(nodes), func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) }) {
		if ok, err := affinity.Match(&n); !ok || err != nil || (p.Spec.NodeName != "" && p.Spec.NodeName != n.Name) {
			rep.Left = append(rep.Left, Left{Name: n.Name, Reason: Unselected})
			continue
		}
		if t, bad := schedulinghelper.FindMatchingUntoleratedTaint(logr.Discard(), n.Spec.Taints, p.Spec.Tolerations, func(t *corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		}, true); bad {
			rep.Left = append(rep.Left, Left{Name: n.Name, Reason: Untolerated, Taint: t})
			continue
		}
		// The scheduler lets a pod that tolerates the cordon's taint onto a
		// cordoned node, as it does DaemonSets' pods.
		cordon := corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}
		if n.Spec.Unschedulable && !schedulinghelper.TolerationsTolerateTaint(logr.Discard(), p.Spec.Tolerations, &cordon, true) {
			rep.Left = append(rep.Left, Left{Name: n.Name, Reason: Cordoned})
			continue
		}
		landing = append(landing, n)
		node := holds(rep.Requests, n)
		rep.Nodes = append(rep.Nodes, node)
		rep.Total = addCapped(rep.Total, node.Holds)
	}
	if len(landing) > 0 && rep.Total == 0 {
		rep.Short = TooLarge(rep.Requests, landing)
	}
	return rep
}

// holds is how many pods of req node n holds, and what bounds it.
func holds(req corev1.ResourceList, n corev1.Node) Node {
	pods := n.Status.Allocatable[corev1.ResourcePods]
	out := Node{Name: n.Name, Holds: max(pods.Value(), 0), By: corev1.ResourcePods, Allocatable: pods}
	for _, k := range slices.Sorted(maps.Keys(req)) {
		a := n.Status.Allocatable[k]
		if h := quotient(a, req[k]); h < out.Holds {
			out.Holds, out.By, out.Allocatable = h, k, a
		}
	}
	return out
}

// quotient is a/b rounded down, b > 0; exact for any quantity, where
// MilliValue would overflow on exabytes.
func quotient(a, b resource.Quantity) int64 {
	q := new(inf.Dec).QuoRound(a.AsDec(), b.AsDec(), 0, inf.RoundDown)
	switch n := q.UnscaledBig(); {
	case n.Sign() <= 0:
		return 0
	case !n.IsInt64():
		return math.MaxInt64
	default:
		return n.Int64()
	}
}

func addCapped(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// Selector words what p asks of a node's name and labels: "nodeName x",
// "nodeSelector disktype=ssd", "required node affinity zone in (a,b) or
// gpu", joined by " and "; "" when it asks nothing.
func Selector(p *corev1.Pod) string {
	var parts []string
	if p.Spec.NodeName != "" {
		parts = append(parts, "nodeName "+p.Spec.NodeName)
	}
	if len(p.Spec.NodeSelector) > 0 {
		parts = append(parts, "nodeSelector "+labels.SelectorFromSet(p.Spec.NodeSelector).String())
	}
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		var terms []string
		for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			var reqs []string
			for _, r := range t.MatchExpressions {
				reqs = append(reqs, requirement(r.Key, r))
			}
			for _, r := range t.MatchFields {
				reqs = append(reqs, requirement(r.Key, r))
			}
			if len(reqs) == 0 {
				reqs = append(reqs, "(an empty term, which matches no node)")
			}
			terms = append(terms, strings.Join(reqs, ","))
		}
		parts = append(parts, "required node affinity "+strings.Join(terms, " or "))
	}
	return strings.Join(parts, " and ")
}

// requirement words one node selector requirement as a label selector does.
func requirement(key string, r corev1.NodeSelectorRequirement) string {
	op := map[corev1.NodeSelectorOperator]selection.Operator{
		corev1.NodeSelectorOpIn: selection.In, corev1.NodeSelectorOpNotIn: selection.NotIn,
		corev1.NodeSelectorOpExists: selection.Exists, corev1.NodeSelectorOpDoesNotExist: selection.DoesNotExist,
		corev1.NodeSelectorOpGt: selection.GreaterThan, corev1.NodeSelectorOpLt: selection.LessThan,
	}[r.Operator]
	if req, err := labels.NewRequirement(key, op, r.Values); err == nil {
		return req.String()
	}
	return fmt.Sprintf("%s %s %v", key, r.Operator, r.Values)
}

// Quantities words a resource list by name: "cpu 250m, memory 64Mi"; "no
// resources" when it is empty.
func Quantities(rl corev1.ResourceList) string {
	if len(rl) == 0 {
		return "no resources"
	}
	parts := make([]string, 0, len(rl))
	for _, k := range slices.Sorted(maps.Keys(rl)) {
		v := rl[k]
		parts = append(parts, string(k)+" "+v.String())
	}
	return strings.Join(parts, ", ")
}

// String words a node and what bounds it: "node-a: cpu 2 allocatable, room
// for 8".
func (n Node) String() string {
	if n.Allocatable.IsZero() {
		return fmt.Sprintf("%s: no %s allocatable, room for %d", n.Name, n.By, n.Holds)
	}
	return fmt.Sprintf("%s: %s %s allocatable, room for %d", n.Name, n.By, n.Allocatable.String(), n.Holds)
}

// NodeList words at most limit of the Nodes, then how many more there are.
func (r Report) NodeList(limit int) string {
	var parts []string
	for i, n := range r.Nodes {
		if i == limit {
			parts = append(parts, fmt.Sprintf("and %d more", len(r.Nodes)-limit))
			break
		}
		parts = append(parts, n.String())
	}
	return strings.Join(parts, "; ")
}

// WhyLeft words why the pod cannot land on the Left nodes, by reason: "2
// do not match the pod's nodeSelector a=b; 1 has a taint that the pod does
// not tolerate (dedicated=infra:NoSchedule); 1 is cordoned".
func (r Report) WhyLeft() string {
	var selector, cordoned int
	var taints []string
	for _, l := range r.Left {
		switch l.Reason {
		case Unselected:
			selector++
		case Cordoned:
			cordoned++
		case Untolerated:
			taints = append(taints, l.Taint.ToString())
		}
	}
	var parts []string
	if selector > 0 {
		what := "the pod's " + r.Selector
		if r.Selector == "" {
			what = "the pod" // only an unparsable affinity gets here
		}
		parts = append(parts, fmt.Sprintf("%d %s not match %s", selector, verb(selector, "does", "do"), what))
	}
	if len(taints) > 0 {
		distinct := slices.Compact(slices.Sorted(slices.Values(taints)))
		parts = append(parts, fmt.Sprintf("%d %s a taint that the pod does not tolerate (%s)", len(taints),
			verb(len(taints), "has", "have"), strings.Join(distinct, ", ")))
	}
	if cordoned > 0 {
		parts = append(parts, fmt.Sprintf("%d %s cordoned", cordoned, verb(cordoned, "is", "are")))
	}
	return strings.Join(parts, "; ")
}

func verb(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
