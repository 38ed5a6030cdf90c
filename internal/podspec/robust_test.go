// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package podspec

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/strictyaml"
)

// checkInvariants fails unless pod is what every rendered pod must be: the
// provider writes into its label and annotation maps and execs into its first
// container.
func checkInvariants(t *testing.T, pod *corev1.Pod, ns string, own map[string]string) {
	t.Helper()
	if pod.Labels == nil || pod.Annotations == nil {
		t.Fatalf("labels %v annotations %v: want non-nil maps", pod.Labels, pod.Annotations)
	}
	for k, v := range own {
		if pod.Labels[k] != v {
			t.Errorf("label %s = %q, want %q (labels %v)", k, pod.Labels[k], v, pod.Labels)
		}
	}
	if len(pod.Spec.Containers) == 0 {
		t.Fatal("no container")
	}
	if pod.Namespace != ns || pod.Kind != "Pod" || pod.APIVersion != "v1" {
		t.Errorf("namespace %q kind %q apiVersion %q", pod.Namespace, pod.Kind, pod.APIVersion)
	}
	pod.Labels[managed.LabelRun] = "dry-run" // what the provider does: must not panic
}

// Regression (issue #11): null or replaced labels, annotations or metadata
// used to render a pod with nil Labels, and the provider then panicked with
// "assignment to entry in nil map".
func TestRenderGroup_overrideKeepsKubeplaysMetadata(t *testing.T) {
	own := map[string]string{managed.LabelManagedBy: managed.ManagedByValue, managed.LabelContainerGroup: "g"}
	for _, o := range []string{
		"metadata:\n  labels: null\n",
		"metadata:\n  labels:\n    $patch: replace\n    team: a\n",
		"metadata:\n  annotations: null\n",
		"metadata: null\n",
		"metadata:\n  $patch: replace\n",
		"$patch: replace\nspec:\n  containers:\n  - name: worker\n    image: x\n",
		"{\"metadata\": {\"labels\": null}, \"spec\": {\"containers\": [{\"name\": \"worker\"}]}}",
	} {
		t.Run(o, func(t *testing.T) {
			pod, err := RenderGroup(Group{Name: "g", Namespace: "runs", Labels: map[string]string{"team": "a"}, Override: o})
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, pod, "runs", own)
			pod, err = Compose(pod, Label{Name: "l", Type: TypePod}, Resources{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, pod, "runs", map[string]string{managed.LabelContainerGroup: "g", managed.LabelNodeLabel: "l"})
		})
	}
}

// Regression (issue #11): an override without containers used to render a
// pod with none, and the provider panicked on pod.Spec.Containers[0].
func TestRenderGroup_overrideRemovingEveryContainer(t *testing.T) {
	for _, o := range []string{
		"spec:\n  containers: null\n",
		"containers: null\n",
		"spec:\n  containers:\n  - $patch: replace\n",
		"spec: null\n",
		"spec:\n  $patch: delete\n",
		"$patch: delete\n",
		"apiVersion: v1\nkind: Pod\n$patch: delete\n",
	} {
		t.Run(o, func(t *testing.T) {
			_, err := RenderGroup(Group{Name: "g", Namespace: "runs", Override: o})
			if !errors.Is(err, ErrNoContainers) {
				t.Fatalf("RenderGroup error = %v, want ErrNoContainers", err)
			}
			if err := ValidateOverride(o); !errors.Is(err, ErrNoContainers) {
				t.Fatalf("ValidateOverride error = %v, want ErrNoContainers", err)
			}
		})
	}
	// Replacing the list with other containers is fine: the first hosts the run.
	pod, err := RenderGroup(Group{Namespace: "runs", Override: "spec:\n  containers:\n  - name: main\n    image: x\n  - $patch: replace\n"})
	if err != nil || len(pod.Spec.Containers) != 1 || pod.Spec.Containers[0].Name != "main" {
		t.Fatalf("pod %+v, %v", pod, err)
	}
	if _, err := Compose(&corev1.Pod{}, Label{Name: "l", Type: TypeNamespace}, Resources{}, nil); !errors.Is(err, ErrNoContainers) {
		t.Fatalf("Compose of a pod without containers: %v", err)
	}
	if _, err := Compose(nil, Label{Name: "l", Type: TypePod}, Resources{}, nil); err == nil {
		t.Fatal("Compose of no pod: want an error")
	}
}

func TestRenderGroup_reservedLabels(t *testing.T) {
	cases := []struct {
		name  string
		group Group
		in    Input
		key   string
	}{
		{"override changes managed-by", Group{Override: "metadata:\n  labels:\n    app.kubernetes.io/managed-by: helm\n"},
			InputOverride, managed.LabelManagedBy},
		{"override changes the group label", Group{Override: "metadata:\n  labels:\n    kubeplay.io/container-group: other\n"},
			InputOverride, managed.LabelContainerGroup},
		{"group labels change the group label", Group{Labels: map[string]string{managed.LabelContainerGroup: "x"}},
			InputGroupLabels, managed.LabelContainerGroup},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.group.Name, c.group.Namespace = "g", "runs"
			_, err := RenderGroup(c.group)
			var re *ReservedLabelError
			if !errors.As(err, &re) || re.Input != c.in || re.Key != c.key {
				t.Fatalf("error = %v, want a ReservedLabelError from %s on %s", err, c.in, c.key)
			}
		})
	}
	// Restating kubeplay's own value is harmless.
	if _, err := RenderGroup(Group{Name: "g", Override: "metadata:\n  labels:\n    app.kubernetes.io/managed-by: kubeplay\n"}); err != nil {
		t.Fatal(err)
	}
}

func TestCompose_reservedLabels(t *testing.T) {
	group, err := RenderGroup(Group{Name: "g", Namespace: "runs"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		l    Label
		in   Input
	}{
		{"labels change the node label", Label{Labels: map[string]string{managed.LabelNodeLabel: "x"}}, InputLabelLabels},
		{"labels change the group label", Label{Labels: map[string]string{managed.LabelContainerGroup: "x"}}, InputLabelLabels},
		{"dynamic labels change managed-by", Label{DynamicLabels: map[string]string{managed.LabelManagedBy: "{run.id}"}}, InputDynamicLabels},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.l.Name, c.l.Type = "l", TypePod
			_, err := Compose(group, c.l, Resources{}, map[string]string{"run.id": "7"})
			var re *ReservedLabelError
			if !errors.As(err, &re) || re.Input != c.in {
				t.Fatalf("error = %v, want a ReservedLabelError from %s", err, c.in)
			}
		})
	}
	// The run label is the provider's to set; a dynamic label may preset it.
	pod, err := Compose(group, Label{Name: "l", Type: TypePod, DynamicLabels: map[string]string{managed.LabelRun: "r-{run.id}"}},
		Resources{}, map[string]string{"run.id": "7"})
	if err != nil || pod.Labels[managed.LabelRun] != "r-7" {
		t.Fatalf("labels %v, %v", pod.Labels, err)
	}
}

// Regression (issue #11): a key given twice used to keep the last value
// silently.
func TestDuplicateKeys(t *testing.T) {
	cases := []struct {
		name string
		f    func() error
		line int
	}{
		{"override YAML", func() error {
			_, err := ParseOverride("spec:\n  nodeSelector:\n    disk: ssd\n    disk: hdd\n")
			return err
		}, 4},
		{"override JSON", func() error {
			_, err := ParseOverride("{\"spec\": {\n \"containers\": [],\n \"containers\": [{\"name\": \"x\"}]}}")
			return err
		}, 3},
		{"override metadata", func() error {
			_, err := ParseOverride("metadata:\n  labels: {a: b}\nspec: {}\nmetadata: {}\n")
			return err
		}, 4},
		{"verbatim spec", func() error {
			_, err := ParsePodSpec("containers:\n- name: a\n  image: b\n  image: c\n")
			return err
		}, 4},
		{"volumes", func() error {
			var v []corev1.Volume
			return ParseList("- name: a\n  emptyDir: {}\n  name: b\n", &v, "volumes")
		}, 3},
		{"label volume mounts", func() error {
			_, err := RenderLabel(Label{Name: "l", Type: TypePod, VolumeMounts: "[{name: a, mountPath: /a, mountPath: /b}]"}, Resources{})
			return err
		}, 1},
		{"group override", func() error {
			_, err := RenderGroup(Group{Override: "spec:\n  serviceAccountName: a\n  serviceAccountName: b\n"})
			return err
		}, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.f()
			var de *strictyaml.DuplicateKeyError
			if !errors.As(err, &de) || de.Line != c.line {
				t.Fatalf("error = %v, want a DuplicateKeyError at line %d", err, c.line)
			}
		})
	}
}

// Found by FuzzRenderCompose: the YAML emitter refused a label key with a
// control character, so the rendered pod could not be shown.
func TestToYAML_controlCharacters(t *testing.T) {
	pod, err := RenderGroup(Group{Namespace: "runs", Labels: map[string]string{"\x7f": "0"},
		Override: "containers:\n- name: worker\n  env:\n  - name: A\n    value: \"a\\x01b\"\n"})
	if err != nil {
		t.Fatal(err)
	}
	y, err := ToYAML(pod)
	if err != nil {
		t.Fatal(err)
	}
	var back corev1.Pod
	if err := yaml.UnmarshalStrict([]byte(y), &back); err != nil || back.Labels["\x7f"] != "0" || back.Spec.Containers[0].Env[0].Value != "a\x01b" {
		t.Fatalf("YAML %q reads back as %+v (%v)", y, back, err)
	}
}
