// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

// Package runnamespace gives a run a namespace of its own, as Nodepool's
// namespace labels do: a fresh namespace with a ServiceAccount, a Role over
// common workloads and a RoleBinding, and a kubeconfig with a short-lived
// token of that account for the playbook. The run's pod stays in its
// group's namespace, under the group's quota; the namespace is deleted when
// the run ends.
package runnamespace

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podsecurity"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/waitfor"
)

const (
	// InClusterServer is the API server as a pod sees it.
	InClusterServer = "https://kubernetes.default.svc"
	// minTokenTTL is the shortest token the TokenRequest API issues.
	minTokenTTL = 10 * time.Minute
)

// ErrNotCreated: Create failed before the namespace existed, so there is
// nothing of the run's to delete (a namespace of that name is not ours).
var ErrNotCreated = errors.New("the run's namespace was not created")

// Spec describes one run's namespace, or a held node's (Node set).
type Spec struct {
	Label, Group, RunID string
	// Node, when set, makes the namespace a held node's (kubeplay_node):
	// named Node, labelled LabelNode instead of LabelRun, and without a
	// deadline, since it lives until the node is destroyed.
	Node string
	// Labels and Annotations come from the node label. Pod Security labels
	// among them are dropped: the namespace enforces PodSecurityLevel.
	Labels, Annotations map[string]string
	// PodSecurityLevel is the group's pod_security_level ("" is
	// podsecurity.Default): the namespace's Pod Security admission
	// enforces, warns and audits it, so that what the run's account
	// creates there is held to the group's level.
	PodSecurityLevel string
	// Deadline is when the run's pod is killed by the cluster at the latest.
	Deadline time.Time
	// CAData verifies InClusterServer from inside the pod; empty trusts the
	// pod's system roots.
	CAData []byte
}

// Name is the namespace of a run of label: the label's name, cut to fit,
// and the run's id.
func Name(label, runID string) string {
	const maxLen = 63
	// A run id too long to fit leaves no room for the label (and a name the
	// API server rejects) rather than a panic.
	if n := max(maxLen-len(runID)-1, 0); len(label) > n {
		label = label[:n]
	}
	return label + "-" + runID
}

// Namespace is the name of s's namespace.
func (s Spec) Namespace() string {
	if s.Node != "" {
		return s.Node
	}
	return Name(s.Label, s.RunID)
}

// Objects returns the namespace and what goes in it, labelled for the run
// or the held node.
func (s Spec) Objects() (*corev1.Namespace, []runtime.Object) {
	ns, sa, role, rb := podspec.NamespaceObjects(s.Namespace(), s.Label)
	own := ns.Labels
	ns.Labels = maps.Clone(s.Labels)
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	maps.DeleteFunc(ns.Labels, func(k, _ string) bool { return strings.HasPrefix(k, podsecurity.LabelPrefix) })
	maps.Copy(ns.Labels, own)
	// Set after the label's own: the group's level, not the label's, holds.
	maps.Copy(ns.Labels, s.securityLabels())
	ns.Labels[managed.LabelContainerGroup] = s.Group
	ns.Annotations = maps.Clone(s.Annotations)
	if ns.Annotations == nil {
		ns.Annotations = map[string]string{}
	}
	// A label may not make a run's namespace look like a node's, or the
	// reverse: each is found, and reclaimed, by these.
	delete(ns.Labels, managed.LabelRun)
	delete(ns.Labels, managed.LabelNode)
	delete(ns.Annotations, managed.AnnotationDeadline)
	delete(ns.Annotations, AnnotationHolder)
	if s.Node != "" {
		ns.Labels[managed.LabelNode] = s.Node
		return ns, []runtime.Object{sa, role, rb}
	}
	ns.Labels[managed.LabelRun] = s.RunID
	ns.Annotations[managed.AnnotationDeadline] = s.Deadline.UTC().Format(time.RFC3339)
	return ns, []runtime.Object{sa, role, rb}
}

// securityLabels are the Pod Security labels of s's namespace: the
// group's level, or podsecurity.Default when it is not a valid level (a
// group's stored level is checked before runs; this is a last resort).
func (s Spec) securityLabels() map[string]string {
	if l := podsecurity.ModeLabels(s.PodSecurityLevel); l != nil {
		return l
	}
	return podsecurity.ModeLabels(podsecurity.Default)
}

// Create makes the run's namespace and its account, and returns a
// kubeconfig for the account and the token in it (to redact from output).
// On error whatever was made is left for the caller's Delete, unless the
// error is ErrNotCreated.
func Create(ctx context.Context, kube kubernetes.Interface, s Spec) (kubeconfig []byte, token string, err error) {
	if err := Make(ctx, kube, s); err != nil {
		return nil, "", err
	}
	return Access(ctx, kube, s.Namespace(), InClusterServer, s.CAData, time.Until(s.Deadline))
}

// Make creates s's namespace, its service account, Role and RoleBinding.
// On error whatever was made is left for the caller's Delete, unless the
// error is ErrNotCreated.
func Make(ctx context.Context, kube kubernetes.Interface, s Spec) error {
	ns, objs := s.Objects()
	opts := metav1.CreateOptions{FieldManager: managed.ManagedByValue}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, opts); err != nil {
		return fmt.Errorf("%w: creating namespace %s: %w", ErrNotCreated, ns.Name, err)
	}
	for _, o := range objs {
		var err error
		switch x := o.(type) {
		case *corev1.ServiceAccount:
			_, err = kube.CoreV1().ServiceAccounts(ns.Name).Create(ctx, x, opts)
		case *rbacv1.Role:
			_, err = kube.RbacV1().Roles(ns.Name).Create(ctx, x, opts)
		case *rbacv1.RoleBinding:
			_, err = kube.RbacV1().RoleBindings(ns.Name).Create(ctx, x, opts)
		}
		if err != nil {
			return fmt.Errorf("creating %s in namespace %s: %w", o.GetObjectKind().GroupVersionKind().Kind, ns.Name, err)
		}
	}
	return nil
}

// Access requests a token of namespace's service account valid for ttl (at
// least the 10 minutes the TokenRequest API issues) and returns a
// kubeconfig that reaches server with it, in namespace, and the token.
func Access(ctx context.Context, kube kubernetes.Interface, namespace, server string, ca []byte, ttl time.Duration) (kubeconfig []byte, token string, err error) {
	g, err := Issue(ctx, kube, namespace, server, ca, ttl)
	return g.Kubeconfig, g.Token, err
}

// Grant is a kubeconfig for a namespace's account, its token, and when
// the token expires.
type Grant struct {
	Kubeconfig []byte
	Token      string
	// Expires is the token's own expiry as the API server issued it
	// (status.expirationTimestamp), which may be earlier than asked: the
	// server caps tokens at --service-account-max-token-expiration.
	Expires time.Time
}

// Issue is Access, with the token's expiry.
func Issue(ctx context.Context, kube kubernetes.Interface, namespace, server string, ca []byte, ttl time.Duration) (Grant, error) {
	ttl = max(ttl, minTokenTTL)
	tr, err := kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, podspec.NamespaceAccount, &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(ttl / time.Second))},
	}, metav1.CreateOptions{FieldManager: managed.ManagedByValue})
	if err != nil {
		return Grant{}, fmt.Errorf("requesting a token for service account %s/%s: %w", namespace, podspec.NamespaceAccount, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubeplay"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["kubeplay"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["kubeplay"] = &clientcmdapi.Context{Cluster: "kubeplay", AuthInfo: "kubeplay", Namespace: namespace}
	cfg.CurrentContext = "kubeplay"
	kubeconfig, err := clientcmd.Write(*cfg)
	if err != nil {
		return Grant{}, err
	}
	return Grant{Kubeconfig: kubeconfig, Token: tr.Status.Token, Expires: tr.Status.ExpirationTimestamp.Time}, nil
}

// Delete deletes a namespace kubeplay made, a run's or a group's, and
// waits, watching, until it is gone; the namespace controller removes what
// is in it first. Only a namespace that carries kubeplay's labels and the
// pairs kv (such as the group's label) is deleted, with a UID precondition
// from the read: one of that name that kubeplay did not make, or that was
// replaced in between, is left alone.
func Delete(ctx context.Context, kube kubernetes.Interface, name string, kv ...string) error {
	nss := kube.CoreV1().Namespaces()
	deleted, err := managed.DeleteOwned(ctx, nss, name, kv...)
	if err != nil || !deleted {
		return err
	}
	return waitfor.Gone(ctx, waitfor.Named(nss, name), &corev1.Namespace{})
}

// Expired reports whether ns is a run namespace whose run is past its deadline.
func Expired(ns *corev1.Namespace, now time.Time) bool {
	d, err := time.Parse(time.RFC3339, ns.Annotations[managed.AnnotationDeadline])
	return err == nil && now.After(d)
}
