// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

// Package capacity enforces a container group's limits with Kubernetes
// objects: a ResourceQuota for pods, cores, memory and other resources, and
// a forks ledger that runs of every Terraform process share.
package capacity

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/waitfor"
)

// Limits are a group's capacity; nil or empty fields are unlimited.
type Limits struct {
	MaxConcurrentRuns *int64
	// WarmPods is how many warm pods the group keeps; the pods quota holds
	// them beside MaxConcurrentRuns run pods, while cores, RAM and other
	// resources count them as they count run pods (Nodepool's min-ready
	// nodes count against max-cores too).
	WarmPods int64
	// MaxCores is a CPU quantity ("4", "1500m").
	MaxCores string
	// MaxRAM is in MiB.
	MaxRAM *int64
	// MaxResources maps quota resource names to quantities.
	MaxResources map[string]string
}

// Empty reports whether the limits need no quota.
func (l Limits) Empty() bool {
	return l.MaxConcurrentRuns == nil && l.MaxCores == "" && l.MaxRAM == nil && len(l.MaxResources) == 0
}

// QuotaName is the name of a group's ResourceQuota.
func QuotaName(group string) string { return "kubeplay-" + group }

// Quota renders the ResourceQuota that enforces l in namespace: pods for
// concurrent runs and warm pods, requests.cpu and requests.memory for cores and RAM (what
// Nodepool counts), and max_resources as given. Quantities must be valid.
func Quota(group, namespace string, l Limits) (*corev1.ResourceQuota, error) {
	return ownedQuota(group, namespace, l, managed.Owner{})
}

func ownedQuota(group, namespace string, l Limits, o managed.Owner) (*corev1.ResourceQuota, error) {
	hard := corev1.ResourceList{}
	if l.MaxConcurrentRuns != nil {
		hard[corev1.ResourcePods] = *resource.NewQuantity(*l.MaxConcurrentRuns+l.WarmPods, resource.DecimalSI)
	}
	if l.MaxCores != "" {
		q, err := resource.ParseQuantity(l.MaxCores)
		if err != nil {
			return nil, fmt.Errorf("max_cores %q is not a quantity", l.MaxCores)
		}
		hard[corev1.ResourceRequestsCPU] = q
	}
	if l.MaxRAM != nil {
		hard[corev1.ResourceRequestsMemory] = resource.MustParse(fmt.Sprintf("%dMi", *l.MaxRAM))
	}
	for _, k := range slices.Sorted(maps.Keys(l.MaxResources)) {
		q, err := resource.ParseQuantity(l.MaxResources[k])
		if err != nil {
			return nil, fmt.Errorf("max_resources[%q] %q is not a quantity", k, l.MaxResources[k])
		}
		hard[corev1.ResourceName(k)] = q
	}
	return &corev1.ResourceQuota{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ResourceQuota"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        QuotaName(group),
			Namespace:   namespace,
			Labels:      map[string]string{managed.LabelManagedBy: managed.ManagedByValue, managed.LabelContainerGroup: group},
			Annotations: o.Annotations(),
		},
		Spec: corev1.ResourceQuotaSpec{Hard: hard},
	}, nil
}

// ApplyQuota creates or updates the group's quota, or deletes it when the
// limits are empty. The quota is o's: one of its name that another
// definition made (by its owner id) is neither changed nor deleted; one
// from before owner ids is adopted when adopt is set.
func ApplyQuota(ctx context.Context, kube kubernetes.Interface, group, namespace string, l Limits, o managed.Owner, adopt bool) error {
	if l.Empty() {
		return DeleteQuota(ctx, kube, group, namespace, o)
	}
	want, err := ownedQuota(group, namespace, l, o)
	if err != nil {
		return err
	}
	quotas := kube.CoreV1().ResourceQuotas(namespace)
	got, err := quotas.Get(ctx, want.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = quotas.Create(ctx, want, metav1.CreateOptions{FieldManager: managed.ManagedByValue})
		return err
	}
	if err != nil {
		return err
	}
	switch managed.RelationOf(got, o, managed.LabelContainerGroup, group) {
	case managed.Mine:
	case managed.Legacy:
		if !adopt {
			return managed.OtherOwner("ResourceQuota", got, o)
		}
	default:
		if managed.Owns(got, managed.LabelContainerGroup, group) {
			return managed.OtherOwner("ResourceQuota", got, o)
		}
		return &managed.NotOwnedError{Kind: "ResourceQuota", Namespace: namespace, Name: want.Name, Labels: want.Labels}
	}
	got.Labels, got.Spec = want.Labels, want.Spec
	got.Annotations = managed.Merge(got.Annotations, want.Annotations)
	_, err = quotas.Update(ctx, got, metav1.UpdateOptions{FieldManager: managed.ManagedByValue})
	return err
}

// DeleteQuota deletes the group's quota, when it carries the group's
// ownership labels and o's owner id (managed.DeleteMine), and waits until
// it is gone. A quota of its name that kubeplay did not make, or made for
// another definition, is left alone.
func DeleteQuota(ctx context.Context, kube kubernetes.Interface, group, namespace string, o managed.Owner) error {
	quotas := kube.CoreV1().ResourceQuotas(namespace)
	deleted, err := managed.DeleteMine(ctx, quotas, QuotaName(group), o, managed.LabelContainerGroup, group)
	if err != nil || !deleted {
		return err
	}
	return waitfor.Gone(ctx, waitfor.Named(quotas, QuotaName(group)), &corev1.ResourceQuota{})
}

// NamespaceUsers describes what in namespace does not belong to group: pods
// of other workloads and other ResourceQuotas, which the group's quota would
// count or contradict. It samples at most 100 pods.
func NamespaceUsers(ctx context.Context, kube kubernetes.Interface, namespace, group string) ([]string, error) {
	var out []string
	pods, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{Limit: 100})
	if err != nil {
		return nil, err
	}
	var foreign []string
	for _, p := range pods.Items {
		if p.Labels[managed.LabelContainerGroup] != group {
			foreign = append(foreign, p.Name)
		}
	}
	if len(foreign) > 0 {
		more := ""
		if pods.Continue != "" {
			more = " or more"
		}
		out = append(out, fmt.Sprintf("%d%s pods that are not this group's runs (%s)", len(foreign), more,
			strings.Join(foreign[:min(3, len(foreign))], ", ")))
	}
	quotas, err := kube.CoreV1().ResourceQuotas(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return out, err
	}
	for _, q := range quotas.Items {
		if q.Name != QuotaName(group) {
			out = append(out, fmt.Sprintf("ResourceQuota %q", q.Name))
		}
	}
	return out, nil
}
