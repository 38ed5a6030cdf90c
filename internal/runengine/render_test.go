// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podsecurity"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
)

func testGroup() Group {
	return Group{Name: "g", Namespace: "runs", Pod: podspec.Group{Image: "img:1", Labels: map[string]string{"team": "a"}}}
}

func TestRenderPodGroupOnly(t *testing.T) {
	pod, err := RenderPod(testGroup(), nil, RunInfo{ID: "abc"}, 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if pod.GenerateName != "kubeplay-run-" || pod.Namespace != "runs" {
		t.Errorf("generateName %q, namespace %q", pod.GenerateName, pod.Namespace)
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g == nil || *g != 1 {
		t.Errorf("grace period %v, want 1", g)
	}
	if d := pod.Spec.ActiveDeadlineSeconds; d == nil || *d != 90 {
		t.Errorf("activeDeadlineSeconds %v, want 90", d)
	}
	if pod.Annotations == nil {
		t.Error("annotations are nil")
	}
	if pod.Labels[managed.LabelContainerGroup] != "g" || pod.Labels["team"] != "a" {
		t.Errorf("labels %v", pod.Labels)
	}
	if _, ok := pod.Labels[managed.LabelRun]; ok {
		t.Error("the rendered pod carries the run label")
	}
	if _, ok := pod.Labels[managed.LabelNodeLabel]; ok {
		t.Error("a pod without node label carries the node-label label")
	}
	if c := pod.Spec.Containers[0]; c.Name != podspec.WorkerContainer || c.Image != "img:1" {
		t.Errorf("first container %s %s", c.Name, c.Image)
	}
}

// TestPodDeadline: the pod's deadline ends after the run's timeout, which
// the kubelet's whole-second startTime could otherwise precede.
func TestPodDeadline(t *testing.T) {
	for timeout, want := range map[time.Duration]time.Duration{
		20 * time.Second: 22 * time.Second, 19100 * time.Millisecond: 22 * time.Second,
		time.Nanosecond: 3 * time.Second, 30 * time.Minute: 30*time.Minute + 2*time.Second,
	} {
		if got := PodDeadline(timeout); got != want {
			t.Errorf("PodDeadline(%s) = %s, want %s", timeout, got, want)
		}
	}
}

func TestRenderPodKeepsOverriddenGracePeriod(t *testing.T) {
	g := testGroup()
	g.Pod.Override = "spec:\n  terminationGracePeriodSeconds: 7\n"
	pod, err := RenderPod(g, nil, RunInfo{}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if *pod.Spec.TerminationGracePeriodSeconds != 7 {
		t.Errorf("grace period %d, want the override's 7", *pod.Spec.TerminationGracePeriodSeconds)
	}
}

func TestRenderPodPlaceholders(t *testing.T) {
	l := &podspec.Label{Name: "big", Type: podspec.TypePod, DynamicLabels: map[string]string{
		"id": "{run.id}", "who": "{run.name}-{run.group}-{run.label}",
	}}
	pod, err := RenderPod(testGroup(), l, RunInfo{ID: "0123", Name: "deploy"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if pod.Labels["id"] != "0123" || pod.Labels["who"] != "deploy-g-big" {
		t.Errorf("dynamic labels %v", pod.Labels)
	}
	if pod.Labels[managed.LabelNodeLabel] != "big" {
		t.Errorf("node-label label %q", pod.Labels[managed.LabelNodeLabel])
	}
	// At plan time the id is not chosen yet.
	if _, err := RenderPod(testGroup(), l, RunInfo{Name: "deploy"}, time.Minute); !errors.Is(err, ErrRenderAtApply) {
		t.Errorf("planning with {run.id}: %v, want ErrRenderAtApply", err)
	}
	delete(l.DynamicLabels, "id")
	if _, err := RenderPod(testGroup(), l, RunInfo{Name: "deploy"}, time.Minute); err != nil {
		t.Errorf("planning without {run.id}: %v", err)
	}
}

func TestRenderPodVerbatimSpec(t *testing.T) {
	l := &podspec.Label{Name: "custom", Type: podspec.TypePod, Spec: "containers:\n  - name: main\n    image: busybox\n"}
	pod, err := RenderPod(testGroup(), l, RunInfo{ID: "x"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.Containers[0].Name != "main" {
		t.Errorf("first container %q, want the spec's main", pod.Spec.Containers[0].Name)
	}
	if pod.Labels[managed.LabelContainerGroup] != "g" || *pod.Spec.ActiveDeadlineSeconds != 60 {
		t.Errorf("the group's metadata or the deadline is lost: %v %d", pod.Labels, *pod.Spec.ActiveDeadlineSeconds)
	}
}

func TestRenderPodNamespaceLabel(t *testing.T) {
	l := &podspec.Label{Name: "sandbox", Type: podspec.TypeNamespace}
	pod, err := RenderPod(testGroup(), l, RunInfo{ID: "x"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if pod.Labels[managed.LabelNodeLabel] != "sandbox" || pod.Spec.Containers[0].Image != "img:1" {
		t.Errorf("pod %v %s", pod.Labels, pod.Spec.Containers[0].Image)
	}
	if namespaceLabel(l) != l || namespaceLabel(&podspec.Label{Type: podspec.TypePod}) != nil || namespaceLabel(nil) != nil {
		t.Error("namespaceLabel")
	}
}

func TestRenderPodErrorsAreGroupUnavailable(t *testing.T) {
	g := testGroup()
	g.Pod.Override = "spec: [not, a, map]"
	_, err := RenderPod(g, nil, RunInfo{ID: "x"}, time.Minute)
	if !errors.Is(err, ErrGroupUnavailable) || !strings.HasPrefix(err.Error(), `container group "g": `) {
		t.Errorf("bad override: %v", err)
	}
	l := &podspec.Label{Name: "bad", Type: podspec.TypePod, DynamicLabels: map[string]string{"x": "{run.nope}"}}
	_, err = RenderPod(testGroup(), l, RunInfo{ID: "x"}, time.Minute)
	if !errors.Is(err, ErrGroupUnavailable) || !strings.HasPrefix(err.Error(), `node label "bad": `) {
		t.Errorf("bad label: %v", err)
	}
}

func TestGroupPending(t *testing.T) {
	if p := (Group{}).pending(); p != DefaultPendingTimeout {
		t.Errorf("unset: %s", p)
	}
	if p := (Group{PendingTimeout: -time.Second}).pending(); p != DefaultPendingTimeout {
		t.Errorf("negative: %s", p)
	}
	if p := (Group{PendingTimeout: time.Second}).pending(); p != time.Second {
		t.Errorf("set: %s", p)
	}
}

func TestSecrets(t *testing.T) {
	// Numbers as a playbook prints them, strings raw and JSON-escaped; nothing
	// under 3 bytes, no booleans or nulls.
	got := Secrets(testBundle(`{"a": "sec1", "n": 12345678, "l": ["sec2", {"b": "q\"uote"}], "t": true, "z": null, "s": "ab"}`,
		map[string]string{"TOKEN": "sec4"}))
	slices.Sort(got)
	if want := []string{"12345678", `q"uote`, `q\"uote`, "sec1", "sec2", "sec4"}; !slices.Equal(got, want) {
		t.Errorf("secrets %q, want %q", got, want)
	}
	if got := Secrets(testBundle("not json", nil)); !slices.Equal(got, []string{"not json"}) {
		t.Errorf("a document that is not JSON: %q", got)
	}
	if got := Secrets(testBundle("", nil)); len(got) != 0 {
		t.Errorf("no secrets: %q", got)
	}
}

// The group's level holds the group's pod and each label's composition;
// the error says which of them fails and every failed check.
func TestRenderPodSecurity(t *testing.T) {
	priv := &podspec.Label{Name: "priv", Type: podspec.TypePod, Privileged: ptr.To(true)}
	host := &podspec.Label{Name: "host", Type: podspec.TypePod,
		Spec: "containers: [{name: w, image: busybox}]\nvolumes: [{name: root, hostPath: {path: /}}]\n"}
	hostNet := testGroup()
	hostNet.Pod.Override = "spec:\n  hostNetwork: true\n"
	restricted := testGroup()
	restricted.PodSecurityLevel = podsecurity.Restricted
	permissive := testGroup()
	permissive.PodSecurityLevel = podsecurity.Privileged
	permissive.Pod.Override = hostNet.Pod.Override
	tests := []struct {
		name   string
		g      Group
		l      *podspec.Label
		label  string // the PodSecurityError's Label; "-" for no error
		reason string
	}{
		{"default pod", testGroup(), nil, "-", ""},
		{"privileged label at baseline", testGroup(), priv, "priv", "privileged"},
		{"hostPath label at baseline", testGroup(), host, "host", "hostPath volumes"},
		{"hostNetwork override at baseline", hostNet, nil, "", "host namespaces"},
		{"hostNetwork override with a label", hostNet, priv, "", "host namespaces"},
		{"root pod at restricted", restricted, nil, "", "runAsNonRoot != true"},
		{"everything at privileged", permissive, priv, "-", ""},
		{"host label at privileged", permissive, host, "-", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := RenderPod(tt.g, tt.l, RunInfo{ID: "abc"}, time.Minute)
			if tt.label == "-" {
				if err != nil {
					t.Fatalf("RenderPod: %v", err)
				}
				return
			}
			var pe *PodSecurityError
			if !errors.As(err, &pe) || pe.Group != "g" || pe.Label != tt.label {
				t.Fatalf("RenderPod: %#v, want a *PodSecurityError of label %q", err, tt.label)
			}
			if errors.Is(err, ErrGroupUnavailable) {
				t.Error("a pod security failure matches ErrGroupUnavailable")
			}
			if !slices.ContainsFunc(pe.Err.Violations, func(v podsecurity.Violation) bool { return v.Reason == tt.reason }) ||
				!strings.Contains(err.Error(), tt.reason) {
				t.Errorf("violations %v (%v), want %q", pe.Err.Violations, err, tt.reason)
			}
		})
	}
	bad := testGroup()
	bad.PodSecurityLevel = "none"
	if _, err := RenderPod(bad, nil, RunInfo{}, time.Minute); !errors.Is(err, podsecurity.ErrInvalidLevel) || !errors.Is(err, ErrGroupUnavailable) {
		t.Errorf("invalid level: %v", err)
	}
}
