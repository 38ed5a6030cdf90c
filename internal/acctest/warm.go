// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package acctest

import (
	"context"
	"fmt"
	"strings"
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
	// Generous: under the full suite on 2 cores a pod has taken over two
	// minutes to start (the sandbox, not kubeplay); DescribePods says why.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pods, err := WaitPods(ctx, kube, ns, warmpool.GroupSelector(group), func(pods []corev1.Pod) bool {
		c := warmpool.Tally(pods)
		return c.Ready >= n && c.Starting == 0
	})
	if err != nil {
		t.Fatalf("group %s did not get %d ready warm pods: %+v (%v)%s", group, n, warmpool.Tally(pods), err, DescribePods(kube, pods))
	}
}

// describeNamed is DescribePods for the pod called name.
func describeNamed(kube kubernetes.Interface, namespace, name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Sprintf("\npod %s: %v", name, err)
	}
	return DescribePods(kube, []corev1.Pod{*p})
}

// DescribePods says, for a test's failure message, why each pod that is
// not ready is not: its phase, conditions, containers' states and events.
func DescribePods(kube kubernetes.Interface, pods []corev1.Pod) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b strings.Builder
	for i := range pods {
		p := &pods[i]
		if warmpool.Ready(p) {
			continue
		}
		fmt.Fprintf(&b, "\npod %s: phase %s, node %q, created %s ago", p.Name, p.Status.Phase, p.Spec.NodeName,
			time.Since(p.CreationTimestamp.Time).Round(time.Second))
		for _, c := range p.Status.Conditions {
			if c.Status != corev1.ConditionTrue {
				fmt.Fprintf(&b, "\n  condition %s=%s %s %s", c.Type, c.Status, c.Reason, c.Message)
			}
		}
		for _, c := range p.Status.ContainerStatuses {
			switch {
			case c.State.Waiting != nil:
				fmt.Fprintf(&b, "\n  container %s waiting: %s %s", c.Name, c.State.Waiting.Reason, c.State.Waiting.Message)
			case c.State.Terminated != nil:
				fmt.Fprintf(&b, "\n  container %s terminated: %s (exit %d)", c.Name, c.State.Terminated.Reason, c.State.Terminated.ExitCode)
			}
		}
		events, err := kube.CoreV1().Events(p.Namespace).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Pod,involvedObject.name=" + p.Name})
		if err != nil {
			fmt.Fprintf(&b, "\n  events: %v", err)
			continue
		}
		for _, e := range events.Items {
			fmt.Fprintf(&b, "\n  event %s %s (x%d): %s", e.Type, e.Reason, max(e.Count, 1), e.Message)
		}
	}
	return b.String()
}
