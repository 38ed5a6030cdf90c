// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
)

// plainDigest is the unkeyed digest kubeplay recorded before it signed its
// catalog: anyone who can edit an object can compute it.
func plainDigest(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:", len(p))
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// forgeGroup edits a group's stored JSON as an attacker with ConfigMap write
// access would, and records the plain digest of the result.
func (e *testEnv) forgeGroup(name string, edit func(map[string]any)) {
	e.t.Helper()
	e.editConfigMap(name, func(cm *corev1.ConfigMap) {
		var g map[string]any
		if err := json.Unmarshal([]byte(cm.Data[catalog.GroupSpecKey]), &g); err != nil {
			e.t.Fatal(err)
		}
		edit(g)
		b, _ := json.Marshal(g)
		cm.Data[catalog.GroupSpecKey] = string(b)
		var parts [][]byte
		for _, k := range slices.Sorted(maps.Keys(cm.Data)) {
			parts = append(parts, []byte(k), []byte(cm.Data[k]))
		}
		cm.Annotations[catalog.AnnotationDigest] = plainDigest(parts...)
	})
}

// forgeLabel does the same to a node label's PodTemplate.
func (e *testEnv) forgeLabel(name string, edit func(map[string]any)) {
	e.t.Helper()
	e.editPodTemplate(name, func(pt *corev1.PodTemplate) {
		var l map[string]any
		if err := json.Unmarshal([]byte(pt.Annotations[catalog.AnnotationLabelSpec]), &l); err != nil {
			e.t.Fatal(err)
		}
		edit(l)
		b, _ := json.Marshal(l)
		pt.Annotations[catalog.AnnotationLabelSpec] = string(b)
		tpl, _ := json.Marshal(pt.Template)
		parts := [][]byte{tpl}
		for _, k := range slices.Sorted(maps.Keys(pt.Annotations)) {
			if strings.HasPrefix(k, "kubeplay.io/") && k != catalog.AnnotationDigest {
				parts = append(parts, []byte(k), []byte(pt.Annotations[k]))
			}
		}
		pt.Annotations[catalog.AnnotationDigest] = plainDigest(parts...)
	})
}

// checkNoPodEver fails when a pod was ever scheduled in ns: its events
// outlive the pod.
func (e *testEnv) checkNoPodEver(ns string) {
	e.t.Helper()
	evs, err := e.kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.kind=Pod"})
	if err != nil {
		e.t.Fatal(err)
	}
	if len(evs.Items) > 0 {
		e.t.Fatalf("a pod was made in %s: %s %s", ns, evs.Items[0].InvolvedObject.Name, evs.Items[0].Reason)
	}
}

// trustConfig is a group and, with label set, a node label, as another
// workspace would manage them; forget adds removed blocks for them (the
// objects stay), adopt imports blocks (an apply writes them again).
func (e *testEnv) trustConfig(group, ns, label string) (defs, forget, adopt string) {
	defs = fmt.Sprintf(`
resource "kubeplay_container_group" "g" {
  name      = %q
  namespace = %q
  image     = %q
}
`, group, ns, acctest.TestImage())
	addr, id := "kubeplay_container_group.g", group
	if label != "" {
		defs += fmt.Sprintf(`
resource "kubeplay_node_label" "l" {
  name   = %q
  image  = %q
  labels = { tier = "small" }
}
`, label, acctest.TestImage())
		addr, id = "kubeplay_node_label.l", label
	}
	forget = fmt.Sprintf("\nremoved {\n  from = %s\n  lifecycle {\n    destroy = false\n  }\n}\n", addr)
	adopt = fmt.Sprintf("\nimport {\n  to = %s\n  id = %q\n}\n", addr, id)
	return defs, forget, adopt
}

func trustRun(group, label string) string {
	return fmt.Sprintf(`
resource "kubeplay_run" "test" {
  container_group = %s
  node_label      = %s
  command         = ["sh", "-c", "echo ran"]
}
`, group, label)
}

// TestAccRun_groupChangedOutsideKubeplay (#25, finding 2): a group whose
// ConfigMap was edited out of band into a privileged pod with the host's
// PID namespace and / mounted, its plain digest recomputed, is refused for
// a run with "Container Group Changed Outside Kubeplay" before any pod
// exists; applying the group again repairs it and the run runs.
func TestAccRun_groupChangedOutsideKubeplay(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("plan-trust")
	group := randName("plan-grp")
	defs, forget, adopt := e.trustConfig(group, ns, "")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{
			{Config: e.providerBlock() + defs},
			// Another workspace manages the group: this one forgets it.
			{Config: e.providerBlock() + forget},
			{
				PreConfig: func() {
					e.forgeGroup(group, func(g map[string]any) {
						g["pod_security_level"] = "privileged"
						g["pod_spec_override"] = `{"spec":{"hostPID":true,"volumes":[{"name":"host","hostPath":{"path":"/"}}]}}`
					})
				},
				Config: e.providerBlock() + trustRun(fmt.Sprintf("%q", group), "null"),
				ExpectError: expectError(fmt.Sprintf(`(?s)Container Group Changed Outside Kubeplay.*Container group "%s" is `+
					`refused: ConfigMap %s/%s has an unsigned digest, which anyone who can edit it can compute.*Nothing was started.*`+
					`Write it again from its definition: apply the workspace that manages the kubeplay_container_group named "%s"`,
					group, e.catalog, group, group)),
			},
			{
				// Applying the group again (here: adopting it) repairs it.
				PreConfig: func() { e.checkNoPodEver(ns) },
				Config:    e.providerBlock() + defs + adopt + trustRun("kubeplay_container_group.g.name", "null"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("kubeplay_container_group.g", plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("successful")),
				},
				Check: func(s *terraform.State) error {
					if p := s.RootModule().Resources[runAddr].Primary.Attributes["rendered_pod"]; strings.Contains(p, "hostPID") || strings.Contains(p, "hostPath") {
						return fmt.Errorf("the run's pod has the forged host access:\n%s", p)
					}
					return nil
				},
			},
		},
	})
}

// TestAccRun_labelChangedOutsideKubeplay is the test above for a node label
// whose PodTemplate was edited out of band.
func TestAccRun_labelChangedOutsideKubeplay(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("plan-trust")
	group, label := randName("plan-grp"), randName("plan-lbl")
	defs, forget, adopt := e.trustConfig(group, ns, label)
	groupOnly, _, _ := e.trustConfig(group, ns, "")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{
			{Config: e.providerBlock() + defs},
			{Config: e.providerBlock() + groupOnly + forget},
			{
				PreConfig: func() {
					e.forgeLabel(label, func(l map[string]any) {
						l["labels"] = map[string]any{"tier": "small", "forged": "yes"}
					})
				},
				Config: e.providerBlock() + groupOnly + trustRun("kubeplay_container_group.g.name", fmt.Sprintf("%q", label)),
				ExpectError: expectError(fmt.Sprintf(`(?s)Node Label Changed Outside Kubeplay.*Node label "%s" is refused: `+
					`PodTemplate %s/%s has an unsigned digest.*Nothing was started.*Write it again from its `+
					`definition: apply the workspace that manages the kubeplay_node_label named "%s"`, label, e.catalog, label, label)),
			},
			{
				PreConfig: func() { e.checkNoPodEver(ns) },
				Config:    e.providerBlock() + defs + adopt + trustRun("kubeplay_container_group.g.name", "kubeplay_node_label.l.name"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("kubeplay_node_label.l", plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("successful")),
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("rendered_pod"), knownvalue.StringRegexp(regexp.MustCompile(`tier: small`))),
				},
				Check: func(s *terraform.State) error {
					if p := s.RootModule().Resources[runAddr].Primary.Attributes["rendered_pod"]; strings.Contains(p, "forged") {
						return fmt.Errorf("the run's pod has the forged label:\n%s", p)
					}
					return nil
				},
			},
		},
	})
}

// forgePlanCheck forges the group between plan and apply: plugin-testing
// applies the plan it saved (terraform plan -out, terraform apply PLAN).
type forgePlanCheck struct {
	e     *testEnv
	group string
}

func (c forgePlanCheck) CheckPlan(ctx context.Context, _ plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	resp.Error = forgeSigned(ctx, c.e.kube, c.e.catalog, c.group)
}

// TestAccRun_groupChangedAfterPlan: a saved plan of a run, then the group
// is rewritten with a valid signature (by someone holding the catalog key)
// before the plan is applied. The apply must not run a pod other than the
// planned rendered_pod; nothing is created. Terraform itself stops this
// one: it plans the run again at apply, which renders the rewritten group,
// and refuses a plan whose known rendered_pod changed. The run's own check
// (TestAccRun_groupChangedDuringApply) covers changes after that plan.
func TestAccRun_groupChangedAfterPlan(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("plan-after")
	group := randName("plan-grp")
	defs, forget, _ := e.trustConfig(group, ns, "")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{
			{Config: e.providerBlock() + defs},
			{Config: e.providerBlock() + forget},
			{
				Config: e.providerBlock() + trustRun(fmt.Sprintf("%q", group), "null"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue(runAddr, tfjsonpath.New("rendered_pod"), knownvalue.StringRegexp(regexp.MustCompile(`image: `))),
					forgePlanCheck{e: e, group: group},
				}},
				ExpectError: expectError(`(?s)Provider produced inconsistent final plan.*kubeplay_run.test.*\.rendered_pod: was`),
			},
			{
				PreConfig: func() { e.checkNoPodEver(ns) },
				Config:    e.providerBlock(),
			},
		},
	})
}

// TestHelperForgeGroup is not a test: TestAccRun_groupChangedDuringApply
// runs the test binary with it from a local-exec provisioner, to forge the
// group after Terraform applied it and before it applies the run.
// forgeGroupHCL is a terraform_data resource whose provisioner runs
// TestHelperForgeGroup on group when kubeplay_container_group.<addr>'s
// max_concurrent_runs changes: a rewrite by someone holding the catalog
// key, in the middle of an apply.
func (e *testEnv) forgeGroupHCL(exe, group, addr string) string {
	return fmt.Sprintf(`
resource "terraform_data" "forge" {
  triggers_replace = [kubeplay_container_group.%s.max_concurrent_runs]
  provisioner "local-exec" {
    command = "%s -test.run='^TestHelperForgeGroup$' -test.count=1"
    environment = {
      KUBEPLAY_PLAN_FORGE      = "1"
      KUBEPLAY_PLAN_CATALOG    = %q
      KUBEPLAY_PLAN_GROUP      = %q
      KUBEPLAY_TEST_KUBECONFIG = %q
    }
  }
}
`, addr, exe, e.catalog, group, e.kubeconfig)
}

func TestHelperForgeGroup(t *testing.T) {
	if os.Getenv("KUBEPLAY_PLAN_FORGE") != "1" {
		t.Skip("a helper of TestAccRun_groupChangedDuringApply")
	}
	kube, err := kubernetes.NewForConfig(acctest.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := forgeSigned(context.Background(), kube, os.Getenv("KUBEPLAY_PLAN_CATALOG"), os.Getenv("KUBEPLAY_PLAN_GROUP")); err != nil {
		t.Fatal(err)
	}
}

// TestAccRun_groupChangedDuringApply: the group changes in the same apply
// as a new run, so the run's plan renders the group as planned; between the
// group's apply and the run's, someone holding the catalog key rewrites it
// (a local-exec provisioner here). The run must fail with the difference
// from the planned pod, before any pod exists.
func TestAccRun_groupChangedDuringApply(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("plan-during")
	group := randName("plan-grp")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	groupCfg := func(runs int) string {
		return fmt.Sprintf(`
resource "kubeplay_container_group" "g" {
  name                = %q
  namespace           = %q
  image               = %q
  max_concurrent_runs = %d
}
`, group, ns, acctest.TestImage(), runs)
	}
	forger := e.forgeGroupHCL(exe, group, "g") + `
resource "kubeplay_run" "test" {
  container_group = kubeplay_container_group.g.name
  command         = ["sh", "-c", "echo ran"]
  depends_on      = [terraform_data.forge]
}
`
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{
			{Config: e.providerBlock() + groupCfg(2)},
			{
				Config: e.providerBlock() + groupCfg(3) + forger,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue(runAddr, tfjsonpath.New("rendered_pod"), knownvalue.StringRegexp(regexp.MustCompile(`image: `))),
				}},
				ExpectError: expectError(`(?s)Run Pod Differs From Plan.*Nothing was created, claimed or sent to a pod.*` +
					`\+\s+example.com/forged: "?yes"?.*\+\s+hostPID: true.*Plan again`),
			},
			{
				PreConfig: func() { e.checkNoPodEver(ns) },
				Config:    e.providerBlock() + groupCfg(3),
			},
		},
	})
}

// TestAccNode_groupChangedOutsideKubeplay: a held node is not started from
// a group changed outside kubeplay either; applying the group again repairs
// it and the node starts.
func TestAccNode_groupChangedOutsideKubeplay(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("plan-node")
	group, node := randName("plan-grp"), randName("plan-node")
	defs, forget, adopt := e.trustConfig(group, ns, "")
	held := func(groupRef string) string {
		return fmt.Sprintf("\nresource \"kubeplay_node\" \"n\" {\n  name            = %q\n  container_group = %s\n}\n", node, groupRef)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: e.providerBlock() + defs},
			{Config: e.providerBlock() + forget},
			{
				PreConfig: func() {
					e.forgeGroup(group, func(g map[string]any) {
						g["pod_security_level"] = "privileged"
						g["pod_spec_override"] = `{"spec":{"hostPID":true}}`
					})
				},
				Config:      e.providerBlock() + held(fmt.Sprintf("%q", group)),
				ExpectError: expectError(`(?s)Container Group Changed Outside Kubeplay.*Container group "` + group + `" is refused.*Write it again`),
			},
			{
				PreConfig: func() { e.checkNoPodEver(ns) },
				Config:    e.providerBlock() + defs + adopt + held("kubeplay_container_group.g.name"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("kubeplay_container_group.g", plancheck.ResourceActionUpdate),
				}},
				Check: func(s *terraform.State) error {
					if p := s.RootModule().Resources["kubeplay_node.n"].Primary.Attributes["rendered_pod"]; p == "" || strings.Contains(p, "hostPID") {
						return fmt.Errorf("the node's pod:\n%s", p)
					}
					return nil
				},
			},
		},
	})
}
