// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package podspec

import (
	"regexp"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

// seed002Spec is the custom spec Nodepool recommends as a starting point.
const seed002Spec = `containers:
  - name: custom-pod
    image: ubuntu:jammy
    imagePullPolicy: IfNotPresent
    command: ["/bin/sh", "-c"]
    args: ["while true; do sleep 30; done;"]
`

func TestRenderLabel_fallbackOrder(t *testing.T) {
	i := func(v int64) *int64 { return &v }
	cases := []struct {
		name             string
		label, pool      Resources
		wantReq, wantLim map[corev1.ResourceName]string
	}{
		{"label limit wins", Resources{CPU: "1", CPULimit: "2"}, Resources{CPU: "3", CPULimit: "4"},
			map[corev1.ResourceName]string{"cpu": "1"}, map[corev1.ResourceName]string{"cpu": "2"}},
		{"then the pool's default limit", Resources{CPU: "1"}, Resources{CPU: "3", CPULimit: "4"},
			map[corev1.ResourceName]string{"cpu": "1"}, map[corev1.ResourceName]string{"cpu": "4"}},
		{"then the label's request", Resources{Memory: i(512)}, Resources{Memory: i(256)},
			map[corev1.ResourceName]string{"memory": "512Mi"}, map[corev1.ResourceName]string{"memory": "512Mi"}},
		{"then the pool's default request", Resources{}, Resources{Storage: i(100)},
			map[corev1.ResourceName]string{"ephemeral-storage": "100M"}, map[corev1.ResourceName]string{"ephemeral-storage": "100M"}},
		{"label limit without any request", Resources{MemoryLimit: i(64)}, Resources{},
			map[corev1.ResourceName]string{}, map[corev1.ResourceName]string{"memory": "64Mi"}},
		{"pool extra resources when the label sets none", Resources{}, Resources{ExtraResources: map[string]string{"example.com/dongle": "1"}},
			map[corev1.ResourceName]string{"example.com/dongle": "1"}, map[corev1.ResourceName]string{"example.com/dongle": "1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tpl, err := RenderLabel(Label{Name: "l", Type: TypePod, Resources: c.label}, c.pool)
			if err != nil {
				t.Fatal(err)
			}
			r := tpl.Spec.Containers[0].Resources
			check := func(kind string, got corev1.ResourceList, want map[corev1.ResourceName]string) {
				if len(got) != len(want) {
					t.Errorf("%s = %v, want %v", kind, got, want)
				}
				for k, v := range want {
					if q, ok := got[k]; !ok || q.String() != v {
						t.Errorf("%s[%s] = %v, want %s", kind, k, got[k], v)
					}
				}
			}
			check("requests", r.Requests, c.wantReq)
			check("limits", r.Limits, c.wantLim)
		})
	}
}

func TestRenderLabel_pod(t *testing.T) {
	tpl, err := RenderLabel(Label{
		Name: "fedora", Type: TypePod, Image: "fedora:40", ImagePullPolicy: "Never",
		GPU: "1", GPUResource: "nvidia.com/gpu", Privileged: ptr.To(true),
		Env: []EnvVar{{Name: "A", Value: "1"}}, NodeSelector: map[string]string{"gpu": "yes"}, SchedulerName: "custom",
		Volumes: "- name: cache\n  emptyDir: {}\n", VolumeMounts: "[{name: cache, mountPath: /cache}]",
		Labels: map[string]string{"team": "x"}, Annotations: map[string]string{"a": "b"},
	}, Resources{})
	if err != nil {
		t.Fatal(err)
	}
	c := tpl.Spec.Containers[0]
	g := c.Resources.Requests["nvidia.com/gpu"]
	gl := c.Resources.Limits["nvidia.com/gpu"]
	if g.String() != "1" || gl.String() != "1" {
		t.Errorf("gpu request %v limit %v", g, gl)
	}
	if c.Name != WorkerContainer || c.Image != "fedora:40" || c.ImagePullPolicy != corev1.PullNever || !*c.SecurityContext.Privileged {
		t.Errorf("container = %+v", c)
	}
	if tpl.Spec.RestartPolicy != corev1.RestartPolicyNever || tpl.Spec.SchedulerName != "custom" ||
		tpl.Spec.Volumes[0].EmptyDir == nil || c.VolumeMounts[0].MountPath != "/cache" {
		t.Errorf("spec = %+v", tpl.Spec)
	}
	if tpl.Labels["team"] != "x" || tpl.Labels[managed.LabelNodeLabel] != "fedora" || tpl.Annotations["a"] != "b" {
		t.Errorf("metadata = %+v", tpl.ObjectMeta)
	}
}

func TestRenderLabel_seed002Spec(t *testing.T) {
	tpl, err := RenderLabel(Label{Name: "custom-pod", Type: TypePod, Spec: seed002Spec, Resources: Resources{CPU: "1"}},
		Resources{CPU: "2", Memory: ptr.To[int64](1)})
	if err != nil {
		t.Fatal(err)
	}
	c := tpl.Spec.Containers
	if len(c) != 1 || c[0].Name != "custom-pod" || c[0].Image != "ubuntu:jammy" || c[0].Args[0] != "while true; do sleep 30; done;" {
		t.Fatalf("containers = %+v", c)
	}
	if len(c[0].Resources.Requests) != 0 || tpl.Spec.RestartPolicy != "" {
		t.Errorf("a verbatim spec got defaults: %+v", tpl.Spec)
	}
}

func TestRenderLabel_errors(t *testing.T) {
	cases := []struct {
		name  string
		label Label
		want  string
	}{
		{"negative quantity", Label{Resources: Resources{CPU: "-1"}}, `"-1" is negative`},
		{"malformed quantity", Label{Resources: Resources{CPULimit: "two"}}, `"two" is not a Kubernetes quantity`},
		{"gpu without resource", Label{GPU: "1"}, `gpu is set without gpu_resource`},
		{"volumes not a list", Label{Volumes: "name: x\n"}, `volumes: the document is a map`},
		{"volume mount unknown field", Label{VolumeMounts: "- name: x\n  mountPth: /x\n"}, `volume_mounts: line 2: unknown field "\[0\].mountPth"`},
		{"spec with a Pod", Label{Spec: "kind: Pod\nspec: {}\n"}, `spec: line 1: kind is a field of a Pod`},
		{"spec YAML error", Label{Spec: "containers:\n - name: a\n  image: b\n"}, `spec: not valid YAML or JSON: yaml: line 2`},
		{"spec without containers", Label{Spec: "nodeSelector: {}\n"}, `no containers`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.label.Name, c.label.Type = "l", TypePod
			_, err := RenderLabel(c.label, Resources{})
			if err == nil || !regexp.MustCompile(c.want).MatchString(err.Error()) {
				t.Fatalf("error = %v, want match %q", err, c.want)
			}
		})
	}
}

func TestExpand(t *testing.T) {
	vals := map[string]string{"run.id": "42", "run.name": "prod"}
	cases := []struct{ tmpl, want, err string }{
		{"{run.id}", "42", ""},
		{"ws-{run.name}-{ run.id }", "ws-prod-42", ""},
		{"ws-{run.workspace}", "", `uses \{run.workspace\} is no longer a placeholder`},
		{"{{literal}}", "{literal}", ""},
		{"{request.id}", "", `unknown placeholder \{request.id\}; known placeholders are \{run.id\}`},
		{"{run.id", "", `unmatched "\{"`},
		{"a}", "", `unmatched "\}"`},
	}
	for _, c := range cases {
		got, err := Expand(c.tmpl, vals)
		if c.err != "" {
			if err == nil || !regexp.MustCompile(c.err).MatchString(err.Error()) {
				t.Errorf("Expand(%q) error = %v, want %q", c.tmpl, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Expand(%q) = %q, %v; want %q", c.tmpl, got, err, c.want)
		}
	}
}

func TestNamespaceObjects_realGroups(t *testing.T) {
	_, _, role, rb := NamespaceObjects("run-1", "ns-label")
	known := map[string]bool{"": true, "apps": true, "batch": true, "networking.k8s.io": true}
	logs := false
	for _, r := range role.Rules {
		for _, g := range r.APIGroups {
			if !known[g] {
				t.Errorf("rule names API group %q", g)
			}
		}
		for _, res := range r.Resources {
			logs = logs || res == "pods/log"
		}
	}
	if !logs || rb.RoleRef.APIGroup != "rbac.authorization.k8s.io" || rb.Subjects[0].Namespace != "run-1" {
		t.Errorf("role %+v binding %+v", role.Rules, rb)
	}
}

func TestCompose(t *testing.T) {
	group, err := RenderGroup(Group{Name: "g", Namespace: "runs", Image: "ee", Override: "spec:\n  containers:\n  - name: db\n    image: postgres\n"})
	if err != nil {
		t.Fatal(err)
	}
	mem := int64(512)
	pod, err := Compose(group, Label{Name: "big", Type: TypePod, Resources: Resources{CPU: "2"},
		Env: []EnvVar{{Name: "A", Value: "1"}}, Labels: map[string]string{"team": "x"},
		DynamicLabels: map[string]string{"run": "r-{run.id}"}}, Resources{Memory: &mem, CPULimit: "4"}, map[string]string{"run.id": "7"})
	if err != nil {
		t.Fatal(err)
	}
	c := pod.Spec.Containers
	if len(c) != 2 || c[0].Name != WorkerContainer || c[1].Name != "db" {
		t.Fatalf("containers = %v", names(c))
	}
	w := c[0]
	if w.Image != "ee" || !slices.Equal(w.Args, WorkerArgs) || len(w.Env) != 1 {
		t.Errorf("worker lost the group's settings or the label's env: %+v", w)
	}
	if w.Resources.Requests.Cpu().String() != "2" || w.Resources.Limits.Cpu().String() != "4" ||
		w.Resources.Requests.Memory().String() != "512Mi" || w.Resources.Limits.Memory().String() != "512Mi" {
		t.Errorf("resources = %+v", w.Resources)
	}
	if pod.Labels["run"] != "r-7" || pod.Labels["team"] != "x" || pod.Labels[managed.LabelContainerGroup] != "g" || pod.Labels[managed.LabelNodeLabel] != "big" {
		t.Errorf("labels = %v", pod.Labels)
	}
	if pod.Spec.RestartPolicy != corev1.RestartPolicyNever || pod.Namespace != "runs" {
		t.Errorf("pod = %+v", pod)
	}

	verbatim, err := Compose(group, Label{Name: "custom", Type: TypePod, Spec: seed002Spec}, Resources{CPU: "1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := verbatim.Spec.Containers; len(c) != 1 || c[0].Name != "custom-pod" || len(c[0].Resources.Requests) != 0 {
		t.Errorf("verbatim spec containers = %+v", c)
	}
	if verbatim.Labels[managed.LabelContainerGroup] != "g" || verbatim.Namespace != "runs" {
		t.Errorf("verbatim spec lost the group's metadata: %+v", verbatim.ObjectMeta)
	}
}
