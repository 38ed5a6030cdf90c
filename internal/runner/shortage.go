package runner

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/nodefit"
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
	parts := nodefit.TooLarge(nodefit.Requests(p), nodes.Items)
	if parts == nil {
		return nil
	}
	return because(ReasonUnschedulable, fmt.Errorf("pod %s can never be scheduled: it requests %s. Lower the requests of the group's pod or its "+
		"node label, or add a node that large", p.Name, strings.Join(parts, ", ")))
}
