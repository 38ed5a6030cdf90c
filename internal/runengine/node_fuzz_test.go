// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"testing"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
)

// FuzzNodePod: whatever pod a group's override renders, a held node's pod
// is named as the node, carries its node label and no run label, and has
// no deadline: it lives until the node is destroyed.
func FuzzNodePod(f *testing.F) {
	f.Add("spec: {activeDeadlineSeconds: 5}\n", "debug")
	f.Add("metadata:\n  name: other\n  generateName: x-\n  labels: {kubeplay.io/node: y, kubeplay.io/run: z}\n", "n-1")
	f.Add("spec:\n  containers:\n  - name: worker\n    args: [my-agent]\n", "a")
	f.Fuzz(func(t *testing.T, override, name string) {
		g := Group{Name: "g", Namespace: "ns", Pod: podspec.Group{Image: "img:1", Override: override}}
		pod, err := NodePod(g, nil, name)
		if err != nil {
			return
		}
		if pod.Name != name || pod.GenerateName != "" || pod.Namespace != "ns" {
			t.Fatalf("pod %s/%s (generateName %q), want ns/%s", pod.Namespace, pod.Name, pod.GenerateName, name)
		}
		if pod.Labels[managed.LabelNode] != name || pod.Labels[managed.LabelContainerGroup] != "g" {
			t.Fatalf("labels %v", pod.Labels)
		}
		if _, ok := pod.Labels[managed.LabelRun]; ok {
			t.Fatalf("a held node's pod carries a run label: the orphan sweep would take it")
		}
		if pod.Spec.ActiveDeadlineSeconds != nil {
			t.Fatalf("a held node's pod has a deadline of %d s", *pod.Spec.ActiveDeadlineSeconds)
		}
	})
}
