// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package podspec

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

// overrideSeeds are the shapes users and the fuzzer should start from:
// nulls, empty and wrongly typed lists and maps, duplicate keys, "$patch"
// directives, and a huge value.
var overrideSeeds = []string{
	seed000,
	"",
	"null",
	"{}",
	"[]",
	"metadata:\n  labels: null\n",
	"metadata:\n  labels: []\n",
	"metadata:\n  labels:\n    $patch: replace\n",
	"metadata:\n  annotations: {a: null}\n",
	"metadata: null\nspec: null\n",
	"spec:\n  containers: null\n",
	"spec:\n  containers: []\n",
	"spec:\n  containers: {}\n",
	"spec:\n  containers:\n  - null\n",
	"spec:\n  containers:\n  - $patch: replace\n",
	"spec:\n  containers:\n  - name: worker\n    $patch: delete\n",
	"spec:\n  $setElementOrder/containers:\n  - name: db\n  containers:\n  - name: db\n    image: x\n",
	"spec:\n  containers:\n  - name: worker\n    $retainKeys: [image]\n    image: x\n",
	"spec:\n  containers:\n  - name: worker\n    $deleteFromPrimitiveList/args: [sh]\n",
	"$patch: replace\n",
	"$patch: delete\n",
	"kind: Pod\nmetadata:\n  labels: {a: b, a: c}\n",
	"containers:\n- name: worker\n  image: a\n  image: b\n",
	"spec:\n  containers:\n  - name: worker\n    env:\n    - name: A\n      value: " + strings.Repeat("v", 100<<10) + "\n",
	"spec:\n  volumes: null\n  nodeSelector: []\n",
	"spec:\n  initContainers:\n  - image: x\n",
	"x: &a [*a, *a]\n",
}

// checkRendered fails unless pod has what every rendered pod must have.
func checkRendered(t *testing.T, pod *corev1.Pod, ns string, own map[string]string) {
	t.Helper()
	if pod == nil || pod.Labels == nil || pod.Annotations == nil || len(pod.Spec.Containers) == 0 {
		t.Fatalf("rendered pod lacks labels, annotations or containers: %+v", pod)
	}
	for k, v := range own {
		if pod.Labels[k] != v {
			t.Fatalf("label %s = %q, want %q", k, pod.Labels[k], v)
		}
	}
	if pod.Namespace != ns || pod.Kind != "Pod" || pod.APIVersion != "v1" {
		t.Fatalf("namespace %q kind %q apiVersion %q", pod.Namespace, pod.Kind, pod.APIVersion)
	}
	for i, c := range pod.Spec.Containers {
		if c.Name == WorkerContainer && i != 0 {
			t.Fatalf("worker is container %d", i)
		}
	}
	if _, err := ToYAML(pod); err != nil {
		t.Fatalf("ToYAML: %v", err)
	}
}

// FuzzParseOverride: an accepted override is a strategic merge patch whose
// fields (directives aside) all decode strictly into a Pod.
func FuzzParseOverride(f *testing.F) {
	for _, s := range overrideSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		doc, err := ParseOverride(text)
		if err != nil || doc == nil {
			return
		}
		var obj map[string]any
		if err := json.Unmarshal(doc.Patch, &obj); err != nil {
			t.Fatalf("patch %s is not a JSON object: %v", doc.Patch, err)
		}
		j, _ := json.Marshal(withoutDirectives(obj))
		strict, err := sigsjson.UnmarshalStrict(j, &corev1.Pod{})
		if err != nil || len(strict) > 0 {
			t.Fatalf("accepted %q, but its patch does not decode into a Pod: %v %v", text, err, strict)
		}
		if md, _ := obj["metadata"].(map[string]any); md != nil && (md["name"] != nil || md["namespace"] != nil) {
			t.Fatalf("the patch sets the pod's name or namespace: %s", doc.Patch)
		}
	})
}

// FuzzParsePodSpec: an accepted verbatim spec has containers, all named.
func FuzzParsePodSpec(f *testing.F) {
	f.Add(seed002Spec)
	for _, s := range overrideSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		spec, err := ParsePodSpec(text)
		if err != nil {
			return
		}
		if len(spec.Containers) == 0 {
			t.Fatalf("accepted %q without containers", text)
		}
		for i, c := range spec.Containers {
			if c.Name == "" {
				t.Fatalf("accepted %q with an unnamed container %d", text, i)
			}
		}
	})
}

// FuzzParseList: an accepted list has exactly the items the document lists.
func FuzzParseList(f *testing.F) {
	for _, s := range []string{"- name: cache\n  emptyDir: {}\n", "[{name: a, mountPath: /a}]", "null", "[]", "[null]", "- {name: a, name: b}\n",
		"name: x\n", "- 1\n", "- name: a\n  hostPath: {path: /x, type: null}\n", "[" + strings.Repeat("{name: v},", 1000) + "]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		var vols []corev1.Volume
		errV := ParseList(text, &vols, "volumes")
		var mounts []corev1.VolumeMount
		errM := ParseList(text, &mounts, "volume mounts")
		for _, c := range []struct {
			err error
			n   int
		}{{errV, len(vols)}, {errM, len(mounts)}} {
			if c.err != nil {
				continue
			}
			var items []any
			if err := yaml.Unmarshal([]byte(text), &items); err != nil || len(items) != c.n {
				t.Fatalf("accepted %q as %d items; the document lists %d (%v)", text, c.n, len(items), err)
			}
		}
	})
}

// FuzzRenderCompose: whatever a group's override and a label's settings, a
// run's pod either renders with kubeplay's labels, non-nil label and
// annotation maps, the group's namespace and at least one container (the
// worker first when there is one), or rendering fails; and rendering is
// deterministic.
func FuzzRenderCompose(f *testing.F) {
	for i, s := range overrideSeeds {
		spec, vols := "", ""
		if i%3 == 1 {
			spec = seed002Spec
		}
		if i%4 == 2 {
			vols = "- name: cache\n  emptyDir: {}\n"
		}
		f.Add(s, spec, vols, "- {name: cache, mountPath: /c}\n", "team", "{run.id}", "x")
	}
	f.Add("", "containers: []\n", "null", "[]", managed.LabelManagedBy, "{{", "kubeplay")
	f.Add("metadata:\n  labels:\n    kubeplay.io/node-label: other\n", "", "- {name: a, name: b}\n", "", managed.LabelNodeLabel, "l", "y")
	f.Fuzz(func(t *testing.T, override, spec, volumes, mounts, labelKey, dynamic, labelValue string) {
		g := Group{Name: "g", Namespace: "runs", Image: "ee", Labels: map[string]string{"team": "a"},
			Annotations: map[string]string{"note": "n"}, Override: override}
		if ns, err := OverrideNamespace(override); err == nil && ns != "" {
			g.Namespace = ns
		}
		pod, err := RenderGroup(g)
		if verr := ValidateOverride(override); verr != nil && err == nil {
			t.Fatalf("ValidateOverride refused what RenderGroup accepts: %v", verr)
		}
		if err != nil {
			return
		}
		own := map[string]string{managed.LabelManagedBy: managed.ManagedByValue, managed.LabelContainerGroup: "g"}
		checkRendered(t, pod, g.Namespace, own)
		again, err := RenderGroup(g)
		if err != nil || !reflect.DeepEqual(pod, again) {
			t.Fatalf("rendering twice differs: %v", err)
		}
		l := Label{Name: "l", Type: TypePod, Spec: spec, Volumes: volumes, VolumeMounts: mounts,
			Labels: map[string]string{labelKey: labelValue}, DynamicLabels: map[string]string{"d": dynamic},
			Annotations: map[string]string{"a": labelValue}}
		if spec != "" {
			l.Volumes, l.VolumeMounts = "", ""
		}
		composed, err := Compose(pod, l, Resources{CPU: "1"}, map[string]string{"run.id": "7"})
		if err != nil {
			return
		}
		own[managed.LabelNodeLabel] = "l"
		checkRendered(t, composed, g.Namespace, own)
		if !reflect.DeepEqual(pod, again) {
			t.Fatal("Compose changed the group's pod")
		}
	})
}
