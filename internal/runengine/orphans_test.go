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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalogkey"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/warmpool"
)

// runPod is a run pod as kubeplay makes it: signed with nodeKey.
func runPod(name, ns, group string, phase corev1.PodPhase, started time.Duration) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + ns + "-" + name), Labels: map[string]string{
			managed.LabelManagedBy: managed.ManagedByValue, managed.LabelContainerGroup: group, managed.LabelRun: name,
		}},
		Spec:   corev1.PodSpec{ActiveDeadlineSeconds: ptr.To[int64](60)},
		Status: corev1.PodStatus{Phase: phase},
	}
	p.Annotations = map[string]string{warmpool.AnnotationRunSignature: warmpool.RunSignature(nodeKey, p)}
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
	f.withKey(nodeKey)
	got, _, err := f.e.orphanPods(t.Context(), testGroup())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"expired"}) {
		t.Errorf("orphans %v, want [expired]", got)
	}
}

// TestOrphanPodsOnlySigned: labels can be copied onto any pod, so the sweep
// deletes only ended run pods whose run signature holds: under the catalog
// key, or a previous one after a rotation. An unsigned pod, a copied
// signature, one moved to another group or run, or one signed with a key
// kubeplay does not know is left; without a key nothing is deleted.
func TestOrphanPodsOnlySigned(t *testing.T) {
	old, _ := catalogkey.New([]byte("kubeplay-runengine-previous-key-0001"))
	current, _ := catalogkey.New([]byte("kubeplay-runengine-unit-test-key!!"))
	ring, err := catalogkey.NewSource(nil, "", []byte("kubeplay-runengine-unit-test-key!!"))
	if err != nil {
		t.Fatal(err)
	}
	if ring, err = ring.WithPrevious([][]byte{[]byte("kubeplay-runengine-previous-key-0001")}); err != nil {
		t.Fatal(err)
	}
	withPrevious, err := ring.Key(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	signed := runPod("signed", "runs", "g", corev1.PodFailed, time.Hour)
	unsigned := runPod("unsigned", "runs", "g", corev1.PodFailed, time.Hour)
	delete(unsigned.Annotations, warmpool.AnnotationRunSignature)
	copied := runPod("copied", "runs", "g", corev1.PodSucceeded, time.Hour)
	copied.Annotations = signed.Annotations
	otherRun := runPod("other-run", "runs", "g", corev1.PodFailed, time.Hour)
	otherRun.Labels[managed.LabelRun] = "changed"
	stranger := runPod("stranger", "runs", "g", corev1.PodFailed, time.Hour)
	strangerKey, _ := catalogkey.New([]byte("someone-else's-key-of-32-bytes-or-more"))
	stranger.Annotations[warmpool.AnnotationRunSignature] = warmpool.RunSignature(strangerKey, stranger)
	before := runPod("before-rotation", "runs", "g", corev1.PodFailed, time.Hour)
	before.Annotations[warmpool.AnnotationRunSignature] = warmpool.RunSignature(old, before)
	pods := []runtime.Object{signed, unsigned, copied, otherRun, stranger, before}

	f := newFake(t, pods...)
	if got, _, err := f.e.orphanPods(t.Context(), testGroup()); err == nil || len(got) != 0 {
		t.Errorf("without a key: orphans %v, %v; want none and an error", got, err)
	}
	f.withKey(current)
	got, _, err := f.e.orphanPods(t.Context(), testGroup())
	if err != nil || !slices.Equal(got, []string{"signed"}) {
		t.Errorf("orphans %v, %v; want [signed]", got, err)
	}
	f.withKey(withPrevious)
	got, _, _ = f.e.orphanPods(t.Context(), testGroup())
	slices.Sort(got)
	if !slices.Equal(got, []string{"before-rotation", "signed"}) {
		t.Errorf("with the previous key: orphans %v, want [before-rotation signed]", got)
	}
	// The sweep itself leaves the pods it does not delete.
	f.e.sweep(t.Context(), testGroup(), false)
	list, _ := f.kube.CoreV1().Pods("runs").List(t.Context(), metav1.ListOptions{})
	var left []string
	for _, p := range list.Items {
		left = append(left, p.Name)
	}
	slices.Sort(left)
	if !slices.Equal(left, []string{"copied", "other-run", "stranger", "unsigned"}) {
		t.Errorf("pods left by the sweep %v", left)
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
	f.withKey(nodeKey)
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
