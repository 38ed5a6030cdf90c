package runner

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/nodefit"
)

// unplaced marks a pod that the scheduler could not place (PodScheduled
// False, Unschedulable). Whether the run waits is waitRunning's call: room
// that other pods free, a preemption under way, a node an autoscaler adds.
type unplaced struct {
	pod, message string
	// nominated is the node the scheduler preempts pods on for it.
	nominated string
}

func (u unplaced) Error() string {
	return fmt.Sprintf("pod %s cannot be scheduled: %s: %s", u.pod, corev1.PodReasonUnschedulable, u.message)
}

// schedulerReasons are the per-node reasons of the scheduler's message
// ("0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match
// Pod's node affinity/selector. preemption: ..."), without their counts;
// ok is false for a message of another form.
func schedulerReasons(msg string) (reasons []string, ok bool) {
	_, rest, ok := strings.Cut(msg, "nodes are available: ")
	if !ok {
		return nil, false
	}
	if i := strings.Index(rest, ". preemption:"); i >= 0 {
		rest = rest[:i]
	}
	rest = strings.TrimSuffix(strings.TrimSpace(rest), ".")
	if rest == "" {
		return nil, false
	}
	for _, part := range strings.Split(rest, ", ") {
		n, reason, counted := strings.Cut(part, " ")
		if !counted || n == "" || strings.Trim(n, "0123456789") != "" || reason == "" {
			if len(reasons) == 0 {
				return nil, false
			}
			// A comma of the reason's own.
			reasons[len(reasons)-1] += ", " + part
			continue
		}
		reasons = append(reasons, reason)
	}
	return reasons, true
}

// roomReason is one of the scheduler's per-node reasons that room cures:
// CPU, memory, pods, ephemeral storage, an extended resource.
var roomReason = regexp.MustCompile(`^(Insufficient \S+|Too many pods)$`)

// placementReason is a per-node reason that only a change of the nodes
// cures: a node selector or affinity that the node does not match, a taint
// that the pod does not tolerate (older schedulers say "had taint {k: v},
// that the pod didn't tolerate").
var placementReason = regexp.MustCompile(`^node\(s\) (didn't match (Pod's )?node (affinity/selector|selector|affinity)|had (untolerated taint|taint \{))`)

// shortageOnly reports a scheduler message whose every node reason is a
// shortage of room: that passes when other pods end or a node is added.
func shortageOnly(msg string) bool {
	reasons, ok := schedulerReasons(msg)
	return ok && !slices.ContainsFunc(reasons, func(r string) bool { return !roomReason.MatchString(r) })
}

// placementOnly reports a scheduler message whose every node reason is a
// selector, affinity or taint that the node lifecycle does not lift by
// itself: only a node that matches, labelled, untainted or added, cures it.
// It stands in for the nodes when they cannot be read.
func placementOnly(msg string) bool {
	reasons, ok := schedulerReasons(msg)
	return ok && !slices.ContainsFunc(reasons, func(r string) bool {
		return !placementReason.MatchString(r) || slices.ContainsFunc(lifecycleTaints, func(k string) bool { return strings.Contains(r, k) })
	})
}

// readNodes lists the cluster's nodes, which a namespaced credential may
// not do.
func readNodes(ctx context.Context, kube kubernetes.Interface) ([]corev1.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return nodes.Items, nil
}

// misfit says why no node of the cluster can ever hold a pod, however many
// other pods end, and what helps besides an autoscaler.
type misfit struct{ cause, remedy string }

func (m *misfit) Error() string { return m.cause + "; " + m.remedy }

// lifecycleTaints are the taints the node lifecycle sets and lifts by
// itself (a node not ready yet, cordoned for a drain, under pressure): a
// pod that only they keep off a node waits.
var lifecycleTaints = []string{
	corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable, corev1.TaintNodeUnschedulable,
	corev1.TaintNodeMemoryPressure, corev1.TaintNodeDiskPressure, corev1.TaintNodePIDPressure,
	corev1.TaintNodeNetworkUnavailable, "node.cloudprovider.kubernetes.io/uninitialized",
}

// keepsOff reports a taint that keeps pods that do not tolerate it off a
// node for good.
func keepsOff(t *corev1.Taint) bool {
	return (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) && !slices.Contains(lifecycleTaints, t.Key)
}

// noNodeFits returns why no node of nodes can ever hold p: none has the
// labels its node selector and required node affinity select, those that
// have them have a taint it does not tolerate, or those it may use are all
// smaller than its requests. Nil when one node could hold it, once room
// frees there.
func noNodeFits(p *corev1.Pod, nodes []corev1.Node) *misfit {
	if len(nodes) == 0 {
		return &misfit{cause: "the cluster has no node", remedy: "add a node, or run a cluster autoscaler"}
	}
	affinity := nodeaffinity.GetRequiredNodeAffinity(p)
	var labelled int
	var tainted []string
	var usable []corev1.Node
	for i := range nodes {
		n := &nodes[i]
		// A selector the matcher cannot read is the scheduler's to judge.
		if ok, err := affinity.Match(n); !ok && err == nil {
			continue
		}
		labelled++
		if t, found := corev1helpers.FindMatchingUntoleratedTaint(logr.Discard(), n.Spec.Taints, p.Spec.Tolerations, keepsOff, true); found {
			tainted = append(tainted, n.Name+" "+t.ToString())
			continue
		}
		usable = append(usable, *n)
	}
	switch {
	case labelled == 0:
		return &misfit{
			cause: fmt.Sprintf("no node of the cluster (%s) has the labels the pod selects (%s)", nodeCount(len(nodes)), nodefit.Selector(p)),
			remedy: "label a node, correct the node_selector of the run's node label or the group's pod_spec_override, " +
				"or run a cluster autoscaler with a node group that has them",
		}
	case len(usable) == 0:
		sel := ""
		if s := nodefit.Selector(p); s != "" {
			sel = " (" + s + ")"
		}
		if len(tainted) > 3 {
			tainted = append(tainted[:3], fmt.Sprintf("and %d more", len(tainted)-3))
		}
		return &misfit{
			cause: fmt.Sprintf("every node that has the labels the pod selects%s has a taint the pod does not tolerate (%s)",
				sel, strings.Join(tainted, ", ")),
			remedy: "add a toleration to the group's pod_spec_override or the run's node label, remove the taint, " +
				"or run a cluster autoscaler with a node group whose nodes the pod tolerates",
		}
	}
	return tooLarge(nodefit.Requests(p), usable, len(usable) < len(nodes))
}

func nodeCount(n int) string {
	if n == 1 {
		return "1 node"
	}
	return fmt.Sprintf("%d nodes", n)
}

// tooLarge names, for a pod that no node can hold, each request beside the
// largest allocatable of the nodes; nil when one node could hold it all.
// selected says the nodes are those the pod's selector and tolerations
// allow, not all of the cluster's.
func tooLarge(req corev1.ResourceList, nodes []corev1.Node, selected bool) *misfit {
	parts := nodefit.TooLarge(req, nodes)
	if parts == nil {
		return nil
	}
	cause := "it requests " + strings.Join(parts, ", ")
	if selected {
		cause += ", of the nodes it may use"
	}
	return &misfit{
		cause: cause,
		remedy: "lower the requests of the group's pod or its node label, add a node that large, " +
			"or run a cluster autoscaler with a node group that large",
	}
}
