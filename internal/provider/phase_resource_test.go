// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/phase"
)

const phaseAddr = "kubeplay_phase.test"

// phaseConfig renders one kubeplay_phase named res with the given documents
// (HCL strings) and extra attribute lines.
func phaseConfig(res, name string, docs []string, extra string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "resource \"kubeplay_phase\" %q {\n  name = %q\n  documents = [\n", res, name)
	for _, d := range docs {
		fmt.Fprintf(&b, "    %q,\n", d)
	}
	fmt.Fprintf(&b, "  ]\n%s}\n", extra)
	return b.String()
}

// phaseTimeouts2m bounds a phase's applies to 2 minutes.
const phaseTimeouts2m = "  timeouts {\n    create = \"2m\"\n    update = \"2m\"\n  }\n"

func nsDoc(ns string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", ns)
}

func cmDoc(ns, name, value string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\ndata:\n  value: %q\n", name, ns, value)
}

func deploymentDoc(ns, name string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[2]s
  namespace: %[1]s
spec:
  replicas: 1
  selector:
    matchLabels: {app: %[2]s}
  template:
    metadata:
      labels: {app: %[2]s}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: %[3]s
        imagePullPolicy: IfNotPresent
        command: [sleep, infinity]
        resources: {requests: {cpu: 100m}}
`, ns, name, acctest.TestImage())
}

func (e *testEnv) dynamic() dynamic.Interface {
	e.t.Helper()
	d, err := dynamic.NewForConfig(acctest.RESTConfig(e.t))
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

// cleanupNamespace deletes, at the end of the test, a namespace a phase
// creates (destroy normally has).
func (e *testEnv) cleanupNamespace(ns string) {
	e.t.Cleanup(func() {
		err := e.kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			e.t.Errorf("deleting namespace %s: %v", ns, err)
		}
	})
}

func (e *testEnv) cleanupCRD(name string) {
	e.t.Cleanup(func() {
		err := e.dynamic().Resource(crdResource).Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			e.t.Errorf("deleting CRD %s: %v", name, err)
		}
	})
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// inventory returns the members recorded in a phase's inventory ConfigMap.
func (e *testEnv) inventory(name string) ([]phase.Ref, error) {
	cm, err := e.kube.CoreV1().ConfigMaps(e.catalog).Get(context.Background(), phase.InventoryName(name), metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var refs []phase.Ref
	return refs, json.Unmarshal([]byte(cm.Data["objects"]), &refs)
}

func (e *testEnv) configMapGone(ns, name string) error {
	_, err := e.kube.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return fmt.Errorf("ConfigMap %s/%s: %v, want NotFound", ns, name, err)
}

func objectsCheck(objs ...[4]string) statecheck.StateCheck {
	var l []knownvalue.Check
	for _, o := range objs {
		l = append(l, knownvalue.ObjectPartial(map[string]knownvalue.Check{
			"api_version": knownvalue.StringExact(o[0]), "kind": knownvalue.StringExact(o[1]),
			"namespace": knownvalue.StringExact(o[2]), "name": knownvalue.StringExact(o[3]),
			"digest": knownvalue.StringRegexp(regexp.MustCompile(`^[0-9a-f]{16}$`)),
		}))
	}
	return statecheck.ExpectKnownValue(phaseAddr, tfjsonpath.New("objects"), knownvalue.ListExact(l))
}

// TestAccPhase_lifecycle: apply with readiness, the objects list known at
// plan, the ApplySet labels, out-of-band deletion and change showing a diff,
// update with prune, and destroy waiting until everything is gone.
func TestAccPhase_lifecycle(t *testing.T) {
	e := newTestEnv(t)
	ns := randName("kp-phase")
	e.cleanupNamespace(ns)
	name := randName("life")
	docs := []string{nsDoc(ns), cmDoc(ns, "a", "1") + "---\n" + cmDoc(ns, "b", "1"), deploymentDoc(ns, "web")}
	cfg := func(docs []string, extra string) string {
		return e.providerBlock() + phaseConfig("test", name, docs, extra)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			if _, err := e.kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("namespace %s after destroy: %v, want NotFound", ns, err)
			}
			if _, err := e.inventory(name); !apierrors.IsNotFound(err) {
				return fmt.Errorf("inventory after destroy: %v, want NotFound", err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: cfg(docs, phaseTimeouts2m),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue(phaseAddr, tfjsonpath.New("objects").AtSliceIndex(3).AtMapKey("kind"), knownvalue.StringExact("Deployment")),
					plancheck.ExpectKnownValue(phaseAddr, tfjsonpath.New("inventory_id"), knownvalue.StringExact(phase.ApplySetID(phase.InventoryName(name), e.catalog))),
				}},
				ConfigStateChecks: []statecheck.StateCheck{objectsCheck([4]string{"v1", "Namespace", "", ns}, [4]string{"v1", "ConfigMap", ns, "a"},
					[4]string{"v1", "ConfigMap", ns, "b"}, [4]string{"apps/v1", "Deployment", ns, "web"})},
				Check: func(*terraform.State) error {
					d, err := e.kube.AppsV1().Deployments(ns).Get(context.Background(), "web", metav1.GetOptions{})
					if err != nil {
						return err
					}
					if d.Status.AvailableReplicas != 1 {
						return fmt.Errorf("apply returned before the Deployment was available: %+v", d.Status)
					}
					id := phase.ApplySetID(phase.InventoryName(name), e.catalog)
					if d.Labels[phase.LabelPartOf] != id || d.ManagedFields[0].Manager != "kubeplay" {
						return fmt.Errorf("Deployment labels %v, managers %v", d.Labels, d.ManagedFields)
					}
					refs, err := e.inventory(name)
					if err != nil || len(refs) != 4 {
						return fmt.Errorf("inventory %v, %v: want 4 members", refs, err)
					}
					return nil
				},
			},
			{
				// Deleted outside Terraform: the plan shows it and apply restores it.
				PreConfig: func() {
					if err := e.kube.CoreV1().ConfigMaps(ns).Delete(context.Background(), "a", metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: cfg(docs, phaseTimeouts2m),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(phaseAddr, plancheck.ResourceActionUpdate),
				}},
				Check: func(*terraform.State) error {
					_, err := e.kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "a", metav1.GetOptions{})
					return err
				},
			},
			{
				// Changed outside Terraform: another manager takes over a field.
				PreConfig: func() {
					cm, err := e.kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "b", metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					cm.Data["value"] = "edited"
					if _, err := e.kube.CoreV1().ConfigMaps(ns).Update(context.Background(), cm, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
						t.Fatal(err)
					}
				},
				Config: cfg(docs, phaseTimeouts2m+"  force_conflicts = true\n"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(phaseAddr, plancheck.ResourceActionUpdate),
				}},
				Check: func(*terraform.State) error {
					cm, err := e.kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "b", metav1.GetOptions{})
					if err != nil || cm.Data["value"] != "1" {
						return fmt.Errorf("ConfigMap b: %v, data %v; want the applied value restored", err, cm.Data)
					}
					return nil
				},
			},
			{
				Config:   cfg(docs, phaseTimeouts2m+"  force_conflicts = true\n"),
				PlanOnly: true, // nothing changed: an empty plan
			},
			{
				// b leaves the bundle: prune deletes it.
				Config:            cfg([]string{nsDoc(ns), cmDoc(ns, "a", "2"), deploymentDoc(ns, "web")}, phaseTimeouts2m+"  force_conflicts = true\n"),
				ConfigStateChecks: []statecheck.StateCheck{objectsCheck([4]string{"v1", "Namespace", "", ns}, [4]string{"v1", "ConfigMap", ns, "a"}, [4]string{"apps/v1", "Deployment", ns, "web"})},
				Check: func(*terraform.State) error {
					if err := e.configMapGone(ns, "b"); err != nil {
						return err
					}
					refs, err := e.inventory(name)
					if err != nil || len(refs) != 3 {
						return fmt.Errorf("inventory %v, %v: want 3 members", refs, err)
					}
					return nil
				},
			},
			{
				ResourceName:                         phaseAddr,
				ImportState:                          true,
				ImportStateId:                        name,
				ImportStateVerify:                    true,
				ImportStateVerifyIgnore:              []string{"documents", "objects", "timeouts", "force_conflicts"},
				ImportStateVerifyIdentifierAttribute: "name",
			},
		},
	})
}

// TestAccPhase_crdAndCustomResources: a CRD and its custom resources in one
// phase; the CRs wait for the CRD to be established, also with wait =
// false, and destroy deletes the CRs before the CRD.
func TestAccPhase_crdAndCustomResources(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-crd")
	group := randName("kp") + ".example.com"
	e.cleanupCRD("widgets." + group)
	crd := fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.%[1]s
spec:
  group: %[1]s
  scope: Namespaced
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
`, group)
	cr := func(n string) string {
		return fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n  size: 3\n", group, n, ns)
	}
	widgets := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			if _, err := e.dynamic().Resource(crdResource).Get(context.Background(), "widgets."+group, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("CRD after destroy: %v, want NotFound", err)
			}
			return nil
		},
		Steps: []resource.TestStep{{
			// Custom resources first in the bundle: the order of documents does not matter.
			Config: e.providerBlock() + phaseConfig("test", randName("crd"), []string{cr("one") + "---\n" + cr("two"), crd},
				"  wait = false\n  timeouts {\n    create = \"1m\"\n  }\n"),
			ConfigStateChecks: []statecheck.StateCheck{statecheck.ExpectKnownValue(phaseAddr, tfjsonpath.New("wait"), knownvalue.Bool(false))},
			Check: func(*terraform.State) error {
				l, err := e.dynamic().Resource(widgets).Namespace(ns).List(context.Background(), metav1.ListOptions{})
				if err != nil || len(l.Items) != 2 {
					return fmt.Errorf("widgets: %v, %v; want 2", l, err)
				}
				return nil
			},
		}},
	})
}

func jobDoc(ns, name, command string) string {
	return fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata:
  name: %[2]s
  namespace: %[1]s
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: %[3]s
        imagePullPolicy: IfNotPresent
        command: [%[4]s]
        resources: {requests: {cpu: 100m}}
`, ns, name, acctest.TestImage(), command)
}

const jobCondition = `  wait_conditions = [{
    api_version = "batch/v1"
    kind        = "Job"
    jsonpath    = "{.status.succeeded}"
    value       = "1"
  }]
`

// TestAccPhase_waitConditions: a condition met ends the wait; a Job that
// fails ends it at once with kstatus's message, long before the default 5m
// timeouts (the test's own deadline would catch a wait that ran to them).
func TestAccPhase_waitConditions(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-wait")
	okName := randName("ok")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: e.providerBlock() + phaseConfig("test", okName, []string{jobDoc(ns, "ok", "sh, -c, 'sleep 2'")}, jobCondition),
				Check: func(*terraform.State) error {
					j, err := e.kube.BatchV1().Jobs(ns).Get(context.Background(), "ok", metav1.GetOptions{})
					if err != nil || j.Status.Succeeded != 1 {
						return fmt.Errorf("the wait ended before the Job succeeded: %v, %+v", err, j.Status)
					}
					return nil
				},
			},
			{
				Config: e.providerBlock() + phaseConfig("test", okName, []string{jobDoc(ns, "ok", "sh, -c, 'sleep 2'")}, jobCondition) +
					phaseConfig("failing", randName("boom"), []string{jobDoc(ns, "boom", "\"false\"")}, jobCondition),
				ExpectError: expectError(`Job ` + ns + `/boom failed \(kstatus Failed\): Job Failed`),
			},
			{
				// A failed wait during an update...
				Config:      e.providerBlock() + phaseConfig("test", okName, []string{jobDoc(ns, "ok", "sh, -c, 'sleep 2'"), jobDoc(ns, "boom2", "\"false\"")}, jobCondition),
				ExpectError: expectError(`Job ` + ns + `/boom2 failed \(kstatus Failed\)`),
			},
			{
				// ...leaves the failed object planned again, not forgotten.
				Config:             e.providerBlock() + phaseConfig("test", okName, []string{jobDoc(ns, "ok", "sh, -c, 'sleep 2'"), jobDoc(ns, "boom2", "\"false\"")}, jobCondition),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
		},
	})
}

// TestAccPhase_partialFailure: a ResourceQuota lets four of nine new
// ConfigMaps in, which the plan-time dry run cannot foresee; the applied
// ones are in the inventory and the state, the refused ones are not, and
// the next apply continues in place.
func TestAccPhase_partialFailure(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-partial")
	name := randName("partial")
	docs := make([]string, 10)
	for i := range docs {
		docs[i] = cmDoc(ns, fmt.Sprintf("cm%d", i), "x")
	}
	id := phase.ApplySetID(phase.InventoryName(name), e.catalog)
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "four-more"},
		// kube-root-ca.crt and cm0 exist: room for four more.
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/configmaps": apiresource.MustParse("6")}},
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: e.providerBlock() + phaseConfig("test", name, docs[:1], ""),
				Check: func(*terraform.State) error {
					_, err := e.kube.CoreV1().ResourceQuotas(ns).Create(context.Background(), quota, metav1.CreateOptions{})
					return err
				},
			},
			{
				PreConfig: func() {
					// The quota controller must have counted usage before the quota admits anything.
					acctest.WaitQuota(t, e.kube, ns, "four-more", func(q *corev1.ResourceQuota) bool {
						u := q.Status.Used["count/configmaps"]
						return u.Value() == 2
					})
				},
				Config:      e.providerBlock() + phaseConfig("test", name, docs, ""),
				ExpectError: expectError(`(?s)Phase Apply Failed.*exceeded quota: four-more`),
			},
			{
				PreConfig: func() {
					refs, err := e.inventory(name)
					if err != nil {
						t.Fatal(err)
					}
					live, err := e.kube.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{LabelSelector: phase.LabelPartOf + "=" + id})
					if err != nil {
						t.Fatal(err)
					}
					if len(live.Items) != 5 || len(refs) != 5 {
						t.Fatalf("%d labelled ConfigMaps, %d in the inventory: want cm0 and the four the quota let in", len(live.Items), len(refs))
					}
					inInv := map[string]bool{}
					for _, r := range refs {
						inInv[r.Name] = true
					}
					for _, cm := range live.Items {
						if !inInv[cm.Name] {
							t.Fatalf("ConfigMap %s was applied but is not in the inventory", cm.Name)
						}
					}
					if err := e.kube.CoreV1().ResourceQuotas(ns).Delete(context.Background(), quota.Name, metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: e.providerBlock() + phaseConfig("test", name, docs, ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					// Updated in place: the state knew the five applied objects.
					plancheck.ExpectResourceAction(phaseAddr, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(phaseAddr, tfjsonpath.New("objects"), knownvalue.ListSizeExact(10)),
				}},
				Check: func(*terraform.State) error {
					refs, err := e.inventory(name)
					if err != nil || len(refs) != 10 {
						return fmt.Errorf("inventory %v, %v: want 10", refs, err)
					}
					return nil
				},
			},
		},
	})
}

// TestAccPhase_strictOwnership: a phase with inventory_policy strict (or
// adopt) refuses an object another phase owns, naming that phase.
func TestAccPhase_strictOwnership(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-own")
	owner := randName("owner")
	shared := []string{cmDoc(ns, "shared", "1")}
	first := e.providerBlock() + phaseConfig("test", owner, shared, "")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: first},
			{
				Config:      first + phaseConfig("other", randName("other"), shared, "  depends_on = [kubeplay_phase.test]\n"),
				ExpectError: expectError(`ConfigMap ` + ns + `/shared \(documents\[0\]\): the object belongs to phase "` + owner + `"`),
			},
			{
				Config: first + phaseConfig("other", randName("other"), []string{cmDoc(ns, "mine", "1")}, "  depends_on = [kubeplay_phase.test]\n"),
				Check: func(*terraform.State) error {
					cm, err := e.kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "shared", metav1.GetOptions{})
					if err != nil || cm.Labels[phase.LabelPartOf] != phase.ApplySetID(phase.InventoryName(owner), e.catalog) {
						return fmt.Errorf("shared ConfigMap changed owner: %v, %v", err, cm.GetLabels())
					}
					return nil
				},
			},
		},
	})
}

// TestAccPhase_threePhases: seed 004's ephemeral, target and workload
// phases ordered by depends_on. The later phases use a namespace and a CRD
// that earlier phases create, so their plan-time dry run must wait for them.
func TestAccPhase_threePhases(t *testing.T) {
	e := newTestEnv(t)
	ns := randName("kp-three")
	e.cleanupNamespace(ns)
	group := randName("kp") + ".example.com"
	e.cleanupCRD("machines." + group)
	crd := fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: machines.%[1]s
spec:
  group: %[1]s
  scope: Namespaced
  names: {kind: Machine, plural: machines, singular: machine, listKind: MachineList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`, group)
	machine := fmt.Sprintf("apiVersion: %s/v1\nkind: Machine\nmetadata:\n  name: m1\n  namespace: %s\n", group, ns)
	ephemeral := randName("ephemeral")
	cfg := e.providerBlock() +
		phaseConfig("ephemeral", ephemeral, []string{nsDoc(ns)}, "") +
		phaseConfig("target", randName("target"), []string{crd, cmDoc(ns, "target", "1")}, "  depends_on = [kubeplay_phase.ephemeral]\n") +
		phaseConfig("workload", randName("workload"), []string{machine, deploymentDoc(ns, "app")}, "  depends_on = [kubeplay_phase.target]\n"+phaseTimeouts2m)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			if _, err := e.kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("namespace after destroy: %v, want NotFound", err)
			}
			return nil
		},
		Steps: []resource.TestStep{{
			Config: cfg,
			Check: func(*terraform.State) error {
				m := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "machines"}
				if _, err := e.dynamic().Resource(m).Namespace(ns).Get(context.Background(), "m1", metav1.GetOptions{}); err != nil {
					return err
				}
				d, err := e.kube.AppsV1().Deployments(ns).Get(context.Background(), "app", metav1.GetOptions{})
				if err != nil || d.Status.AvailableReplicas != 1 {
					return fmt.Errorf("workload Deployment: %v, %+v", err, d.Status)
				}
				return nil
			},
		}, {
			// Another workspace reads the ephemeral phase's inventory.
			Config: cfg + fmt.Sprintf("data \"kubeplay_phase\" \"ephemeral\" {\n  name = %q\n}\n", ephemeral),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("data.kubeplay_phase.ephemeral", tfjsonpath.New("objects"), knownvalue.ListExact([]knownvalue.Check{
					knownvalue.ObjectExact(map[string]knownvalue.Check{
						"api_version": knownvalue.StringExact("v1"), "kind": knownvalue.StringExact("Namespace"),
						"namespace": knownvalue.StringExact(""), "name": knownvalue.StringExact(ns),
					}),
				})),
				statecheck.ExpectKnownValue("data.kubeplay_phase.ephemeral", tfjsonpath.New("inventory_id"),
					knownvalue.StringExact(phase.ApplySetID(phase.InventoryName(ephemeral), e.catalog))),
			},
		}},
	})
}

// TestAccPhase_dryRunErrors: plan refuses documents the API server would
// refuse, naming their kind, namespace, name and document, and applies
// nothing.
func TestAccPhase_dryRunErrors(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-dry")
	bad := fmt.Sprintf("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: broken\n  namespace: %s\nspec:\n  selector:\n    matchLabels: {app: one}\n  template:\n    metadata:\n      labels: {app: other}\n    spec:\n      containers: []\n", ns)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config:      e.providerBlock() + phaseConfig("test", randName("dry"), []string{cmDoc(ns, "fine", "1"), bad}, ""),
				PlanOnly:    true,
				ExpectError: expectError(`(?s)Document Refused By The Cluster.*Deployment ` + ns + `/broken \(documents\[1\]\).*(selector|containers)`),
			},
			{
				Config:      e.providerBlock() + phaseConfig("test", randName("dry"), []string{strings.Replace(cmDoc(ns, "typo", "1"), "\ndata:", "\ndta:", 1)}, ""),
				PlanOnly:    true,
				ExpectError: expectError(`(?s)ConfigMap ` + ns + `/typo \(documents\[0\]\).*dta`),
			},
			{
				Config:      e.providerBlock() + phaseConfig("test", randName("dry"), []string{"apiVersion: v1\nkind: ConfigMap\ndata: {}\n"}, ""),
				PlanOnly:    true,
				ExpectError: expectError(`(?s)Invalid Document.*metadata.name`),
			},
		},
		CheckDestroy: func(*terraform.State) error { return e.configMapGone(ns, "fine") },
	})
}

// TestAccPhase_kustomization: the bundle rendered from a kustomization
// directory, with airship's executor document opted out.
func TestAccPhase_kustomization(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-kust")
	dir := t.TempDir()
	files := map[string]string{
		"kustomization.yaml": fmt.Sprintf("namespace: %s\nnamePrefix: site-\nresources:\n- cm.yaml\n- executor.yaml\n", ns),
		"cm.yaml":            cmDoc("ignored", "settings", "1"),
		"executor.yaml": "apiVersion: airshipit.org/v1alpha1\nkind: KubernetesApply\nmetadata:\n  name: kubernetes-apply\n" +
			"  labels:\n    airshipit.org/deploy-k8s: \"false\"\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             func(*terraform.State) error { return e.configMapGone(ns, "site-settings") },
		Steps: []resource.TestStep{{
			Config: e.providerBlock() + fmt.Sprintf("resource \"kubeplay_phase\" \"test\" {\n  name = %q\n  kustomization = %q\n}\n", randName("kust"), dir),
			ConfigStateChecks: []statecheck.StateCheck{
				objectsCheck([4]string{"v1", "ConfigMap", ns, "site-settings"}),
			},
			Check: func(*terraform.State) error {
				_, err := e.kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "site-settings", metav1.GetOptions{})
				return err
			},
		}},
	})
}
