// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package warmpool

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
)

func runPod() *corev1.Pod {
	p := podspec.DefaultPod("ns", "img:1")
	p.GenerateName = "kubeplay-run-"
	p.Labels = map[string]string{managed.LabelManagedBy: managed.ManagedByValue, managed.LabelContainerGroup: "g", managed.LabelRun: "abc"}
	p.Spec.ActiveDeadlineSeconds = ptr.To[int64](600)
	return p
}

func TestRevisionIgnoresMetadataAndDeadline(t *testing.T) {
	a, b := runPod(), runPod()
	b.Labels = map[string]string{"other": "x"}
	b.Annotations = map[string]string{"a": "b"}
	b.Spec.ActiveDeadlineSeconds = ptr.To[int64](5)
	if Revision(a) != Revision(b) {
		t.Errorf("revisions differ for pods that differ only in metadata and deadline")
	}
	b.Spec.Containers[0].Image = "img:2"
	if Revision(a) == Revision(b) {
		t.Errorf("revisions equal for pods of different images")
	}
	if got := Revision(a); len(got) != 16 || strings.Trim(got, "0123456789abcdef") != "" {
		t.Errorf("revision %q is not 16 hex digits", got)
	}
}

func TestWarmPod(t *testing.T) {
	tmpl := Template{Group: "g", Namespace: "ns", Label: "big", Pod: runPod()}
	p := tmpl.warmPod("r1")
	if p.GenerateName != podNamePrefix || p.Namespace != "ns" {
		t.Errorf("name %q/%q", p.Namespace, p.GenerateName)
	}
	want := map[string]string{managed.LabelManagedBy: managed.ManagedByValue, managed.LabelContainerGroup: "g",
		LabelRevision: "r1", managed.LabelNodeLabel: "big"}
	for k, v := range want {
		if p.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, p.Labels[k], v)
		}
	}
	if _, ok := p.Labels[managed.LabelRun]; ok {
		t.Errorf("a warm pod carries a run label")
	}
	if got := *p.Spec.ActiveDeadlineSeconds; got != int64(MaxAge/time.Second) {
		t.Errorf("deadline %d", got)
	}
	if !slices.Equal(p.Spec.Containers[0].Args, podspec.WarmWorkerArgs) {
		t.Errorf("worker args %q", p.Spec.Containers[0].Args)
	}
	// The template is left as it was.
	if tmpl.Pod.Labels[managed.LabelRun] != "abc" || !slices.Equal(tmpl.Pod.Spec.Containers[0].Args, podspec.WorkerArgs) {
		t.Errorf("warmPod changed its template")
	}
	// A user's own worker command is kept.
	tmpl.Pod.Spec.Containers[0].Args = []string{"my-agent"}
	if got := tmpl.warmPod("r1").Spec.Containers[0].Args; !slices.Equal(got, []string{"my-agent"}) {
		t.Errorf("args %q", got)
	}
	// The group's own pod has no node label.
	tmpl.Label = ""
	tmpl.Pod.Labels[managed.LabelNodeLabel] = "stale"
	if _, ok := tmpl.warmPod("r1").Labels[managed.LabelNodeLabel]; ok {
		t.Errorf("the group's own warm pod carries a node label")
	}
}

func TestSelectors(t *testing.T) {
	if got, want := (Template{Group: "g"}).selector(),
		"app.kubernetes.io/managed-by=kubeplay,kubeplay.io/container-group=g,kubeplay.io/warm-revision,!kubeplay.io/run,!kubeplay.io/node-label"; got != want {
		t.Errorf("selector %q, want %q", got, want)
	}
	if got := (Template{Group: "g", Label: "big"}).selector(); !strings.HasSuffix(got, ",kubeplay.io/node-label=big") {
		t.Errorf("selector %q", got)
	}
}

func TestReadyAndUsable(t *testing.T) {
	p := runPod()
	if Ready(p) || !usable(p) {
		t.Errorf("a pending pod: ready %v, usable %v", Ready(p), usable(p))
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "worker", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	if !Ready(p) {
		t.Errorf("a running pod is not ready")
	}
	p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	if Ready(p) || usable(p) {
		t.Errorf("a terminating pod: ready %v, usable %v", Ready(p), usable(p))
	}
	p.DeletionTimestamp = nil
	p.Status.Phase = corev1.PodPending
	p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}
	if usable(p) {
		t.Errorf("a pod that cannot pull its image is usable")
	}
	p.Status.Phase = corev1.PodSucceeded
	p.Status.ContainerStatuses = nil
	if usable(p) {
		t.Errorf("an ended pod is usable")
	}
}

// FuzzWarmPod: whatever pod a group's override renders, its warm pod is of
// the pool (group, label, revision; no run label), keeps the spec but for
// its deadline and idle worker, and leaves the template as it was.
func FuzzWarmPod(f *testing.F) {
	f.Add("spec:\n  containers:\n  - name: worker\n    env:\n    - {name: X, value: '1'}\n", "big", "g")
	f.Add("metadata:\n  labels: {kubeplay.io/run: x, kubeplay.io/node-label: y}\nspec: {activeDeadlineSeconds: 5}\n", "", "g")
	f.Add("spec:\n  containers:\n  - name: worker\n    args: [my-agent]\n", "l", "grp-1")
	f.Fuzz(func(t *testing.T, override, label, group string) {
		pod, err := podspec.RenderGroup(podspec.Group{Name: group, Namespace: "ns", Image: "img:1", Override: override})
		if err != nil || len(pod.Spec.Containers) == 0 {
			return
		}
		before := Revision(pod)
		tmpl := Template{Group: group, Namespace: "ns", Label: label, Pod: pod}
		w := tmpl.warmPod(before)
		if Revision(pod) != before {
			t.Fatalf("warmPod changed its template's spec")
		}
		if w.Labels[LabelRevision] != before || w.Labels[managed.LabelContainerGroup] != group || w.Namespace != "ns" {
			t.Fatalf("warm pod labels %v", w.Labels)
		}
		if _, ok := w.Labels[managed.LabelRun]; ok {
			t.Fatalf("a warm pod carries a run label")
		}
		if got := w.Labels[managed.LabelNodeLabel]; got != label {
			t.Fatalf("node label %q, want %q", got, label)
		}
		if w.Spec.ActiveDeadlineSeconds == nil || *w.Spec.ActiveDeadlineSeconds != int64(MaxAge/time.Second) {
			t.Fatalf("deadline %v", w.Spec.ActiveDeadlineSeconds)
		}
		// Only the deadline and the idle worker's args set a warm pod apart.
		back := w.DeepCopy()
		if slices.Equal(back.Spec.Containers[0].Args, podspec.WarmWorkerArgs) && slices.Equal(pod.Spec.Containers[0].Args, podspec.WorkerArgs) {
			back.Spec.Containers[0].Args = podspec.WorkerArgs
		}
		if Revision(back) != before {
			t.Fatalf("the warm pod's spec differs from its template's beyond deadline and worker args")
		}
	})
}

// A run takes only a warm pod whose deadline leaves room for its timeout;
// with none such the run goes cold at once instead of listing again and
// again until the pool's pods end.
func TestTakeOnlyPodsThatOutliveTheRun(t *testing.T) {
	tmpl := Template{Group: "g", Namespace: "ns", Pod: runPod(), Key: unitKey}
	warm := func(name string, age time.Duration) *corev1.Pod {
		p := tmpl.warmPod(Revision(tmpl.Pod))
		p.Name, p.UID = name, types.UID("uid-"+name)
		p.Annotations = Signatures(unitKey, tmpl.owner(Revision(tmpl.Pod)), p)
		p.Status.Phase = corev1.PodRunning
		p.Status.StartTime = &metav1.Time{Time: time.Now().Add(-age)}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		return p
	}
	kube := fake.NewClientset(warm("old", MaxAge-30*time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	claim := Claim{Labels: map[string]string{managed.LabelRun: "r"}, Timeout: time.Hour}
	got, err := Take(ctx, kube, tmpl, claim)
	if err != nil || got != nil {
		t.Fatalf("a pod with 30 min left taken for a run of 1 h: %v, %v", got, err)
	}
	if _, err := kube.CoreV1().Pods("ns").Create(ctx, warm("young", time.Minute), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err = Take(ctx, kube, tmpl, claim)
	if err != nil || got == nil || got.Name != "young" {
		t.Fatalf("the pod that outlives the run was not taken: %v, %v", got, err)
	}
	if d := *got.Spec.ActiveDeadlineSeconds; d < 3600+60 || d > 3600+62 {
		t.Errorf("claimed pod's deadline %d s, want its age (60 s) plus the run's timeout and a second", d)
	}
}
