// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runnamespace"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/waitfor"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/warmpool"
)

// NodeError: a run names a held node that is not there to run in.
type NodeError struct {
	Node, Group string
	// Object is what the node is: "pod <namespace>/<name>" or "namespace <name>".
	Object string
	// Reason says what is wrong with it.
	Reason string
	// Busy: the node was there, but the run ended (canceled or timed out)
	// while it waited for its turn.
	Busy bool
}

func (e *NodeError) Error() string {
	return fmt.Sprintf("held node %q of container group %q (%s) %s", e.Node, e.Group, e.Object, e.Reason)
}

// NodeNamespace is a held node's namespace, for namespace label l: named
// name, with the label's labels and annotations, the LabelNode label and
// no deadline.
func NodeNamespace(g Group, l *podspec.Label, name string) runnamespace.Spec {
	return runnamespace.Spec{Label: l.Name, Group: g.Name, Node: name, Labels: l.Labels, Annotations: l.Annotations,
		PodSecurityLevel: g.PodSecurityLevel}
}

// HoldNamespace makes a held node's namespace s with its service account,
// Role and RoleBinding; what was made is deleted again on error.
func (e *Engine) HoldNamespace(ctx context.Context, g Group, s runnamespace.Spec) (*corev1.Namespace, error) {
	// The node's namespace of before, deleted out of band and replaced by
	// this create, may still be terminating: wait until it is gone.
	nss := e.clients.Kube.CoreV1().Namespaces()
	if old, err := nss.Get(ctx, s.Node, metav1.GetOptions{}); err == nil && old.DeletionTimestamp != nil &&
		managed.Owns(old, managed.LabelContainerGroup, g.Name, managed.LabelNode, s.Node) {
		if err := waitfor.Gone(ctx, waitfor.Named(nss, s.Node), &corev1.Namespace{}); err != nil {
			return nil, fmt.Errorf("%w: waiting for the node's terminating namespace %s to go: %w", runnamespace.ErrNotCreated, s.Node, err)
		}
	}
	if err := runnamespace.Make(ctx, e.clients.Kube, s); err != nil {
		if !errors.Is(err, runnamespace.ErrNotCreated) {
			err = errors.Join(err, e.ReleaseNamespace(ctx, g, s.Node))
		}
		return nil, err
	}
	return e.clients.Kube.CoreV1().Namespaces().Get(ctx, s.Node, metav1.GetOptions{})
}

// ReleaseNamespace deletes a held node's namespace, if it is the group's
// node of that name, and waits until it is gone.
func (e *Engine) ReleaseNamespace(ctx context.Context, g Group, name string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	return runnamespace.Delete(ctx, e.clients.Kube, name, managed.LabelContainerGroup, g.Name, managed.LabelNode, name)
}

// NamespaceState is a held node's namespace as it is now: nil, with a nil
// error, when it is gone or terminating, or is not the group's node.
func (e *Engine) NamespaceState(ctx context.Context, g Group, name string) (*corev1.Namespace, error) {
	ns, err := e.clients.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	case ns.DeletionTimestamp != nil || !managed.Owns(ns, managed.LabelContainerGroup, g.Name, managed.LabelNode, name):
		return nil, nil
	}
	return ns, nil
}

// NodeAccess is a kubeconfig for a held node's namespace that reaches the
// group's cluster from outside it (the credential's server and CA) with a
// token of the node's service account valid for ttl, the token, and its
// expiry as issued.
func (e *Engine) NodeAccess(ctx context.Context, g Group, name string, ttl time.Duration) (runnamespace.Grant, error) {
	ns, err := e.NamespaceState(ctx, g, name)
	switch {
	case err != nil:
		return runnamespace.Grant{}, err
	case ns == nil:
		return runnamespace.Grant{}, &NodeError{Node: name, Group: g.Name, Object: "namespace " + name, Reason: "is not a namespace node of the group, or is gone"}
	}
	ca, err := e.caData()
	if err != nil {
		return runnamespace.Grant{}, err
	}
	grant, err := runnamespace.Issue(ctx, e.clients.Kube, name, e.clients.Config.Host, ca, ttl)
	if err != nil || !e.clients.Config.Insecure {
		return grant, err
	}
	// A credential that does not verify the server (verify_ssl = false) has
	// no CA to give: the kubeconfig does not verify either.
	kc, err := clientcmd.Load(grant.Kubeconfig)
	if err != nil {
		return runnamespace.Grant{}, err
	}
	for _, c := range kc.Clusters {
		c.InsecureSkipTLSVerify, c.CertificateAuthorityData = true, nil
	}
	grant.Kubeconfig, err = clientcmd.Write(*kc)
	return grant, err
}

// caData is the credential's CA: what verifies the API server from outside.
func (e *Engine) caData() ([]byte, error) {
	cfg := rest.CopyConfig(e.clients.Config)
	if err := rest.LoadTLSFiles(cfg); err != nil {
		return nil, fmt.Errorf("reading the CA of the group's credential (%s): %w; check that the file still exists and is readable", cfg.CAFile, err)
	}
	return cfg.CAData, nil
}

// NodePod renders a held node's pod: the run pod of g and l (nil for none),
// named name, with the LabelNode label, no deadline, a worker without the
// start timeout of a run pod, since it lives from the node's create to its
// destroy, and the label's python_path and shell_type in its environment
// (PodLocal).
func NodePod(g Group, l *podspec.Label, name string) (*corev1.Pod, error) {
	if namespaceLabel(l) != nil {
		return nil, unavailable{fmt.Errorf("node label %q is of type namespace: its held node is a namespace (NodeNamespace)", l.Name)}
	}
	pod, err := RenderPod(g, l, RunInfo{ID: name, Name: name}, 0)
	if err != nil {
		return nil, err
	}
	pod.Name, pod.GenerateName = name, ""
	pod.Labels[managed.LabelNode] = name
	pod.Spec.ActiveDeadlineSeconds = nil
	podspec.WaitForRuns(pod)
	setLocal(pod, LabelLocal(l))
	return pod, nil
}

// nodeOwner is what a held node's pod p of group g is signed for.
func nodeOwner(g Group, p *corev1.Pod) warmpool.Owner {
	return warmpool.Owner{Kind: warmpool.KindNode, Group: g.Name, Label: p.Labels[managed.LabelNodeLabel], Node: p.Name}
}

// Hold starts a held node's pod and waits until it runs, retrying a launch
// as runs do; a pod that did not start is deleted. Each pod is signed with
// the catalog key as soon as it is created: runs use only a signed pod.
func (e *Engine) Hold(ctx context.Context, g Group, pod *corev1.Pod) (*corev1.Pod, error) {
	key, err := e.key(ctx)
	if err != nil {
		return nil, fmt.Errorf("the catalog key, which signs the node's pod, is not available: %w", err)
	}
	return e.start(ctx, runner.Spec{Pod: pod, Container: pod.Spec.Containers[0].Name, PendingTimeout: g.pending(),
		LaunchRetries: max(0, g.LaunchRetries),
		OnCreated: func(ctx context.Context, p *corev1.Pod) error {
			_, err := warmpool.Sign(ctx, e.clients.Kube, key, nodeOwner(g, p), p)
			return err
		}})
}

// Release deletes the held node's pod called name, ended or not, and waits
// until it is gone. A pod of the name that is not the group's node, or
// that kubeplay did not make (its identity signature does not hold), is
// left in place: Release returns an error that wraps ErrNotNode or a
// *warmpool.RefusedError. The delete carries the UID of the pod checked.
func (e *Engine) Release(ctx context.Context, g Group, name string) error {
	p, err := e.clients.Kube.CoreV1().Pods(g.Namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case !managed.Owns(p, managed.LabelContainerGroup, g.Name, managed.LabelNode, name):
		return fmt.Errorf("pod %s/%s %w", p.Namespace, p.Name, ErrNotNode)
	}
	if err := e.verifyNode(ctx, g, p); err != nil {
		if r := (*warmpool.RefusedError)(nil); !errors.As(err, &r) || !r.Ours {
			return err
		}
	}
	return runner.DeletePod(ctx, e.clients.Kube, g.Namespace, name, p.UID)
}

// verifyNode checks that kubeplay made p as the group's held node and that
// its spec is the one made: nil, a *warmpool.RefusedError, or the error
// that there is no key.
func (e *Engine) verifyNode(ctx context.Context, g Group, p *corev1.Pod) error {
	key, err := e.key(ctx)
	if err != nil {
		return fmt.Errorf("the catalog key, which verifies the node's pod, is not available: %w", err)
	}
	return warmpool.Verify(key, nodeOwner(g, p), p)
}

// NodeSignedBefore reports whether kubeplay made p, the group's held node,
// under a previous catalog key: after a rotation, no run uses it, so the
// node is replaced. It makes no request but for the key.
func (e *Engine) NodeSignedBefore(ctx context.Context, g Group, p *corev1.Pod) bool {
	var r *warmpool.RefusedError
	return errors.As(e.verifyNode(ctx, g, p), &r) && r.Previous
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

// The kinds of held node: a pod, or a namespace label's namespace.
const (
	NodeKindPod       = "pod"
	NodeKindNamespace = "namespace"
)

// ErrNotNode: a live pod has the node's name in the group's namespace but
// is not the group's kubeplay_node.
var ErrNotNode = errors.New("is not a kubeplay_node of the group")

// FindNode finds the group's held node name as it is now: its live pod, or
// its namespace, or neither (a node gone, terminating or ended). kind,
// NodeKindPod or NodeKindNamespace, says which to look for; "" looks for a pod, then a
// namespace, and then a namespace that cannot be read counts as none,
// since a credential that may not read namespaces holds no namespace nodes.
func (e *Engine) FindNode(ctx context.Context, g Group, name, kind string) (*corev1.Pod, *corev1.Namespace, error) {
	if kind != NodeKindNamespace {
		p, err := e.NodeState(ctx, g, name)
		switch {
		case err != nil:
			return nil, nil, err
		case p != nil && !managed.Owns(p, managed.LabelContainerGroup, g.Name, managed.LabelNode, name):
			return nil, nil, ErrNotNode
		case p != nil || kind == NodeKindPod:
			return p, nil, nil
		}
	}
	ns, err := e.NamespaceState(ctx, g, name)
	if err != nil && kind == "" {
		return nil, nil, nil
	}
	return nil, ns, err
}

// heldNode is the held node a run names: its pod, running, or its
// namespace.
func (e *Engine) heldNode(ctx context.Context, g Group, name string) (*corev1.Pod, *corev1.Namespace, error) {
	fail := func(object, reason string) error {
		return &NodeError{Node: name, Group: g.Name, Object: object, Reason: reason}
	}
	pod := "pod " + g.Namespace + "/" + name
	p, ns, err := e.FindNode(ctx, g, name, "")
	switch {
	case errors.Is(err, ErrNotNode):
		return nil, nil, fail(pod, err.Error())
	case err != nil:
		return nil, nil, fail(pod, "cannot be read: "+err.Error())
	case ns != nil:
		return nil, ns, nil
	case p == nil:
		return nil, nil, fail(pod+" or namespace "+name, "is gone, or its pod ended")
	case !warmpool.Ready(p):
		return nil, nil, fail(pod, "is not running (phase "+string(p.Status.Phase)+")")
	}
	// Anyone who may create pods in the namespace can copy the node's name
	// and labels: the run's bundle goes only into the pod kubeplay made.
	var r *warmpool.RefusedError
	switch err := e.verifyNode(ctx, g, p); {
	case errors.As(err, &r) && r.Ours:
		return nil, nil, fail(pod, "is refused: it "+r.Reason+"; the run sent it nothing. Replace the node "+
			"(terraform apply -replace) to get a pod as kubeplay makes it")
	case errors.As(err, &r):
		e.log(slog.LevelWarn, "a pod with a held node's name and labels was not made by kubeplay; the run sent it nothing",
			map[string]any{"pod": g.Namespace + "/" + name, "reason": r.Reason})
		return nil, nil, fail(pod, "was not made by kubeplay: it "+r.Reason+"; the run sent it nothing. Delete "+
			"the pod if it is not yours, and replace the node (terraform apply -replace)")
	case err != nil:
		return nil, nil, fail(pod, "cannot be verified: "+err.Error())
	}
	return p, nil, nil
}

// takeTurn waits for the run's turn on held namespace node ns, saying so
// when another run holds it, and gives a kubeconfig for the node's account
// valid for the run (in-cluster server and CA) into b.
func (e *Engine) takeTurn(ctx context.Context, req Request, ns string, b *bundle.Bundle) (release func() error, token string, err error) {
	fail := func(reason string) error {
		return &NodeError{Node: req.Node, Group: req.Group.Name, Object: "namespace " + ns, Reason: reason}
	}
	// The turn lasts until the run's deadline at the latest.
	until, ok := ctx.Deadline()
	if !ok {
		until = time.Now().Add(req.Timeout)
	}
	give, err := runnamespace.TakeTurn(ctx, e.clients.Kube, ns, req.ID, until, func(holder string) {
		msg := fmt.Sprintf("held node %s is busy with run %s; waiting for its turn", req.Node, holder)
		e.log(slog.LevelInfo, msg, map[string]any{"run": req.ID})
		if req.OnEvent != nil {
			req.OnEvent(msg)
		}
	})
	switch {
	case errors.Is(err, runnamespace.ErrNodeGone):
		return nil, "", fail("went while the run waited for its turn")
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		how := "was canceled"
		if errors.Is(err, context.DeadlineExceeded) {
			how = "reached its timeout"
		}
		return nil, "", &NodeError{Node: req.Node, Group: req.Group.Name, Object: "namespace " + ns, Busy: true,
			Reason: "was busy with other runs, and the run " + how + " while it waited for its turn"}
	case err != nil:
		return nil, "", fail("gave no turn: " + err.Error())
	}
	release = func() error {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := give(ctx); err != nil {
			return fmt.Errorf("giving back the turn on held node %s: %w; the next run takes it at this run's deadline", req.Node, err)
		}
		return nil
	}
	kubeconfig, token, err := runnamespace.Access(ctx, e.clients.Kube, ns, runnamespace.InClusterServer, e.clusterCA(ctx, req.Group.Namespace), time.Until(until))
	if err != nil {
		return nil, "", errors.Join(fail("gave no token: "+err.Error()), release())
	}
	b.Kubeconfig, b.Env["KUBEPLAY_NAMESPACE"] = kubeconfig, ns
	return release, token, nil
}

// CleanPod is p as a spec: without status and server-set metadata.
func CleanPod(p *corev1.Pod) *corev1.Pod {
	q := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, Spec: *p.Spec.DeepCopy()}
	q.Name, q.Namespace, q.Labels, q.Annotations = p.Name, p.Namespace, p.Labels, p.Annotations
	return q
}
