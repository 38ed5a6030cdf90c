// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/warmpool"
)

// NodeError: a run names a held node that is not there to run in.
type NodeError struct {
	Node, Group, Namespace string
	// Reason says what is wrong with it.
	Reason string
}

func (e *NodeError) Error() string {
	return fmt.Sprintf("held node %q of container group %q (pod %s/%s) %s", e.Node, e.Group, e.Namespace, e.Node, e.Reason)
}

// NodePod renders a held node's pod: the run pod of g and l (nil for none),
// named name, with the LabelNode label, no deadline, and a worker without
// the start timeout of a run pod, since it lives from the node's create to
// its destroy.
func NodePod(g Group, l *podspec.Label, name string) (*corev1.Pod, error) {
	if namespaceLabel(l) != nil {
		return nil, unavailable{fmt.Errorf("node label %q is of type namespace: a held node is a pod", l.Name)}
	}
	pod, err := RenderPod(g, l, RunInfo{ID: name, Name: name}, 0)
	if err != nil {
		return nil, err
	}
	pod.Name, pod.GenerateName = name, ""
	pod.Labels[managed.LabelNode] = name
	pod.Spec.ActiveDeadlineSeconds = nil
	podspec.WaitForRuns(pod)
	return pod, nil
}

// Hold starts a held node's pod and waits until it runs, retrying a launch
// as runs do; a pod that did not start is deleted.
func (e *Engine) Hold(ctx context.Context, g Group, pod *corev1.Pod) (*corev1.Pod, error) {
	return e.start(ctx, runner.Spec{Pod: pod, Container: pod.Spec.Containers[0].Name, PendingTimeout: g.pending(),
		LaunchRetries: max(0, g.LaunchRetries)})
}

// Release deletes a held node's pod and waits until it is gone.
func (e *Engine) Release(ctx context.Context, g Group, name string) error {
	return runner.DeletePod(ctx, e.clients.Kube, g.Namespace, name)
}

// NodeState is a held node's pod as it is now: nil, with a nil error, when
// it is gone, terminating or ended, as a node deleted out of band.
func (e *Engine) NodeState(ctx context.Context, g Group, name string) (*corev1.Pod, error) {
	p, err := e.clients.Kube.CoreV1().Pods(g.Namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	case p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded:
		return nil, nil
	}
	return p, nil
}

// heldPod is the held node's pod, checked: kubeplay's, of the group, and
// running.
func (e *Engine) heldPod(ctx context.Context, g Group, name string) (*corev1.Pod, error) {
	fail := func(reason string) error {
		return &NodeError{Node: name, Group: g.Name, Namespace: g.Namespace, Reason: reason}
	}
	p, err := e.NodeState(ctx, g, name)
	switch {
	case err != nil:
		return nil, fail("cannot be read: " + err.Error())
	case p == nil:
		return nil, fail("is gone, or its pod ended")
	case !managed.Owns(p, managed.LabelContainerGroup, g.Name, managed.LabelNode, name):
		return nil, fail("is not a kubeplay_node of the group")
	case !warmpool.Ready(p):
		return nil, fail("is not running (phase " + string(p.Status.Phase) + ")")
	}
	return p, nil
}

// CleanPod is p as a spec: without status and server-set metadata.
func CleanPod(p *corev1.Pod) *corev1.Pod {
	q := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, Spec: *p.Spec.DeepCopy()}
	q.Name, q.Namespace, q.Labels, q.Annotations = p.Name, p.Namespace, p.Labels, p.Annotations
	return q
}
