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

	"github.com/kubeplay/terraform-provider-kubeplay/internal/warmpool"
)

// WaitPods lists the pods of ns that selector selects until done says so
// of the list, watching between lists from the list's resourceVersion, so
// that no change is missed; it gives the last list, with ctx's error when
// ctx ended first.
func WaitPods(ctx context.Context, kube kubernetes.Interface, ns, selector string, done func([]corev1.Pod) bool) ([]corev1.Pod, error) {
	pods := kube.CoreV1().Pods(ns)
	for {
		list, err := pods.List(context.WithoutCancel(ctx), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return nil, err
		}
		if done(list.Items) {
			return list.Items, nil
		}
		w, err := pods.Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: list.ResourceVersion})
		if err != nil {
			return list.Items, err
		}
		select {
		case <-w.ResultChan():
			w.Stop()
		case <-ctx.Done():
			w.Stop()
			return list.Items, ctx.Err()
		}
	}
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
