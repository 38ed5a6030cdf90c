// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
)

const labelAddr = "kubeplay_node_label.test"

// seed002Spec is the custom spec Nodepool recommends as a starting point
// (seed 002), verbatim.
const seed002Spec = `containers:
  - name: custom-pod
    image: ubuntu:jammy
    imagePullPolicy: IfNotPresent
    command: ["/bin/sh", "-c"]
    args: ["while true; do sleep 30; done;"]`

func labelConfig(e *testEnv, body string) string {
	return e.providerBlock() + "\nresource \"kubeplay_node_label\" \"test\" {\n" + body + "}\n"
}

// TestAccNodeLabel_lifecycle creates a pod label with every pod attribute,
// checks the stored PodTemplate, updates, imports, repairs edits made outside
// Terraform and destroys it.
func TestAccNodeLabel_lifecycle(t *testing.T) {
	e := newTestEnv(t)
	name, img := randName("fedora"), acctest.TestImage()
	v1 := fmt.Sprintf(`  name              = %q
  image             = %q
  image_pull_policy = "IfNotPresent"
  cpu               = "250m"
  cpu_limit         = "1"
  memory            = 128
  storage           = 100
  gpu               = "1"
  gpu_resource      = "example.com/gpu"
  extra_resources   = { "example.com/dongle" = "2" }
  env = [
    { name = "B", value = "2" },
    { name = "A", value = "1" },
  ]
  node_selector  = { "kubernetes.io/os" = "linux" }
  scheduler_name = "default-scheduler"
  privileged     = false
  volumes        = yamlencode([{ name = "cache", emptyDir = {} }])
  volume_mounts  = yamlencode([{ name = "cache", mountPath = "/cache" }])
  labels         = { team = "ci" }
  dynamic_labels = { "kubeplay.io/run" = "run-{run.id}", who = "{run.name}-{run.label}" }
  annotations    = { "example.com/note" = "any text" }
  python_path    = "/usr/bin/python3"
  shell_type     = "sh"
`, name, img)
	v2 := fmt.Sprintf(`  name         = %q
  image        = %q
  cpu          = "250m"
  memory       = 128
  memory_limit = 256
  env          = []
  labels       = { team = "ci" }
`, name, img)

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			if _, err := e.kube.CoreV1().PodTemplates(e.catalog).Get(context.Background(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("PodTemplate %s still exists (err %v)", name, err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: labelConfig(e, v1),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(labelAddr, plancheck.ResourceActionCreate),
					plancheck.ExpectKnownValue(labelAddr, tfjsonpath.New("rendered_template"), knownvalue.StringRegexp(regexp.MustCompile(`restartPolicy: Never`))),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(labelAddr, tfjsonpath.New("type"), knownvalue.StringExact("pod")),
					statecheck.ExpectKnownValue(labelAddr, tfjsonpath.New("env").AtSliceIndex(0).AtMapKey("name"), knownvalue.StringExact("B")),
				},
				Check: e.checkPodTemplate(name, func(pt *corev1.PodTemplate) error {
					c := pt.Template.Spec.Containers[0]
					res := c.Resources
					checks := map[string][2]string{
						"cpu request":     {res.Requests.Cpu().String(), "250m"},
						"cpu limit":       {res.Limits.Cpu().String(), "1"},
						"memory limit":    {res.Limits.Memory().String(), "128Mi"}, // falls back to the request
						"storage request": {res.Requests.StorageEphemeral().String(), "100M"},
						"gpu request":     {qty(res.Requests, "example.com/gpu"), "1"},
						"gpu limit":       {qty(res.Limits, "example.com/gpu"), "1"},
						"dongle limit":    {qty(res.Limits, "example.com/dongle"), "2"},
						"container":       {c.Name + " " + c.Image + " " + string(c.ImagePullPolicy), "worker " + img + " IfNotPresent"},
						"env":             {fmt.Sprint(c.Env), "[{B 2 nil} {A 1 nil}]"},
						"mount":           {c.VolumeMounts[0].MountPath, "/cache"},
						"restartPolicy":   {string(pt.Template.Spec.RestartPolicy), "Never"},
						"label type":      {pt.Annotations["kubeplay.io/label-type"], "pod"},
						"python path":     {pt.Annotations["kubeplay.io/python-path"], "/usr/bin/python3"},
						"shell type":      {pt.Annotations["kubeplay.io/shell-type"], "sh"},
						"dynamic labels":  {pt.Annotations["kubeplay.io/dynamic-labels"], `{"kubeplay.io/run":"run-{run.id}","who":"{run.name}-{run.label}"}`},
						"template labels": {pt.Template.Labels["team"] + " " + pt.Template.Annotations["example.com/note"], "ci any text"},
					}
					for what, c := range checks {
						if c[0] != c[1] {
							return fmt.Errorf("%s = %q, want %q", what, c[0], c[1])
						}
					}
					return nil
				}),
			},
			{
				Config: labelConfig(e, v2),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(labelAddr, plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(labelAddr, tfjsonpath.New("gpu"), knownvalue.Null()),
					statecheck.ExpectKnownValue(labelAddr, tfjsonpath.New("env"), knownvalue.ListSizeExact(0)),
				},
				Check: e.checkPodTemplate(name, func(pt *corev1.PodTemplate) error {
					res := pt.Template.Spec.Containers[0].Resources
					if got := res.Limits.Memory().String(); got != "256Mi" {
						return fmt.Errorf("memory limit = %s, want 256Mi", got)
					}
					if _, ok := res.Limits["example.com/gpu"]; ok {
						return fmt.Errorf("the gpu limit survived its removal: %v", res.Limits)
					}
					return nil
				}),
			},
			{
				ResourceName:                         labelAddr,
				ImportState:                          true,
				ImportStateId:                        name,
				ImportStateVerify:                    true,
				ImportStateVerifyIdentifierAttribute: "name",
			},
			{
				// The template was edited by hand: drift, and apply writes it again.
				PreConfig: func() {
					e.editPodTemplate(name, func(pt *corev1.PodTemplate) { pt.Template.Spec.Containers[0].Image = "edited:latest" })
				},
				Config: labelConfig(e, v2),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(labelAddr, plancheck.ResourceActionUpdate),
				}},
				Check: e.checkPodTemplate(name, func(pt *corev1.PodTemplate) error {
					if got := pt.Template.Spec.Containers[0].Image; got != img {
						return fmt.Errorf("image = %q after the repair, want %q", got, img)
					}
					return nil
				}),
			},
			{
				// An edit of the stored attributes shows as their diff.
				PreConfig: func() {
					e.editPodTemplate(name, func(pt *corev1.PodTemplate) {
						var l podspec.Label
						if err := json.Unmarshal([]byte(pt.Annotations[catalog.AnnotationLabelSpec]), &l); err != nil {
							t.Fatal(err)
						}
						l.CPU = "2"
						b, _ := json.Marshal(l)
						pt.Annotations[catalog.AnnotationLabelSpec] = string(b)
					})
				},
				Config: labelConfig(e, v2),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(labelAddr, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(labelAddr, tfjsonpath.New("cpu"), knownvalue.StringExact("250m")),
				}},
			},
			{
				PreConfig: func() {
					if err := e.kube.CoreV1().PodTemplates(e.catalog).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: labelConfig(e, v2),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(labelAddr, plancheck.ResourceActionCreate),
				}},
			},
		},
	})
}

// TestAccNodeLabel_specAndNamespace: seed 002's recommended spec is used
// verbatim, a namespace label renders its RBAC with real API groups, and a
// data source reads a label by name.
func TestAccNodeLabel_specAndNamespace(t *testing.T) {
	e := newTestEnv(t)
	name, nsName := randName("custom-pod"), randName("ns")
	want := fmt.Sprintf(`metadata:
  labels:
    app.kubernetes.io/managed-by: kubeplay
    kubeplay.io/node-label: %s
    team: ci
spec:
  containers:
  - args:
    - while true; do sleep 30; done;
    command:
    - /bin/sh
    - -c
    image: ubuntu:jammy
    imagePullPolicy: IfNotPresent
    name: custom-pod
`, name)
	cfg := labelConfig(e, fmt.Sprintf("  name   = %q\n  labels = { team = \"ci\" }\n  spec   = <<-EOT\n%s\n  EOT\n", name, seed002Spec)) +
		fmt.Sprintf(`
resource "kubeplay_node_label" "ns" {
  name   = %q
  type   = "namespace"
  labels = { team = "ci" }
}

data "kubeplay_node_label" "test" {
  name = kubeplay_node_label.test.name
}
`, nsName)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue(labelAddr, tfjsonpath.New("rendered_template"), knownvalue.StringExact(want)),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(labelAddr, tfjsonpath.New("rendered_template"), knownvalue.StringExact(want)),
					statecheck.ExpectKnownValue("kubeplay_node_label.ns", tfjsonpath.New("rendered_template"),
						knownvalue.StringRegexp(regexp.MustCompile(`(?s)kind: Namespace.*team: ci.*kind: Role\n.*- pods/log.*apiGroup: rbac.authorization.k8s.io`))),
					statecheck.ExpectKnownValue("data.kubeplay_node_label.test", tfjsonpath.New("spec"), knownvalue.StringExact(seed002Spec+"\n")),
					statecheck.CompareValuePairs(labelAddr, tfjsonpath.New("rendered_template"),
						"data.kubeplay_node_label.test", tfjsonpath.New("rendered_template"), compare.ValuesSame()),
				},
				Check: e.checkPodTemplate(name, func(pt *corev1.PodTemplate) error {
					if c := pt.Template.Spec.Containers; len(c) != 1 || c[0].Name != "custom-pod" || len(c[0].Resources.Requests) != 0 {
						return fmt.Errorf("stored containers = %+v", c)
					}
					return nil
				}),
			},
			{
				ResourceName:                         "kubeplay_node_label.ns",
				ImportState:                          true,
				ImportStateId:                        nsName,
				ImportStateVerify:                    true,
				ImportStateVerifyIdentifierAttribute: "name",
			},
		},
	})
}

// TestAccNodeLabel_planErrors: each bad input fails the plan at its
// attribute. Validation needs no cluster, so it runs in plain go test.
func TestAccNodeLabel_planErrors(t *testing.T) {
	cases := []struct{ body, want string }{
		{"  image_pull_policy = \"Sometimes\"\n", `(?s)image_pull_policy.*value must be one of`},
		{"  gpu = \"1\"\n", `(?s)Missing GPU Resource.*gpu_resource`},
		{"  memory = -1\n", `(?s)memory.*must be at least 0`},
		{"  cpu = \"1.2.3\"\n", `(?s)Invalid Quantity.*"1.2.3" is not a Kubernetes quantity`},
		{"  cpu_limit = \"-500m\"\n", `(?s)Invalid Quantity.*"-500m" is negative`},
		{"  cpu = \"2\"\n  cpu_limit = \"1\"\n", `(?s)Limit Below Request.*cpu_limit \(1\) is below cpu \(2\)`},
		{"  image = \"x\"\n  spec = \"containers: [{name: a, image: b}]\"\n", `(?s)Conflicting Attributes.*image = "x".*spec is used verbatim`},
		{"  spec = \"containers:\\n - name: a\\n  image: b\\n\"\n", `(?s)Invalid Spec.*yaml: line 2`},
		{"  spec = \"kind: Pod\\nspec: {}\\n\"\n", `(?s)Invalid Spec.*kind is a field of a Pod, not of a PodSpec`},
		{"  dynamic_labels = { req = \"{request.id}\" }\n", `(?s)Invalid Label Template.*unknown placeholder \{request.id\}`},
		{"  dynamic_labels = { ws = \"{run.workspace}\" }\n", `(?s)Workspace Placeholder Not Supported.*does not tell providers.*terraform\.workspace`},
		{"  type = \"namespace\"\n  image = \"x\"\n", `(?s)Attribute Not Allowed For Namespace Labels.*image`},
		{"  volumes = \"- name: a\\n  emptyDir: {}\\n - name: b\\n\"\n", `(?s)Invalid Volumes.*line \d`},
		{"  volume_mounts = \"- name: a\\n  mountPth: /x\\n\"\n", `(?s)Invalid Volume mounts.*line 2: unknown field`},
		{"  type = \"vm\"\n", `(?s)type.*value must be one of`},
		{"  python_path = \"python3\"\n", `(?s)python_path.*must be an absolute path without whitespace`},
		{"  python_path = \"/usr/bin/env python3\"\n", `(?s)python_path.*must be an absolute path without whitespace`},
		{"  python_path = \"/usr/bin/python3\\n\"\n", `(?s)python_path.*must be an absolute path without whitespace`},
		{"  shell_type = \"bash\"\n", `(?s)shell_type.*value must be one of.*"sh".*"cmd"`},
	}
	steps := make([]resource.TestStep, 0, len(cases))
	for _, c := range cases {
		steps = append(steps, resource.TestStep{
			Config:      unreachableProvider + "\nresource \"kubeplay_node_label\" \"test\" {\n  name = \"bad\"\n" + c.body + "}\n",
			PlanOnly:    true,
			ExpectError: expectError(c.want),
		})
	}
	resource.UnitTest(t, resource.TestCase{ProtoV6ProviderFactories: testAccProtoV6ProviderFactories, Steps: steps})
}

func qty(list corev1.ResourceList, name string) string {
	q := list[corev1.ResourceName(name)]
	return q.String()
}

func (e *testEnv) checkPodTemplate(name string, check func(*corev1.PodTemplate) error) resource.TestCheckFunc {
	return func(*terraform.State) error {
		pt, err := e.kube.CoreV1().PodTemplates(e.catalog).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		return check(pt)
	}
}

func (e *testEnv) editPodTemplate(name string, edit func(*corev1.PodTemplate)) {
	e.t.Helper()
	pts := e.kube.CoreV1().PodTemplates(e.catalog)
	pt, err := pts.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	edit(pt)
	if _, err := pts.Update(context.Background(), pt, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// TestAccNodeLabel_inheritsGroupImage: a pod label that sets no image is
// stored with a placeholder image, and a run with it runs in its container
// group's image.
func TestAccNodeLabel_inheritsGroupImage(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-labelimg")
	name := randName("noimage")
	cfg := e.runGroup(randName("grp"), ns) + fmt.Sprintf(`
resource "kubeplay_node_label" "test" {
  name   = %q
  memory = 64
}

resource "kubeplay_run" "test" {
  container_group = kubeplay_container_group.g.name
  node_label      = kubeplay_node_label.test.name
  command         = ["sh", "-c", "echo ran"]
}
`, name)
	worker := knownvalue.StringRegexp(regexp.MustCompile(`(?s)image: ` + regexp.QuoteMeta(acctest.TestImage()) +
		`\n\s+imagePullPolicy: IfNotPresent\n\s+name: worker\n\s+resources:.*memory: 64Mi`))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{{
			Config: cfg,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectKnownValue(runAddr, tfjsonpath.New("rendered_pod"), worker),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(labelAddr, tfjsonpath.New("image"), knownvalue.Null()),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("successful")),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("output"), knownvalue.StringExact("ran\n")),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("rendered_pod"), worker),
			},
			Check: resource.ComposeAggregateTestCheckFunc(
				// The label's template shows no image: it has none of its own.
				resource.TestCheckResourceAttrWith(labelAddr, "rendered_template", func(v string) error {
					if strings.Contains(v, "image:") {
						return fmt.Errorf("rendered_template shows an image:\n%s", v)
					}
					return nil
				}),
				e.checkPodTemplate(name, func(pt *corev1.PodTemplate) error {
					if got := pt.Template.Spec.Containers[0].Image; got != catalog.GroupImagePlaceholder {
						return fmt.Errorf("stored image %q, want the placeholder %q", got, catalog.GroupImagePlaceholder)
					}
					return nil
				}),
			),
		}},
	})
}
