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
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

const (
	labelManagedBy      = "app.kubernetes.io/managed-by"
	managedByValue      = "kubeplay"
	labelContainerGroup = "kubeplay.io/container-group"
)

// Limits are a group's capacity; nil or empty fields are unlimited.
type Limits struct {
	MaxConcurrentRuns *int64
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
// concurrent runs, requests.cpu and requests.memory for cores and RAM (what
// Nodepool counts), and max_resources as given. Quantities must be valid.
func Quota(group, namespace string, l Limits) (*corev1.ResourceQuota, error) {
	hard := corev1.ResourceList{}
	if l.MaxConcurrentRuns != nil {
		hard[corev1.ResourcePods] = *resource.NewQuantity(*l.MaxConcurrentRuns, resource.DecimalSI)
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
			Name:      QuotaName(group),
			Namespace: namespace,
			Labels:    map[string]string{labelManagedBy: managedByValue, labelContainerGroup: group},
		},
		Spec: corev1.ResourceQuotaSpec{Hard: hard},
	}, nil
}

// ApplyQuota creates or updates the group's quota, or deletes it when the
// limits are empty.
func ApplyQuota(ctx context.Context, kube kubernetes.Interface, group, namespace string, l Limits) error {
	if l.Empty() {
		return DeleteQuota(ctx, kube, group, namespace)
	}
	want, err := Quota(group, namespace, l)
	if err != nil {
		return err
	}
	quotas := kube.CoreV1().ResourceQuotas(namespace)
	got, err := quotas.Get(ctx, want.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = quotas.Create(ctx, want, metav1.CreateOptions{FieldManager: managedByValue})
		return err
	}
	if err != nil {
		return err
	}
	got.Labels, got.Spec = want.Labels, want.Spec
	_, err = quotas.Update(ctx, got, metav1.UpdateOptions{FieldManager: managedByValue})
	return err
}

// DeleteQuota deletes the group's quota and waits until it is gone.
func DeleteQuota(ctx context.Context, kube kubernetes.Interface, group, namespace string) error {
	name := QuotaName(group)
	quotas := kube.CoreV1().ResourceQuotas(namespace)
	if err := quotas.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	return WaitGone(ctx, listWatch(name,
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return quotas.List(ctx, o) },
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return quotas.Watch(ctx, o) }),
		&corev1.ResourceQuota{})
}

// DeleteNamespace deletes a namespace and waits, watching, until the
// cluster has finalized it.
func DeleteNamespace(ctx context.Context, kube kubernetes.Interface, name string) error {
	nss := kube.CoreV1().Namespaces()
	if err := nss.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	return WaitGone(ctx, listWatch(name,
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return nss.List(ctx, o) },
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return nss.Watch(ctx, o) }),
		&corev1.Namespace{})
}

type listFunc func(context.Context, metav1.ListOptions) (runtime.Object, error)
type watchFunc func(context.Context, metav1.ListOptions) (watch.Interface, error)

func listWatch(name string, list listFunc, w watchFunc) *cache.ListWatch {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return w(ctx, o)
		},
	}
}

// WaitGone waits until the one object lw lists no longer exists.
func WaitGone(ctx context.Context, lw cache.ListerWatcher, obj runtime.Object) error {
	gone := func(store cache.Store) (bool, error) { return len(store.List()) == 0, nil }
	_, err := watchtools.UntilWithSync(ctx, lw, obj, gone, func(ev watch.Event) (bool, error) {
		return ev.Type == watch.Deleted, nil
	})
	return err
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
		if p.Labels[labelContainerGroup] != group {
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
