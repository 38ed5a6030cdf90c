// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package acctest

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/warmpool"
)

// WaitWarmReady waits, watching the namespace's pods, until the group's
// warm pools hold at least n ready pods and none starting.
func WaitWarmReady(t testing.TB, kube kubernetes.Interface, ns, group string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pods := kube.CoreV1().Pods(ns)
	sel := metav1.ListOptions{LabelSelector: warmpool.GroupSelector(group)}
	for {
		// The watch starts at the list that was counted: no change is missed.
		list, err := pods.List(ctx, sel)
		if err != nil {
			t.Fatal(err)
		}
		c := warmpool.Tally(list.Items)
		if c.Ready >= n && c.Starting == 0 {
			return
		}
		w, err := pods.Watch(ctx, metav1.ListOptions{LabelSelector: sel.LabelSelector, ResourceVersion: list.ResourceVersion})
		if err != nil {
			t.Fatalf("watching the warm pool: %v", err)
		}
		select {
		case <-w.ResultChan():
			w.Stop()
		case <-ctx.Done():
			w.Stop()
			t.Fatalf("group %s did not get %d ready warm pods: %+v", group, n, c)
		}
	}
}
