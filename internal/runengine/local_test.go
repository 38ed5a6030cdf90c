// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"context"
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/warmpool"
)

func pythonLabel() *podspec.Label {
	return &podspec.Label{Name: "py", Type: podspec.TypePod, PythonPath: "/usr/bin/python3.11", ShellType: "sh",
		Env: []podspec.EnvVar{{Name: "A", Value: "1"}, {Name: EnvPythonPath, Value: "/set/by/env"}}}
}

// A run's bundle gets its node label's settings for Ansible on the pod; a
// run without a label, or of a namespace label, gets none.
func TestRunLocalFromLabel(t *testing.T) {
	ns := &podspec.Label{Name: "ns", Type: podspec.TypeNamespace, PythonPath: "/ignored"}
	for _, c := range []struct {
		label *podspec.Label
		want  bundle.Local
	}{
		{pythonLabel(), bundle.Local{PythonPath: "/usr/bin/python3.11", ShellType: "sh"}},
		{nil, bundle.Local{}},
		{ns, bundle.Local{}},
	} {
		if got := LabelLocal(c.label); got != c.want {
			t.Errorf("LabelLocal(%+v) = %+v, want %+v", c.label, got, c.want)
		}
	}
	f := newFake(t)
	var got runner.Spec
	f.e.run = func(_ context.Context, s runner.Spec) runner.Result {
		got = s
		return runner.Result{Status: runner.StatusSuccessful}
	}
	req := request(testGroup())
	req.Label = pythonLabel()
	req.Bundle.Local = bundle.Local{PythonPath: "/from/the/caller"}
	if _, err := f.e.Run(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if want := (bundle.Local{PythonPath: "/usr/bin/python3.11", ShellType: "sh"}); got.Bundle.Local != want {
		t.Errorf("the run's bundle has %+v, want %+v", got.Bundle.Local, want)
	}
	// The run pod itself is as the plan renders it: the settings are in the bundle only.
	if env := got.Pod.Spec.Containers[0].Env; slices.ContainsFunc(env, func(e corev1.EnvVar) bool { return e.Name == EnvShellType }) {
		t.Errorf("the run pod carries %s: %v", EnvShellType, env)
	}
}

// A held node's pod carries its label's settings in its signed spec, in
// place of an env var of the same name; its runs take them from there, and
// a pod whose settings were changed since is refused with the rest of its
// spec.
func TestHeldNodeLocal(t *testing.T) {
	pod, err := NodePod(testGroup(), pythonLabel(), "py-node")
	if err != nil {
		t.Fatal(err)
	}
	env := pod.Spec.Containers[0].Env
	want := []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: EnvPythonPath, Value: "/usr/bin/python3.11"}, {Name: EnvShellType, Value: "sh"}}
	if !slices.Equal(env, want) {
		t.Fatalf("the node's env %v, want %v", env, want)
	}
	if l := PodLocal(pod); l != (bundle.Local{PythonPath: "/usr/bin/python3.11", ShellType: "sh"}) {
		t.Errorf("PodLocal = %+v", l)
	}
	plain, err := NodePod(testGroup(), nil, "plain")
	if err != nil {
		t.Fatal(err)
	}
	if l := PodLocal(plain); l != (bundle.Local{}) || len(plain.Spec.Containers[0].Env) != 0 {
		t.Errorf("a node without a label: %+v, env %v", l, plain.Spec.Containers[0].Env)
	}

	pod.UID = types.UID("uid-py-node")
	pod.Annotations = warmpool.Signatures(nodeKey, nodeOwner(testGroup(), pod), pod)
	pod.Status.Phase = corev1.PodRunning
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: pod.Spec.Containers[0].Name,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	edited := pod.DeepCopy()
	edited.Spec.Containers[0].Env[1].Value = "/tmp/evil"
	var r *warmpool.RefusedError
	if err := warmpool.Verify(nodeKey, nodeOwner(testGroup(), edited), edited); !errors.As(err, &r) || !r.Ours {
		t.Errorf("a node whose python path was changed: %v", err)
	}

	f := newFake(t, pod)
	f.withKey(nodeKey)
	var got runner.Spec
	f.e.run = func(_ context.Context, s runner.Spec) runner.Result {
		got = s
		return runner.Result{Status: runner.StatusSuccessful}
	}
	req := request(testGroup())
	req.Node = "py-node"
	if _, err := f.e.Run(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if got.Claimed == nil || !got.Held || got.Bundle.Local != PodLocal(pod) {
		t.Errorf("a run on the node: claimed %v, held %v, local %+v", got.Claimed != nil, got.Held, got.Bundle.Local)
	}
}
