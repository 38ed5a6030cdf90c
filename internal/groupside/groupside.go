// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

// Package groupside provisions what a container group needs on the cluster
// its runs execute in: its namespace when it manages one, its ResourceQuota
// and its forks and runs ledgers. It also says which of them are gone, what
// else shares the namespace, and removes them when the group goes.
package groupside

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/capacity"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podsecurity"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/waitfor"
)

// Spec is what provisioning needs to know of a group.
type Spec struct {
	Name            string
	Namespace       string
	ManageNamespace bool
	Limits          capacity.Limits
	MaxForks        *int64
	// PodSecurityLevel is enforced on a managed namespace by the API
	// server's PodSecurity admission; "" is podsecurity.Default.
	PodSecurityLevel string
	// Owner is the group's definition; every object the group provisions
	// carries its owner id, and only objects with that id are changed or
	// deleted (Owner.ID "" is a definition from before owner ids, which
	// owns what carries none). Adopt lets Ensure take over objects of the
	// group's labels that carry no owner id: once, as it writes its id.
	Owner managed.Owner
	Adopt bool
}

// namespaceLabels are the labels of a managed namespace: the group's, and
// the PodSecurity admission plugin's enforce labels at the group's level.
func (s Spec) namespaceLabels() map[string]string {
	return managed.Merge(managed.Labels(managed.LabelContainerGroup, s.Name), podsecurity.NamespaceLabels(s.PodSecurityLevel))
}

// needsNamespace: the quota or a ledger lives in the namespace.
func (s Spec) needsNamespace() bool { return !s.Limits.Empty() || s.MaxForks != nil }

// podsOnly: the group manages nothing but run pods, which seed 001's
// pod-manager Role allows though it may not read namespaces, quotas or
// ConfigMaps.
func (s Spec) podsOnly() bool { return !s.ManageNamespace && !s.needsNamespace() }

// Operations that fail, for errors.
const (
	OpRead   = "reading"
	OpCreate = "creating"
	OpWrite  = "writing"
	OpDelete = "deleting"
)

// NamespaceExistsError: a managed namespace exists and was not created by
// kubeplay for a group of this name; kubeplay does not adopt it, since it
// would delete it. A namespace kubeplay made for another definition of the
// name gives a *managed.OwnedByOtherError instead.
type NamespaceExistsError struct{ Namespace, Group string }

func (e *NamespaceExistsError) Error() string {
	return fmt.Sprintf("namespace %q exists and was not created by container group %q", e.Namespace, e.Group)
}

// NamespaceMissingError: the namespace does not exist and the group's quota
// or ledgers need it.
type NamespaceMissingError struct{ Namespace string }

func (e *NamespaceMissingError) Error() string {
	return fmt.Sprintf("namespace %q does not exist", e.Namespace)
}

// NamespaceError: reading, creating or deleting the namespace failed.
type NamespaceError struct {
	Op        string
	Namespace string
	Err       error
}

func (e *NamespaceError) Error() string {
	return fmt.Sprintf("%s namespace %q: %v", e.Op, e.Namespace, e.Err)
}

func (e *NamespaceError) Unwrap() error { return e.Err }

// QuotaError: writing or deleting the group's ResourceQuota failed.
type QuotaError struct {
	Op              string
	Namespace, Name string
	Err             error
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("%s ResourceQuota %s/%s: %v", e.Op, e.Namespace, e.Name, e.Err)
}

func (e *QuotaError) Unwrap() error { return e.Err }

// LedgerError: writing or deleting a ledger failed. Kind is capacity.Forks
// or capacity.Runs.
type LedgerError struct {
	Op              string
	Kind            string
	Namespace, Name string
	Err             error
}

func (e *LedgerError) Error() string {
	return fmt.Sprintf("%s the %s ledger ConfigMap %s/%s: %v", e.Op, e.Kind, e.Namespace, e.Name, e.Err)
}

func (e *LedgerError) Unwrap() error { return e.Err }

// Outcome says how Ensure went when it did not fail.
type Outcome int

const (
	// Ready: the namespace exists with what the group needs in it.
	Ready Outcome = iota
	// PodsOnly: the credential may not read the namespace, and the group
	// needs nothing there but run pods; nothing was checked.
	PodsOnly
	// NamespaceAbsent: the namespace does not exist, which only its runs
	// need: they fail until it does.
	NamespaceAbsent
)

// Ensure creates or checks the namespace, then sets the quota and the
// ledgers to match s. Errors are *NamespaceExistsError,
// *managed.OwnedByOtherError, *NamespaceMissingError, *NamespaceError,
// *QuotaError or *LedgerError.
func Ensure(ctx context.Context, kube kubernetes.Interface, s Spec) (Outcome, error) {
	// Objects a pods-only group does not need are left alone when the
	// credential may not touch them.
	tolerate := func(err error) error {
		if s.podsOnly() && apierrors.IsForbidden(err) {
			return nil
		}
		return err
	}
	if out, done, err := ensureNamespace(ctx, kube, s, tolerate); done || err != nil {
		return out, err
	}
	if err := tolerate(capacity.ApplyQuota(ctx, kube, s.Name, s.Namespace, s.Limits, s.Owner, s.Adopt)); err != nil {
		return Ready, &QuotaError{Op: OpWrite, Namespace: s.Namespace, Name: capacity.QuotaName(s.Name), Err: err}
	}
	for _, l := range []struct {
		kind string
		max  *int64
	}{{capacity.Forks, s.MaxForks}, {capacity.Runs, s.Limits.MaxConcurrentRuns}} {
		led := capacity.Ledger{Kube: kube, Namespace: s.Namespace, Group: s.Name, Kind: l.kind, Owner: s.Owner, Adopt: s.Adopt}
		var err error
		if l.max != nil {
			err = led.Ensure(ctx, *l.max)
		} else {
			err = tolerate(led.Delete(ctx))
		}
		if err != nil {
			return Ready, &LedgerError{Op: OpWrite, Kind: l.kind, Namespace: s.Namespace, Name: led.ConfigMapName(), Err: err}
		}
	}
	return Ready, nil
}

// ensureNamespace creates or checks the namespace; done means Ensure has
// nothing more to do.
func ensureNamespace(ctx context.Context, kube kubernetes.Interface, s Spec, tolerate func(error) error) (Outcome, bool, error) {
	nss := kube.CoreV1().Namespaces()
	ns, err := nss.Get(ctx, s.Namespace, metav1.GetOptions{})
	switch {
	case err != nil && tolerate(err) == nil:
		return PodsOnly, true, nil
	case err == nil && s.ManageNamespace:
		if err := s.mayManage(ns); err != nil {
			return Ready, true, err
		}
		if err := relabel(ctx, kube, ns, s.namespaceLabels(), s.Owner.Annotations()); err != nil {
			return Ready, true, &NamespaceError{Op: OpWrite, Namespace: s.Namespace, Err: err}
		}
		return Ready, false, nil
	case err == nil:
		return Ready, false, nil
	case !apierrors.IsNotFound(err):
		return Ready, true, &NamespaceError{Op: OpRead, Namespace: s.Namespace, Err: err}
	case s.ManageNamespace:
		_, err = nss.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.Namespace,
			Labels: s.namespaceLabels(), Annotations: s.Owner.Annotations()}}, metav1.CreateOptions{FieldManager: managed.FieldManager})
		if err != nil {
			return Ready, true, &NamespaceError{Op: OpCreate, Namespace: s.Namespace, Err: err}
		}
		return Ready, false, nil
	case s.needsNamespace():
		return Ready, true, &NamespaceMissingError{Namespace: s.Namespace}
	}
	return NamespaceAbsent, true, nil
}

// MayManage says whether the group s may manage namespace ns: nil when
// kubeplay made it for s's definition (its owner id), or for a group of
// s's name before owner ids and s adopts; else a *managed.OwnedByOtherError
// naming the owner, or a *NamespaceExistsError.
func (s Spec) mayManage(ns *corev1.Namespace) error {
	switch managed.RelationOf(ns, s.Owner, managed.LabelContainerGroup, s.Name) {
	case managed.Mine:
		return nil
	case managed.Legacy:
		if s.Adopt {
			return nil
		}
		return managed.OtherOwner("namespace", ns, s.owner())
	}
	if id, _ := managed.OwnerOf(ns); id != "" || managed.Owns(ns, managed.LabelContainerGroup, s.Name) {
		return managed.OtherOwner("namespace", ns, s.owner())
	}
	return &NamespaceExistsError{Namespace: s.Namespace, Group: s.Name}
}

// MayManage reads s's namespace and says whether s may manage it, as
// Ensure will: nil also when it does not exist (Ensure creates it) or s
// does not manage it. Plans call it, to refuse a namespace of another
// definition before anything is applied.
func MayManage(ctx context.Context, kube kubernetes.Interface, s Spec) error {
	if !s.ManageNamespace {
		return nil
	}
	ns, err := kube.CoreV1().Namespaces().Get(ctx, s.Namespace, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return &NamespaceError{Op: OpRead, Namespace: s.Namespace, Err: err}
	}
	return s.mayManage(ns)
}

// Orphan is the owner id that s's objects (its managed namespace, else
// its quota and ledgers) record when a definition of s's name in s's own
// catalog made them (managed.OrphanOf); "" when none does. A group being
// created, which its catalog does not hold yet, takes it over.
func Orphan(ctx context.Context, kube kubernetes.Interface, s Spec) string {
	kv := []string{managed.LabelContainerGroup, s.Name}
	if s.ManageNamespace {
		if ns, err := kube.CoreV1().Namespaces().Get(ctx, s.Namespace, metav1.GetOptions{}); err == nil {
			return managed.OrphanOf(ns, s.Owner, kv...)
		}
		return ""
	}
	if q, err := kube.CoreV1().ResourceQuotas(s.Namespace).Get(ctx, capacity.QuotaName(s.Name), metav1.GetOptions{}); err == nil {
		if id := managed.OrphanOf(q, s.Owner, kv...); id != "" {
			return id
		}
	}
	for _, kind := range []string{capacity.Forks, capacity.Runs} {
		led := capacity.Ledger{Namespace: s.Namespace, Group: s.Name, Kind: kind}
		if cm, err := kube.CoreV1().ConfigMaps(s.Namespace).Get(ctx, led.ConfigMapName(), metav1.GetOptions{}); err == nil {
			if id := managed.OrphanOf(cm, s.Owner, kv...); id != "" {
				return id
			}
		}
	}
	return ""
}

// owner is s.Owner, named for messages when it came without a name.
func (s Spec) owner() managed.Owner {
	o := s.Owner
	if o.Name == "" {
		o.Kind, o.Name = "container group", s.Name
	}
	return o
}

// relabel sets want and the owner's annotations on the group's own
// namespace ns, such as a changed pod security level or an adopted
// namespace's owner id, by a merge patch that keeps what it does not name.
func relabel(ctx context.Context, kube kubernetes.Interface, ns *corev1.Namespace, want, annotations map[string]string) error {
	same := true
	for k, v := range want {
		same = same && ns.Labels[k] == v
	}
	for k, v := range annotations {
		same = same && ns.Annotations[k] == v
	}
	if same {
		return nil
	}
	meta := map[string]any{"labels": want}
	if len(annotations) > 0 {
		meta["annotations"] = annotations
	}
	// The resourceVersion makes the patch fail when the namespace changed
	// since it was checked, such as by another definition's adoption.
	meta["resourceVersion"] = ns.ResourceVersion
	patch, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return err
	}
	_, err = kube.CoreV1().Namespaces().Patch(ctx, ns.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: managed.FieldManager})
	return err
}

// Missing names what s needs on the cluster and is gone, such as
// "ResourceQuota runs/kubeplay-awx"; nothing when all is there or when it
// cannot tell (a credential that may not look).
func Missing(ctx context.Context, kube kubernetes.Interface, s Spec) []string {
	var missing []string
	core := kube.CoreV1()
	ns, err := core.Namespaces().Get(ctx, s.Namespace, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && s.ManageNamespace:
		missing = append(missing, "namespace "+s.Namespace)
	case err == nil && s.ManageNamespace:
		want := podsecurity.NamespaceLabels(s.PodSecurityLevel)
		for _, k := range managed.SortedKeys(want) {
			if v := want[k]; ns.Labels[k] != v {
				missing = append(missing, fmt.Sprintf("label %s=%s of namespace %s", k, v, s.Namespace))
			}
		}
	}
	if !s.Limits.Empty() {
		name := capacity.QuotaName(s.Name)
		if _, err := core.ResourceQuotas(s.Namespace).Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			missing = append(missing, "ResourceQuota "+s.Namespace+"/"+name)
		}
	}
	if s.MaxForks != nil {
		name := capacity.LedgerName(s.Name)
		if _, err := core.ConfigMaps(s.Namespace).Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			missing = append(missing, "forks ledger "+s.Namespace+"/"+name)
		}
	}
	return missing
}

// Sharing describes what else uses s's namespace, which s's quota would
// count or contradict: the groups among others that run there (the caller
// passes the groups on the same cluster), pods of other workloads and other
// ResourceQuotas. err says the namespace could not be looked at; what was
// found until then is returned with it.
func Sharing(ctx context.Context, kube kubernetes.Interface, s Spec, others []Spec) ([]string, error) {
	var out []string
	for _, o := range others {
		if o.Name != s.Name && o.Namespace == s.Namespace {
			out = append(out, fmt.Sprintf("container group %q", o.Name))
		}
	}
	users, err := capacity.NamespaceUsers(ctx, kube, s.Namespace, s.Name)
	return append(out, users...), err
}

// Remove deletes what Ensure made: a managed namespace with everything in
// it, waiting until it is gone, or else the quota and the ledgers. Each is
// deleted only when it carries the group's ownership labels and its owner
// id, with a UID precondition from the read just before; anything else of
// those names, another definition's included, is left alone. A pods-only group made none of them, and its credential may
// lack the rights to delete them: nothing is done. Errors are as Ensure's.
func Remove(ctx context.Context, kube kubernetes.Interface, s Spec) error {
	if s.ManageNamespace {
		nss := kube.CoreV1().Namespaces()
		deleted, err := managed.DeleteMine(ctx, nss, s.Namespace, s.Owner, managed.LabelContainerGroup, s.Name)
		if err == nil && deleted {
			err = waitfor.Gone(ctx, waitfor.Named(nss, s.Namespace), &corev1.Namespace{})
		}
		if err != nil {
			return &NamespaceError{Op: OpDelete, Namespace: s.Namespace, Err: err}
		}
		return nil
	}
	if !s.needsNamespace() {
		return nil
	}
	if err := capacity.DeleteQuota(ctx, kube, s.Name, s.Namespace, s.Owner); err != nil && !apierrors.IsNotFound(err) {
		return &QuotaError{Op: OpDelete, Namespace: s.Namespace, Name: capacity.QuotaName(s.Name), Err: err}
	}
	for _, kind := range []string{capacity.Runs, capacity.Forks} {
		led := capacity.Ledger{Kube: kube, Namespace: s.Namespace, Group: s.Name, Kind: kind, Owner: s.Owner}
		if err := led.Delete(ctx); err != nil {
			return &LedgerError{Op: OpDelete, Kind: kind, Namespace: s.Namespace, Name: led.ConfigMapName(), Err: err}
		}
	}
	return nil
}
