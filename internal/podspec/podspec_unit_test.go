// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package podspec

import (
	"encoding/json"
	"errors"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

func container(p *corev1.Pod, name string) *corev1.Container {
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == name {
			return &p.Spec.Containers[i]
		}
	}
	return nil
}

func envMap(c *corev1.Container) map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		m[e.Name] = e.Value
	}
	return m
}

func mustGroup(t *testing.T, g Group) *corev1.Pod {
	t.Helper()
	p, err := RenderGroup(g)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRenderGroupMetadata(t *testing.T) {
	labels := map[string]string{"team": "a"}
	annotations := map[string]string{"note": "x"}
	p := mustGroup(t, Group{Name: "g", Namespace: "runs", Image: "ee:1", Labels: labels, Annotations: annotations})
	if p.Spec.Containers[0].Image != "ee:1" || p.Annotations["note"] != "x" || p.Namespace != "runs" || p.Name != "" {
		t.Errorf("pod %+v", p.ObjectMeta)
	}
	p.Labels["added"], p.Annotations["added"] = "y", "y"
	if len(labels) != 1 || len(annotations) != 1 {
		t.Errorf("the rendered pod shares the group's maps: %v %v", labels, annotations)
	}
	if DefaultPod("runs", "").Labels["added"] != "" {
		t.Error("the rendered pod shares the default pod's labels")
	}

	anon := mustGroup(t, Group{Namespace: "runs"})
	if _, ok := anon.Labels[managed.LabelContainerGroup]; ok || len(anon.Annotations) != 0 {
		t.Errorf("a group without a name or annotations: labels %v annotations %v", anon.Labels, anon.Annotations)
	}
	// A group label cannot take the container group label: refused, or kubeplay's value kept.
	forged, err := RenderGroup(Group{Name: "g", Namespace: "runs", Labels: map[string]string{managed.LabelContainerGroup: "other"}})
	if err == nil && forged.Labels[managed.LabelContainerGroup] != "g" {
		t.Errorf("container group label %q, want g", forged.Labels[managed.LabelContainerGroup])
	}
}

// TestOverrideMergesNotReplaces: unlike AWX, which replaced the default pod
// with the override, containers, env, volumes and maps merge by key.
func TestOverrideMergesNotReplaces(t *testing.T) {
	p := mustGroup(t, Group{Namespace: "runs", Override: `spec:
  containers:
  - name: worker
    resources:
      limits:
        cpu: "1"
    securityContext:
      runAsUser: 1000
  volumes:
  - name: cache
    emptyDir: {}
  nodeSelector:
    disk: ssd
`})
	w := container(p, WorkerContainer)
	if w == nil || w.Image != DefaultImage || !slices.Equal(w.Args, WorkerArgs) || w.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Fatalf("the override replaced the worker: %+v", w)
	}
	if w.Resources.Requests.Cpu().String() != "250m" || w.Resources.Requests.Memory().String() != "100Mi" || w.Resources.Limits.Cpu().String() != "1" {
		t.Errorf("resources %+v, want the default requests and the override's limit", w.Resources)
	}
	if w.SecurityContext == nil || !ptr.Equal(w.SecurityContext.RunAsUser, ptr.To[int64](1000)) {
		t.Errorf("security context %+v", w.SecurityContext)
	}
	if !ptr.Equal(p.Spec.AutomountServiceAccountToken, ptr.To(false)) || p.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("the override dropped pod defaults: %+v", p.Spec)
	}

	// A node label merges over that: env by name, volumes by name, maps by key.
	withEnv := mustGroup(t, Group{Namespace: "runs", Override: `spec:
  containers:
  - name: worker
    env: [{name: A, value: "1"}, {name: B, value: "2"}]
    volumeMounts: [{name: cache, mountPath: /cache}]
  - name: sidecar
    image: busybox
  volumes: [{name: cache, emptyDir: {}}]
  nodeSelector: {disk: ssd}
`})
	got, err := Compose(withEnv, Label{Name: "l", Type: TypePod, Image: "fedora:40",
		Env:          []EnvVar{{Name: "B", Value: "3"}, {Name: "C", Value: "4"}},
		NodeSelector: map[string]string{"gpu": "yes"}, Privileged: ptr.To(false),
		Volumes: "- name: scratch\n  emptyDir: {}\n", VolumeMounts: "- name: scratch\n  mountPath: /scratch\n",
	}, Resources{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w = container(got, WorkerContainer)
	if want := map[string]string{"A": "1", "B": "3", "C": "4"}; !maps.Equal(envMap(w), want) {
		t.Errorf("worker env %v, want %v (merged by name, the label winning)", envMap(w), want)
	}
	if w.Image != "fedora:40" || !slices.Equal(w.Args, WorkerArgs) {
		t.Errorf("worker image %q args %q", w.Image, w.Args)
	}
	if w.SecurityContext == nil || !ptr.Equal(w.SecurityContext.Privileged, ptr.To(false)) {
		t.Errorf("privileged = false was not kept: %+v", w.SecurityContext)
	}
	var mounts, vols []string
	for _, m := range w.VolumeMounts {
		mounts = append(mounts, m.MountPath)
	}
	for _, v := range got.Spec.Volumes {
		vols = append(vols, v.Name)
	}
	slices.Sort(mounts)
	slices.Sort(vols)
	if !slices.Equal(mounts, []string{"/cache", "/scratch", "/tmp"}) || !slices.Equal(vols, []string{"cache", TmpVolume, "scratch"}) {
		t.Errorf("mounts %v volumes %v, want the group's, the label's and kubeplay's /tmp", mounts, vols)
	}
	if !maps.Equal(got.Spec.NodeSelector, map[string]string{"disk": "ssd", "gpu": "yes"}) {
		t.Errorf("node selector %v", got.Spec.NodeSelector)
	}
	side := container(got, "sidecar")
	if side == nil || side.Image != "busybox" || len(side.Env) != 0 || side.SecurityContext != nil || got.Spec.Containers[0].Name != WorkerContainer {
		t.Errorf("the label's settings reached the sidecar, or the worker is not first: %+v", got.Spec.Containers)
	}
}

func TestComposeKeepsWhatTheLabelLeavesUnset(t *testing.T) {
	group := mustGroup(t, Group{Name: "g", Namespace: "runs", Image: "ee",
		Annotations: map[string]string{"group": "a"}, Labels: map[string]string{"team": "group"}})
	before := group.DeepCopy()
	pod, err := Compose(group, Label{Name: "plain", Type: TypePod,
		Labels: map[string]string{"team": "label"}, Annotations: map[string]string{"label": "b"}}, Resources{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := container(pod, WorkerContainer)
	if w.Image != "ee" || w.ImagePullPolicy != corev1.PullIfNotPresent || w.Resources.Requests.Cpu().String() != "250m" {
		t.Errorf("an unset label attribute cleared the group's: %+v", w)
	}
	if pod.Annotations["group"] != "a" || pod.Annotations["label"] != "b" || pod.Labels["team"] != "label" ||
		pod.Labels[managed.LabelNodeLabel] != "plain" || pod.Labels[managed.LabelContainerGroup] != "g" {
		t.Errorf("metadata %+v", pod.ObjectMeta)
	}
	if !equality.Semantic.DeepEqual(group, before) {
		t.Error("Compose changed the group's pod")
	}
}

func TestComposeNamespaceLabel(t *testing.T) {
	group := mustGroup(t, Group{Name: "g", Namespace: "runs"})
	pod, err := Compose(group, Label{Name: "ns", Type: TypeNamespace, Image: "ignored", GPU: "1",
		Labels: map[string]string{"goes": "to the namespace"}}, Resources{CPU: "8"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(pod, group) {
		t.Errorf("a namespace label changed the pod:\n%+v\nwant\n%+v", pod, group)
	}
	pod.Labels["x"] = "y"
	if group.Labels["x"] != "" {
		t.Error("Compose returned the group's pod itself, not a copy")
	}
}

func TestComposeDynamicLabels(t *testing.T) {
	group := mustGroup(t, Group{Name: "g", Namespace: "runs"})
	run := map[string]string{"run.id": "7", "run.name": "deploy", "run.group": "g", "run.label": "l"}
	pod, err := Compose(group, Label{Name: "l", Type: TypePod, DynamicLabels: map[string]string{
		"all":     "{run.id}.{run.name}.{run.group}.{run.label}",
		"literal": "{{x}}",
		"static":  "plain",
	}}, Resources{}, run)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"all": "7.deploy.g.l", "literal": "{x}", "static": "plain"}
	for k, v := range want {
		if pod.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, pod.Labels[k], v)
		}
	}
	_, err = Compose(group, Label{Name: "l", Type: TypePod, DynamicLabels: map[string]string{"ok": "{run.id}", "bad": "{run.nope}"}}, Resources{}, run)
	if err == nil || !strings.HasPrefix(err.Error(), "dynamic label bad: ") {
		t.Errorf("error %v, want one naming the dynamic label", err)
	}
	if _, err := Compose(group, Label{Name: "l", Type: TypePod, GPU: "1"}, Resources{}, nil); err == nil {
		t.Error("a label that does not render composed")
	}
}

func TestExpandMore(t *testing.T) {
	cases := []struct{ tmpl, want string }{
		{"", ""},
		{"no placeholders", "no placeholders"},
		{"{run.id}{run.id}", "77"},
		{"{{{run.id}}}", "{7}"},
		{"{run.name}", ""}, // known but without a value
	}
	for _, c := range cases {
		got, err := Expand(c.tmpl, map[string]string{"run.id": "7"})
		if err != nil || got != c.want {
			t.Errorf("Expand(%q) = %q, %v; want %q", c.tmpl, got, err, c.want)
		}
	}
	if err := ValidateTemplate("ws-{run.name}"); err != nil {
		t.Errorf("ValidateTemplate of a good template: %v", err)
	}
	// {run.workspace} is gone: TF_WORKSPACE alone named it, wrongly after terraform workspace select.
	if err := ValidateTemplate("ws-{ run.workspace }"); !errors.Is(err, ErrWorkspacePlaceholder) {
		t.Errorf("ValidateTemplate of {run.workspace}: %v", err)
	}
	for _, bad := range []string{"{run.ID}", "{}", "x{", "}"} {
		if err := ValidateTemplate(bad); err == nil {
			t.Errorf("ValidateTemplate(%q) = nil", bad)
		}
	}
}

func TestRenderLabelResources(t *testing.T) {
	pool := Resources{ExtraResources: map[string]string{"example.com/dongle": "1"}}
	tpl, err := RenderLabel(Label{Name: "l", Type: TypePod, Resources: Resources{ExtraResources: map[string]string{}}}, pool)
	if err != nil {
		t.Fatal(err)
	}
	if r := tpl.Spec.Containers[0].Resources; r.Requests != nil || r.Limits != nil {
		t.Errorf("a label's empty extra_resources must override the pool's: %+v", r)
	}
	tpl, err = RenderLabel(Label{Name: "l", Type: TypePod, GPU: "2", GPUResource: "nvidia.com/gpu",
		Resources: Resources{ExtraResources: map[string]string{"example.com/fpga": "1"}}}, pool)
	if err != nil {
		t.Fatal(err)
	}
	r := tpl.Spec.Containers[0].Resources
	gpu, lim := r.Requests["nvidia.com/gpu"], r.Limits["nvidia.com/gpu"]
	if gpu.String() != "2" || lim.String() != "2" || len(r.Requests) != 2 {
		t.Errorf("resources %+v, want the gpu at request = limit and the label's extra resource only", r)
	}
	if _, ok := r.Requests["example.com/dongle"]; ok {
		t.Error("the pool's extra resources were added to the label's")
	}
	if _, err := RenderLabel(Label{Name: "l", GPU: "lots", GPUResource: "nvidia.com/gpu"}, Resources{}); err == nil {
		t.Error("a malformed gpu count rendered")
	}
}

func TestParseQuantity(t *testing.T) {
	for _, ok := range []string{"0", "500m", "1.5", "512Mi", "1G"} {
		if _, err := ParseQuantity(ok); err != nil {
			t.Errorf("ParseQuantity(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "-1", "-500m", "1 G", "lots"} {
		if _, err := ParseQuantity(bad); err == nil {
			t.Errorf("ParseQuantity(%q) = nil error", bad)
		}
	}
}

func TestParsePodSpecErrors(t *testing.T) {
	cases := []struct{ name, text, want string }{
		{"empty", "", `the document is empty`},
		{"null", "null\n", `the document is empty`},
		{"a number", "42\n", `the document is a number, not a PodSpec`},
		{"a string", "hello\n", `the document is a string, not a PodSpec`},
		{"a boolean", "true\n", `the document is a boolean, not a PodSpec`},
		{"a Pod's field", "containers:\n- name: a\nmetadata: {}\n", `^line 3: metadata is a field of a Pod`},
		{"unnamed container", "containers:\n- name: a\n  image: x\n- image: b\n", `^line 4: containers\[1\] has no name`},
		{"unknown field", "containers:\n- name: a\n  imag: x\n", `^line 3: unknown field "containers\[0\].imag"`},
		{"wrong type", "containers:\n- name: a\nnodeSelector: [a]\n", `^line 3: field nodeSelector has the wrong type \(expected map\[string\]string\)`},
		// Go's decoder drops list indexes from the path, so the line is not checked here.
		{"wrong type in a list", "containers:\n- name: a\n  ports: 80\n", `field containers.ports has the wrong type \(expected \[\]v1.ContainerPort\)`},
		{"two documents", "containers: []\n---\ncontainers: []\n", `2 YAML documents; write a single PodSpec`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParsePodSpec(c.text)
			if err == nil || !regexp.MustCompile(c.want).MatchString(err.Error()) {
				t.Fatalf("error = %v, want match %q", err, c.want)
			}
		})
	}
}

func TestParseOverrideMore(t *testing.T) {
	for _, empty := range []string{"", "  \n", "null", "# only a comment\n"} {
		if doc, err := ParseOverride(empty); doc != nil || err != nil {
			t.Errorf("ParseOverride(%q) = %+v, %v; want no document", empty, doc, err)
		}
	}
	doc, err := ParseOverride("apiVersion: v1\nkind: Pod\nmetadata:\n  namespace: other\n  labels: {a: b}\nspec:\n  containers:\n  - image: x\n")
	if err != nil {
		t.Fatal(err)
	}
	var patch map[string]any
	if err := json.Unmarshal(doc.Patch, &patch); err != nil {
		t.Fatal(err)
	}
	md, ok := patch["metadata"].(map[string]any)
	if !ok {
		t.Fatalf("patch metadata is %#v, want an object", patch["metadata"])
	}
	if doc.Namespace != "other" || md["namespace"] != nil || md["labels"] == nil {
		t.Errorf("namespace %q, patch metadata %v: want the namespace taken out of the patch", doc.Namespace, md)
	}
	spec, _ := patch["spec"].(map[string]any)
	containers, _ := spec["containers"].([]any)
	if len(containers) == 0 {
		t.Fatalf("patch spec is %#v, want containers", patch["spec"])
	}
	first, ok := containers[0].(map[string]any)
	if !ok {
		t.Fatalf("the first container is %#v, want an object", containers[0])
	}
	if first["name"] != WorkerContainer {
		t.Errorf("the unnamed first container is %v, want the worker", first["name"])
	}

	errs := []struct{ name, text, want string }{
		{"apiVersion", "apiVersion: v2\nkind: Pod\n", `apiVersion "v2" is not the API version of a Pod`},
		{"unnamed init container", "initContainers:\n- image: x\n", `^initContainers\[0\] has no name`},
		{"JSON unknown field", "{\n  \"spec\": {\n    \"hostnam\": \"x\"\n  }\n}", `^line 3: unknown field "spec.hostnam"`},
		{"a number", "3", `the document is a number, not a Pod or PodSpec`},
	}
	for _, c := range errs {
		if _, err := ParseOverride(c.text); err == nil || !regexp.MustCompile(c.want).MatchString(err.Error()) {
			t.Errorf("%s: error = %v, want match %q", c.name, err, c.want)
		}
	}
}

func TestOverrideNamespace(t *testing.T) {
	cases := []struct{ text, want string }{
		{"", ""},
		{"containers: []\n", ""},
		{"metadata:\n  namespace: awx\n", "awx"},
	}
	for _, c := range cases {
		if got, err := OverrideNamespace(c.text); err != nil || got != c.want {
			t.Errorf("OverrideNamespace(%q) = %q, %v; want %q", c.text, got, err, c.want)
		}
	}
	if _, err := OverrideNamespace("metadata: [\n"); err == nil {
		t.Error("OverrideNamespace of broken YAML = nil error")
	}
	_, err := RenderGroup(Group{Namespace: "runs", Override: "metadata:\n  namespace: awx\n"})
	var ce *NamespaceConflictError
	if !errors.As(err, &ce) || err.Error() != `the override's metadata.namespace is "awx" but the group's namespace is "runs"` {
		t.Errorf("error %v", err)
	}
	if p, err := RenderGroup(Group{Namespace: "runs", Override: "metadata:\n  namespace: runs\n"}); err != nil || p.Namespace != "runs" {
		t.Errorf("the group's own namespace in the override: %v", err)
	}
}

func TestParseListErrors(t *testing.T) {
	var vols []corev1.Volume
	if err := ParseList("- name: a\n  emptyDir: {}\n- name: b\n  hostPath: {path: /x}\n", &vols, "volumes"); err != nil || len(vols) != 2 || vols[1].HostPath.Path != "/x" {
		t.Fatalf("volumes %+v, %v", vols, err)
	}
	cases := []struct{ text, want string }{
		{"- name: a\n  emptyDir: [\n", `^not valid YAML or JSON`},
		{"just text\n", `the document is a string, not a list of volumes`},
		{"- name: a\n  emptyDir: []\n", `emptyDir has the wrong type \(expected v1.EmptyDirVolumeSource\)`},
		{"- name: a\n  emptyDr: {}\n", `^line 2: unknown field "\[0\].emptyDr"`},
	}
	for _, c := range cases {
		var v []corev1.Volume
		if err := ParseList(c.text, &v, "volumes"); err == nil || !regexp.MustCompile(c.want).MatchString(err.Error()) {
			t.Errorf("ParseList(%q) error = %v, want match %q", c.text, err, c.want)
		}
	}
}

func TestMergeErrorsAndOrder(t *testing.T) {
	if _, err := Merge(DefaultPod("runs", ""), []byte("not json")); err == nil || !strings.Contains(err.Error(), "merging the override") {
		t.Errorf("Merge of a malformed patch: %v", err)
	}
	cs := []corev1.Container{{Name: "a"}, {Name: "b"}, {Name: WorkerContainer}, {Name: "c"}}
	workerFirst(cs)
	if got := names(cs); !slices.Equal(got, []string{WorkerContainer, "a", "b", "c"}) {
		t.Errorf("order %v", got)
	}
	none := []corev1.Container{{Name: "a"}, {Name: "b"}}
	workerFirst(none)
	if got := names(none); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("order without a worker %v", got)
	}
}

func TestToYAMLRoundTrip(t *testing.T) {
	p := mustGroup(t, Group{Name: "g", Namespace: "runs", Image: "ee", Annotations: map[string]string{"a": "b"},
		Override: "spec:\n  containers:\n  - name: db\n    image: postgres\n  tolerations:\n  - key: k\n    operator: Exists\n"})
	y, err := ToYAML(p)
	if err != nil {
		t.Fatal(err)
	}
	back := mustGroup(t, Group{Namespace: "runs", Override: y})
	if !equality.Semantic.DeepEqual(back, p) {
		t.Errorf("the YAML does not render back to the same pod:\n%s", y)
	}
	y2, err := ToYAML(back)
	if err != nil || y2 != y {
		t.Errorf("ToYAML is not stable:\n%s\nvs\n%s", y, y2)
	}
}

func TestToYAMLStripsClusterFields(t *testing.T) {
	p := DefaultPod("runs", "img")
	p.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p.Status.Phase = corev1.PodRunning
	p.Spec.SecurityContext = &corev1.PodSecurityContext{}
	p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "i", SecurityContext: &corev1.SecurityContext{}}}
	y, err := ToYAML(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"status", "creationTimestamp", "Running", "securityContext"} {
		if strings.Contains(y, gone) {
			t.Errorf("YAML still has %s:\n%s", gone, y)
		}
	}
	if !strings.Contains(y, "initContainers:\n  - image: i\n    name: init\n") {
		t.Errorf("the init container is missing:\n%s", y)
	}
	if _, err := ToYAML([]string{"not", "an", "object"}); err == nil {
		t.Error("ToYAML of a list = nil error")
	}
	if _, err := ToYAML(func() {}); err == nil {
		t.Error("ToYAML of a func = nil error")
	}
}

// TestTmpVolume: the run pod mounts an emptyDir at /tmp; an override's own
// mount at /tmp takes its place, and one that replaces the volumes keeps
// the emptyDir the worker still mounts.
func TestTmpVolume(t *testing.T) {
	for _, tc := range []struct {
		name, override, wantMount string
		wantVols                  []string
	}{
		{"default", "", TmpVolume, []string{TmpVolume}},
		{"own mount", "spec:\n  containers:\n  - name: worker\n    volumeMounts:\n    - {name: scratch, mountPath: /tmp}\n" +
			"  volumes:\n  - {name: scratch, emptyDir: {medium: Memory}}\n", "scratch", []string{TmpVolume, "scratch"}},
		{"volumes replaced", "spec:\n  volumes:\n  - $patch: replace\n  - {name: cache, emptyDir: {}}\n", TmpVolume, []string{"cache", TmpVolume}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod, err := RenderGroup(Group{Namespace: "runs", Override: tc.override})
			if err != nil {
				t.Fatal(err)
			}
			w := container(pod, WorkerContainer)
			var mount string
			for _, m := range w.VolumeMounts {
				if m.MountPath == "/tmp" {
					mount = m.Name
				}
			}
			var vols []string
			for _, v := range pod.Spec.Volumes {
				vols = append(vols, v.Name)
			}
			slices.Sort(vols)
			if mount != tc.wantMount || !slices.Equal(vols, tc.wantVols) {
				t.Errorf("/tmp mounts %q, volumes %v; want %q, %v", mount, vols, tc.wantMount, tc.wantVols)
			}
		})
	}
}
