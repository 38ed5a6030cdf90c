// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package warmpool_test

import (
	"context"
	"maps"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/waitfor"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/warmpool"
)

// impostorImage is another image than the runner's: the cluster's pause
// image, which runs and does nothing.
const impostorImage = "kubeplay.test/pause:v1"

// TestAccTakeRefusesImpostor: someone who may create pods in the group's
// namespace copies a ready warm pod's labels and annotations (its
// signatures too) onto a running pod of another image. A run claims the
// real warm pod, the next run finds the pool empty and goes cold, and the
// impostor is never claimed; fills neither count it nor delete it, nor
// does a drain.
func TestAccTakeRefusesImpostor(t *testing.T) {
	kube, ns := testEnv(t)
	ctx := context.Background()
	var (
		mu      sync.Mutex
		refused = map[string]bool{}
	)
	tmpl := keyed(template(ns, acctest.TestImage()), func(r *warmpool.RefusedError) {
		mu.Lock()
		defer mu.Unlock()
		refused[r.Name] = !r.Ours
	})
	if n, err := warmpool.Fill(ctx, kube, tmpl, 1); err != nil || n != 1 {
		t.Fatalf("fill: %d, %v", n, err)
	}
	acctest.WaitWarmReady(t, kube, ns, "g", 1)
	pods := kube.CoreV1().Pods(ns)
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: warmpool.GroupSelector("g")})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("listing the warm pod: %v", err)
	}
	warm := list.Items[0]

	impostor := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "claim-impostor", Namespace: ns,
			Labels: maps.Clone(warm.Labels), Annotations: maps.Clone(warm.Annotations)},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{Name: warm.Spec.Containers[0].Name, Image: impostorImage,
				Command: []string{"/pause"}, ImagePullPolicy: corev1.PullIfNotPresent, Resources: acctest.HelperResources()}},
		},
	}
	impostor, err = pods.Create(ctx, impostor, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = pods.Delete(context.Background(), impostor.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	}()
	// As generous as WaitWarmReady: on CI's 2 cores under the full suite a
	// pod's sandbox has taken over a minute to start.
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if _, err := waitfor.Until(wctx, waitfor.Named(pods, impostor.Name), &corev1.Pod{}, func(ev watch.Event) (bool, error) {
		p, ok := ev.Object.(*corev1.Pod)
		return ok && warmpool.Ready(p), nil
	}); err != nil {
		var seen []corev1.Pod
		if p, gerr := pods.Get(ctx, impostor.Name, metav1.GetOptions{}); gerr == nil {
			seen = append(seen, *p)
		}
		t.Fatalf("the impostor did not run: %v%s", err, acctest.DescribePods(kube, seen))
	}

	claim := func(run string) *corev1.Pod {
		t.Helper()
		p, err := warmpool.Take(ctx, kube, tmpl, warmpool.Claim{
			Labels: managed.Labels(managed.LabelContainerGroup, "g", managed.LabelRun, run), Timeout: time.Minute})
		if err != nil {
			t.Fatalf("take: %v", err)
		}
		return p
	}
	// Of a real warm pod and the impostor, both ready, the run gets the real one.
	if got := claim("r1"); got == nil || got.UID != warm.UID {
		t.Fatalf("the first run claimed %v, want the warm pod %s", podName(got), warm.Name)
	}
	// Only the impostor is left: the next run goes cold.
	if got := claim("r2"); got != nil {
		t.Fatalf("the second run claimed pod %s, want none (the impostor is not kubeplay's)", got.Name)
	}
	mu.Lock()
	if !refused[impostor.Name] {
		t.Errorf("the impostor was not reported as refused: %v", refused)
	}
	mu.Unlock()

	// A fill makes a pod of its own beside the impostor and leaves it; so does a drain.
	if n, err := warmpool.Fill(ctx, kube, tmpl, 1); err != nil || n != 1 {
		t.Errorf("a fill beside the impostor: %d created, %v; want 1", n, err)
	}
	if c, err := count(ctx, kube, ns); err != nil || c.Ready+c.Starting != 1 {
		t.Errorf("the pool counts %+v (%v), want 1: the impostor is not counted", c, err)
	}
	if err := drain(ctx, kube, ns); err != nil {
		t.Errorf("drain: %v", err)
	}
	p, err := pods.Get(ctx, impostor.Name, metav1.GetOptions{})
	switch {
	case err != nil:
		t.Fatalf("the impostor is gone: %v", err)
	case p.DeletionTimestamp != nil || p.Labels[managed.LabelRun] != "" || p.UID != impostor.UID:
		t.Fatalf("kubeplay claimed or deleted the impostor: labels %v, deleting %v", p.Labels, p.DeletionTimestamp)
	}
}

func podName(p *corev1.Pod) string {
	if p == nil {
		return "none"
	}
	return "pod " + p.Name
}
