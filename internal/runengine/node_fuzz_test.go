// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"errors"
	"testing"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/warmpool"
)

// FuzzNodePod: whatever pod a group's override renders, a held node's pod
// is named as the node, carries its node label and no run label, and has
// no deadline: it lives until the node is destroyed. Signed, it verifies as
// the node, and neither a copy of it (another UID) nor it with another
// image does.
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
		// Signed as created, it verifies as the node; another pod with its
		// name, labels and signatures, or with another spec, does not.
		pod.UID = "uid-node"
		pod.Annotations = warmpool.Signatures(nodeKey, nodeOwner(g, pod), pod)
		if err := warmpool.Verify(nodeKey, nodeOwner(g, pod), pod); err != nil {
			t.Fatalf("the node's pod as signed: %v", err)
		}
		impostor := pod.DeepCopy()
		impostor.UID = "uid-impostor"
		var r *warmpool.RefusedError
		if err := warmpool.Verify(nodeKey, nodeOwner(g, impostor), impostor); !errors.As(err, &r) || r.Ours {
			t.Fatalf("a pod with the node's name, labels and signatures: %v", err)
		}
		changed := pod.DeepCopy()
		changed.Spec.Containers[0].Image += "-evil"
		if err := warmpool.Verify(nodeKey, nodeOwner(g, changed), changed); !errors.As(err, &r) || !r.Ours {
			t.Fatalf("the node's pod with another image: %v", err)
		}
	})
}
