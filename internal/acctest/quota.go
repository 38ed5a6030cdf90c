// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package acctest

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/waitfor"
)

// PodQuota creates a ResourceQuota of pods pods in ns and waits until the
// quota controller has counted it: until then admission cannot enforce it.
func PodQuota(t testing.TB, kube kubernetes.Interface, ns, name string, pods int64) {
	t.Helper()
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(pods, resource.DecimalSI)}},
	}
	if _, err := kube.CoreV1().ResourceQuotas(ns).Create(context.Background(), quota, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ResourceQuota %s/%s: %v", ns, name, err)
	}
	WaitQuota(t, kube, ns, name, func(q *corev1.ResourceQuota) bool { return q.Status.Hard.Pods().Value() == pods })
}

// WaitQuota watches ResourceQuota ns/name until cond holds of it.
func WaitQuota(t testing.TB, kube kubernetes.Interface, ns, name string, cond func(*corev1.ResourceQuota) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lw := waitfor.Named(kube.CoreV1().ResourceQuotas(ns), name)
	if _, err := waitfor.Until(ctx, lw, &corev1.ResourceQuota{}, func(ev watch.Event) (bool, error) {
		q, ok := ev.Object.(*corev1.ResourceQuota)
		return ok && ev.Type != watch.Deleted && cond(q), nil
	}); err != nil {
		t.Fatalf("waiting for ResourceQuota %s/%s: %v", ns, name, err)
	}
}
