// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

func runPod(name, ns, group string, phase corev1.PodPhase, started time.Duration) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
			managed.LabelManagedBy: managed.ManagedByValue, managed.LabelContainerGroup: group, managed.LabelRun: name,
		}},
		Spec:   corev1.PodSpec{ActiveDeadlineSeconds: ptr.To[int64](60)},
		Status: corev1.PodStatus{Phase: phase},
	}
	if started != 0 {
		p.Status.StartTime = &metav1.Time{Time: time.Now().Add(-started)}
	}
	return p
}

func TestOrphaned(t *testing.T) {
	now := time.Now()
	terminating := runPod("t", "runs", "g", corev1.PodFailed, time.Hour)
	terminating.DeletionTimestamp = &metav1.Time{Time: now}
	noDeadline := runPod("n", "runs", "g", corev1.PodRunning, time.Hour)
	noDeadline.Spec.ActiveDeadlineSeconds = nil
	for _, c := range []struct {
		pod  *corev1.Pod
		want bool
	}{
		{runPod("failed", "runs", "g", corev1.PodFailed, time.Second), true},
		{runPod("succeeded", "runs", "g", corev1.PodSucceeded, time.Second), true},
		{runPod("expired", "runs", "g", corev1.PodRunning, 2*time.Minute), true},
		{runPod("live", "runs", "g", corev1.PodRunning, 30*time.Second), false},
		{runPod("pending", "runs", "g", corev1.PodPending, 0), false},
		{terminating, false},
		{noDeadline, false},
	} {
		if got := orphaned(c.pod, now); got != c.want {
			t.Errorf("%s: orphaned %v, want %v", c.pod.Name, got, c.want)
		}
	}
}

func TestOrphanPodsAreOnlyOurs(t *testing.T) {
	other := runPod("other-group", "runs", "h", corev1.PodFailed, time.Hour)
	unmanaged := runPod("unmanaged", "runs", "g", corev1.PodFailed, time.Hour)
	delete(unmanaged.Labels, managed.LabelManagedBy)
	noRun := runPod("no-run", "runs", "g", corev1.PodFailed, time.Hour)
	delete(noRun.Labels, managed.LabelRun)
	f := newFake(t, runPod("expired", "runs", "g", corev1.PodRunning, time.Hour), runPod("live", "runs", "g", corev1.PodRunning, 0),
		runPod("elsewhere", "other", "g", corev1.PodFailed, time.Hour), other, unmanaged, noRun)
	got, _, err := f.e.orphanPods(t.Context(), testGroup())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"expired"}) {
		t.Errorf("orphans %v, want [expired]", got)
	}
}

func runNamespace(name, group string, deadline time.Duration) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{
			managed.LabelManagedBy: managed.ManagedByValue, managed.LabelContainerGroup: group, managed.LabelRun: name,
		},
		Annotations: map[string]string{managed.AnnotationDeadline: time.Now().Add(deadline).UTC().Format(time.RFC3339)},
	}}
}

func TestSweepOncePerGroup(t *testing.T) {
	objs := []runtime.Object{
		runPod("a", "runs", "g", corev1.PodFailed, time.Minute), runPod("b", "runs", "g", corev1.PodRunning, time.Hour),
		runPod("live", "runs", "g", corev1.PodRunning, time.Second),
		runPod("elsewhere", "other", "g", corev1.PodFailed, time.Hour),
		runNamespace("old", "g", -time.Minute), runNamespace("young", "g", time.Hour), runNamespace("theirs", "h", -time.Minute),
	}
	f := newFake(t, objs...)
	sweeps := &once{}
	f.e.sweeps = sweeps.do
	f.e.sweep(t.Context(), testGroup(), false)
	f.e.sweep(t.Context(), testGroup(), false)
	pods, _ := f.kube.CoreV1().Pods("").List(t.Context(), metav1.ListOptions{})
	var left []string
	for _, p := range pods.Items {
		left = append(left, p.Namespace+"/"+p.Name)
	}
	slices.Sort(left)
	if !slices.Equal(left, []string{"other/elsewhere", "runs/live"}) {
		t.Errorf("pods left %v", left)
	}
	if sweeps.runs != 1 || f.count("list", "namespaces") != 0 {
		t.Errorf("%d sweeps, %d namespace lists: want 1 and none without a namespace label", sweeps.runs, f.count("list", "namespaces"))
	}
	// A namespace label's runs sweep namespaces too, once.
	f.e.sweep(t.Context(), testGroup(), true)
	f.e.sweep(t.Context(), testGroup(), true)
	nss, _ := f.kube.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
	left = nil
	for _, ns := range nss.Items {
		left = append(left, ns.Name)
	}
	slices.Sort(left)
	if !slices.Equal(left, []string{"theirs", "young"}) {
		t.Errorf("namespaces left %v", left)
	}
	if sweeps.runs != 2 {
		t.Errorf("%d sweeps, want 2", sweeps.runs)
	}
}
