// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package podspec

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

// seed000 is AWX's container group example (seed 000), verbatim.
const seed000 = `{
  "apiVersion": "v1",
  "kind": "Pod",
  "metadata": {
    "namespace": "my-namespace"
  },
  "spec": {
    "containers": [
      {
        "args": [
          "sleep",
          "infinity"
        ],
        "image": "my-custom-image",
        "stdin": true,
        "tty": true
      }
    ]
  }
}`

func TestRenderGroup_defaults(t *testing.T) {
	pod, err := RenderGroup(Group{Name: "g", Namespace: "runs", Labels: map[string]string{"team": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	s := pod.Spec
	if len(s.Containers) != 1 || s.Containers[0].Name != WorkerContainer || s.Containers[0].Image != DefaultImage {
		t.Fatalf("containers = %+v", s.Containers)
	}
	if s.RestartPolicy != corev1.RestartPolicyNever || !ptr.Equal(s.AutomountServiceAccountToken, ptr.To(false)) {
		t.Errorf("restartPolicy %q, automount %v", s.RestartPolicy, s.AutomountServiceAccountToken)
	}
	if got := s.Containers[0].Resources.Requests.Cpu().String(); got != "250m" {
		t.Errorf("cpu request = %s", got)
	}
	if pod.Labels["team"] != "a" || pod.Labels[managed.LabelContainerGroup] != "g" || pod.Namespace != "runs" {
		t.Errorf("metadata = %+v", pod.ObjectMeta)
	}
}

func TestRenderGroup_merge(t *testing.T) {
	cases := []struct {
		name, override string
		check          func(t *testing.T, p *corev1.Pod)
	}{
		{"seed 000 verbatim: unnamed first container is the worker", seed000, func(t *testing.T, p *corev1.Pod) {
			c := p.Spec.Containers
			if len(c) != 1 || c[0].Name != WorkerContainer || c[0].Image != "my-custom-image" || !c[0].Stdin || !c[0].TTY {
				t.Fatalf("containers = %+v", c)
			}
			if strings.Join(c[0].Args, " ") != "sleep infinity" || c[0].Resources.Requests.Memory().String() != "100Mi" {
				t.Errorf("worker lost defaults: %+v", c[0])
			}
		}},
		{"a bare PodSpec in YAML", "containers:\n- name: worker\n  image: other\nnodeSelector:\n  disk: ssd\n", func(t *testing.T, p *corev1.Pod) {
			if p.Spec.Containers[0].Image != "other" || p.Spec.NodeSelector["disk"] != "ssd" {
				t.Errorf("spec = %+v", p.Spec)
			}
		}},
		{"a sidecar is added and the worker stays first", "spec:\n  containers:\n  - name: db\n    image: postgres\n  - name: worker\n    env:\n    - name: A\n      value: b\n", func(t *testing.T, p *corev1.Pod) {
			c := p.Spec.Containers
			if len(c) != 2 || c[0].Name != WorkerContainer || c[1].Name != "db" {
				t.Fatalf("containers = %v", names(c))
			}
			if c[0].Image != DefaultImage || len(c[0].Env) != 1 {
				t.Errorf("worker = %+v", c[0])
			}
		}},
		{"labels merge, restartPolicy is kept", "metadata:\n  labels:\n    extra: x\nspec:\n  serviceAccountName: runner\n", func(t *testing.T, p *corev1.Pod) {
			if p.Labels["extra"] != "x" || p.Labels[managed.LabelManagedBy] != managed.ManagedByValue || p.Spec.ServiceAccountName != "runner" ||
				p.Spec.RestartPolicy != corev1.RestartPolicyNever {
				t.Errorf("pod = %+v", p)
			}
		}},
		{"a $patch directive replaces the list", "spec:\n  containers:\n  - name: worker\n    image: solo\n  - $patch: replace\n", func(t *testing.T, p *corev1.Pod) {
			c := p.Spec.Containers
			if len(c) != 1 || c[0].Image != "solo" || len(c[0].Args) != 0 {
				t.Errorf("containers = %+v", c)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ns := "runs"
			if c.override == seed000 {
				ns = "my-namespace"
			}
			p, err := RenderGroup(Group{Namespace: ns, Override: c.override})
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, p)
		})
	}
}

func names(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func TestParseOverride_errors(t *testing.T) {
	cases := []struct{ name, text, want string }{
		{"YAML syntax", "spec:\n  containers:\n  - name: a\n   image: b\n", `not valid YAML or JSON: yaml: line 3: did not find expected key`},
		{"JSON syntax", "{\n  \"spec\": {\n    \"containers\": [\n  }\n}", `line \d`},
		{"not a Pod", "apiVersion: apps/v1\nkind: Deployment\nspec: {}\n", `is a Deployment, not a Pod`},
		{"a list", "- a\n- b\n", `is a list, not a Pod or PodSpec`},
		{"unknown field", "spec:\n  containers:\n  - name: a\n    imagee: b\n", `line 4: unknown field "spec.containers\[0\].imagee"`},
		{"unknown field in a PodSpec", "containers:\n- name: a\nnodeSelectr: {}\n", `line 3: unknown field "spec.nodeSelectr"`},
		{"wrong type", "spec:\n  containers: worker\n", `line 2: field spec.containers has the wrong type`},
		{"two documents", "spec: {}\n---\nspec: {}\n", `2 YAML documents`},
		{"name set", "metadata:\n  name: fixed\n", `line 2: metadata.name is set`},
		{"unnamed second container", "spec:\n  containers:\n  - image: a\n  - image: b\n", `spec.containers\[1\] has no name`},
		{"status", "spec: {}\nstatus:\n  phase: Running\n", `line 2: status is set by the cluster`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseOverride(c.text)
			if err == nil || !regexp.MustCompile(c.want).MatchString(err.Error()) {
				t.Fatalf("error = %v, want match %q", err, c.want)
			}
		})
	}
}

func TestRenderGroup_namespaceConflict(t *testing.T) {
	_, err := RenderGroup(Group{Namespace: "runs", Override: seed000})
	var ce *NamespaceConflictError
	if !errors.As(err, &ce) || ce.Override != "my-namespace" {
		t.Fatalf("error = %v", err)
	}
}

func TestToYAML_stable(t *testing.T) {
	p, err := RenderGroup(Group{Namespace: "runs", Image: "img"})
	if err != nil {
		t.Fatal(err)
	}
	y, err := ToYAML(p)
	if err != nil {
		t.Fatal(err)
	}
	want := `apiVersion: v1
kind: Pod
metadata:
  labels:
    app.kubernetes.io/managed-by: kubeplay
  namespace: runs
spec:
  automountServiceAccountToken: false
  containers:
  - args:
    - sh
    - -c
    - 'sh -c ''echo $PPID'' >/tmp/kubeplay-worker.pid; trap ''exit 0'' TERM; sleep
      45 & wait; set -- /tmp/kubeplay.*; [ -e "$1" ] || { echo ''kubeplay: no run
      started in this pod in time; ending it'' >&2; exit 0; }; sleep infinity & wait'
    image: img
    imagePullPolicy: IfNotPresent
    name: worker
    resources:
      requests:
        cpu: 250m
        memory: 100Mi
    volumeMounts:
    - mountPath: /tmp
      name: kubeplay-tmp
  restartPolicy: Never
  volumes:
  - emptyDir:
      sizeLimit: 1Gi
    name: kubeplay-tmp
`
	if y != want {
		t.Errorf("YAML:\n%s\nwant:\n%s", y, want)
	}
}
