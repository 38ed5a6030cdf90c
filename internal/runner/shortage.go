package runner

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// shortage marks an unschedulable pod whose every node lacks only room
// (CPU, memory, pods, ephemeral storage, an extended resource): that passes
// when other pods end or a node is added, so the run waits for it within
// the pending timeout.
type shortage struct{ pod, message string }

func (s shortage) Error() string {
	return fmt.Sprintf("pod %s waits for room on a node: %s", s.pod, s.message)
}

// shortageReason is one of the scheduler's per-node reasons that room can
// cure.
var shortageReason = regexp.MustCompile(`^\d+ (Insufficient \S+|Too many pods)$`)

// shortageOnly reports a scheduler message ("0/3 nodes are available: 1
// Insufficient cpu, 2 Too many pods. preemption: ...") whose every node
// reason is a shortage of room. A node selector, affinity or taint that no
// node matches, or a message of another form, is not.
func shortageOnly(msg string) bool {
	_, rest, ok := strings.Cut(msg, "nodes are available: ")
	if !ok {
		return false
	}
	if i := strings.Index(rest, ". preemption:"); i >= 0 {
		rest = rest[:i]
	}
	rest = strings.TrimSuffix(strings.TrimSpace(rest), ".")
	if rest == "" {
		return false
	}
	for _, r := range strings.Split(rest, ", ") {
		if !shortageReason.MatchString(r) {
			return false
		}
	}
	return true
}

// podRequests is what the scheduler holds for p on a node: the sum of its
// containers' requests, or an init container's when larger, plus overhead.
func podRequests(p *corev1.Pod) corev1.ResourceList {
	req := corev1.ResourceList{}
	for _, c := range p.Spec.Containers {
		for k, v := range c.Resources.Requests {
			q := req[k]
			q.Add(v)
			req[k] = q
		}
	}
	for _, c := range p.Spec.InitContainers {
		for k, v := range c.Resources.Requests {
			if q, ok := req[k]; !ok || v.Cmp(q) > 0 {
				req[k] = v.DeepCopy()
			}
		}
	}
	for k, v := range p.Spec.Overhead {
		q := req[k]
		q.Add(v)
		req[k] = q
	}
	return req
}

// neverFits returns an error when no node of the cluster can ever hold the
// pod, however many other pods end: a request above every node's
// allocatable. It reads the nodes once; when it cannot (the credential may
// not list nodes), or when a node could hold the pod, it returns nil, and
// the run waits.
func neverFits(ctx context.Context, kube kubernetes.Interface, p *corev1.Pod) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		return nil
	}
	return tooLarge(p, podRequests(p), nodes.Items)
}

// tooLarge names, for a pod that no node can hold, each request beside the
// largest allocatable of any node; nil when one node could hold it all.
func tooLarge(p *corev1.Pod, req corev1.ResourceList, nodes []corev1.Node) error {
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
		largest := resource.Quantity{}
		for _, n := range nodes {
			if a, ok := n.Status.Allocatable[k]; ok && a.Cmp(largest) > 0 {
				largest = a
			}
		}
		v := req[k]
		if v.Cmp(largest) > 0 {
			parts = append(parts, fmt.Sprintf("%s %s (the largest of %d nodes allocates %s)", k, v.String(), len(nodes), largest.String()))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "requests that no single node holds together")
	}
	return because(ReasonUnschedulable, fmt.Errorf("pod %s can never be scheduled: it requests %s. Lower the requests of the group's pod or its "+
		"node label, or add a node that large", p.Name, strings.Join(parts, ", ")))
}
