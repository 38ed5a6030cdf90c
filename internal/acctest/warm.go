// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package acctest

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/waitfor"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/warmpool"
)

// WaitPods lists the pods of ns that selector selects until done says so
// of the list (see waitfor.Lists).
func WaitPods(ctx context.Context, kube kubernetes.Interface, ns, selector string, done func([]corev1.Pod) bool) ([]corev1.Pod, error) {
	list, err := waitfor.Lists(ctx, kube.CoreV1().Pods(ns), metav1.ListOptions{LabelSelector: selector},
		func(l *corev1.PodList) (bool, error) { return done(l.Items), nil })
	if list == nil {
		return nil, err
	}
	return list.Items, err
}

// WaitWarmReady waits until the group's warm pools hold at least n ready
// pods and none starting.
func WaitWarmReady(t testing.TB, kube kubernetes.Interface, ns, group string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pods, err := WaitPods(ctx, kube, ns, warmpool.GroupSelector(group), func(pods []corev1.Pod) bool {
		c := warmpool.Tally(pods)
		return c.Ready >= n && c.Starting == 0
	})
	if err != nil {
		t.Fatalf("group %s did not get %d ready warm pods: %+v (%v)", group, n, warmpool.Tally(pods), err)
	}
}
