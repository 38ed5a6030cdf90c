package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/podexec"
)

// kubeletProbeTimeout bounds the probe of a node whose exec stream broke.
// An API server that cannot reach the kubelet answers within a few
// seconds (connection refused, or its dial timeout).
const kubeletProbeTimeout = 15 * time.Second

// NodeLostDeleteWait is how long a run whose node stopped answering waits
// for its pod to be gone. Only the node's kubelet can confirm a graceful
// delete, so the pod goes once the node is back or is removed; the run does
// not wait for that.
const NodeLostDeleteWait = 10 * time.Second

// NodeLostError is a run whose node stopped answering while the playbook
// ran: the kubelet serves exec, and a probe exec was refused.
type NodeLostError struct {
	Pod, Node string
	// Probe is the API server's answer to the probe exec.
	Probe error
	// Stream is how the last session following the run ended.
	Stream error
}

func (e *NodeLostError) Error() string {
	return fmt.Sprintf("node %s stopped answering during the run: the API server cannot reach its kubelet, which serves "+
		"pod %s (%v), so the run ended part way; check the node (kubectl describe node %s)", e.Node, e.Pod,
		strings.TrimSpace(e.Probe.Error()), e.Node)
}

func (e *NodeLostError) Unwrap() error { return e.Stream }

// kubeletStopping is how long after a stream broke the probe asks again
// when the kubelet answered the first: a stopping kubelet closes its exec
// streams a moment before it stops serving new ones.
const kubeletStopping = 2 * time.Second

// nodeLost probes pod's kubelet with a second exec after the run's stream
// broke. It returns a *NodeLostError when the kubelet does not answer, and
// nil when it does (the stream broke for another reason) or the probe
// cannot tell (the API server itself does not answer).
func (r *Runner) nodeLost(ctx context.Context, pod *corev1.Pod, container string, stream error) error {
	if pod.Spec.NodeName == "" {
		return nil
	}
	err := r.probe(ctx, pod, container)
	if err == nil {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(kubeletStopping):
		}
		err = r.probe(ctx, pod, container)
	}
	switch {
	case err == nil:
		return nil
	case kubeletUnreachable(err):
	case errors.Is(err, context.DeadlineExceeded) && r.apiAnswers(ctx, pod):
		// The API server answers, its proxy to the kubelet does not.
	default:
		return nil
	}
	return &NodeLostError{Pod: pod.Name, Node: pod.Spec.NodeName, Probe: err, Stream: stream}
}

// probe runs "true" in pod over exec, within kubeletProbeTimeout.
func (r *Runner) probe(ctx context.Context, pod *corev1.Pod, container string) error {
	probeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), kubeletProbeTimeout)
	defer cancel()
	_, err := podexec.Run(probeCtx, r.Config, r.Kube, pod.Namespace, pod.Name, container, []string{"true"},
		nil, io.Discard, io.Discard)
	return err
}

// kubeletUnreachable reports the API server's answer when it cannot reach
// a node's kubelet to proxy exec to it ("Internal error occurred: error
// sending request: Post https://<node>:10250/exec/...: connection refused"
// from Kubernetes 1.32; "error dialing backend" from older ones). A refused
// connection to the API server itself says nothing about the node, so only
// the API server's own wording counts.
func kubeletUnreachable(err error) bool {
	msg := err.Error()
	for _, s := range []string{"error sending request", "error dialing backend", "proxy error"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// apiAnswers reports an API server that serves a read of pod at once.
func (r *Runner) apiAnswers(ctx context.Context, pod *corev1.Pod) bool {
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, err := r.Kube.CoreV1().Pods(pod.Namespace).Get(c, pod.Name, metav1.GetOptions{})
	return err == nil
}

// deleteOnLostNode deletes the pod of a run whose node stopped answering.
// It waits NodeLostDeleteWait at most: the node's kubelet, when it comes
// back, or the pod garbage collector, once the node is removed, finishes a
// delete that the API server has accepted.
func (r *Runner) deleteOnLostNode(ctx context.Context, res *Result, pod *corev1.Pod, lost *NodeLostError) {
	c, cancel := context.WithTimeout(ctx, NodeLostDeleteWait)
	defer cancel()
	err := DeletePod(c, r.Kube, pod.Namespace, pod.Name, pod.UID)
	switch {
	case err == nil:
	case c.Err() != nil && ctx.Err() == nil:
		res.Message += fmt.Sprintf("; pod %s is marked for deletion and goes once node %s is back or is removed "+
			"from the cluster", pod.Name, lost.Node)
	default:
		res.Message += "; deleting pod " + pod.Name + " failed: " + err.Error()
	}
}
