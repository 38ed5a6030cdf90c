// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/capacity"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
)

const groupAddr = "kubeplay_container_group.test"

// seed000Override is AWX's pod customization example (seed 000), verbatim.
const seed000Override = `{
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

func groupConfig(e *testEnv, body string) string {
	return e.providerBlock() + "\nresource \"kubeplay_container_group\" \"test\" {\n" + body + "}\n"
}

// TestAccContainerGroup_lifecycle creates a group with a managed namespace
// and every capacity limit, shows its quota refusing one pod too many with
// the API server's own error, updates it, imports it, repairs out-of-band
// changes and destroys it with its namespace.
func TestAccContainerGroup_lifecycle(t *testing.T) {
	e := newTestEnv(t)
	name, ns := randName("awx"), randName("kp-runs")
	t.Cleanup(func() { e.deleteNamespace(ns) }) // in case destroy did not run
	img := acctest.TestImage()
	v1 := fmt.Sprintf(`  name                = %q
  namespace           = %q
  manage_namespace    = true
  image               = %q
  max_concurrent_runs = 2
  max_cores           = "2"
  max_ram             = 1024
  max_resources       = { "count/configmaps" = "10" }
  max_forks           = 4
  labels              = { team = "platform" }
`, name, ns, img)
	v2 := fmt.Sprintf(`  name                = %q
  namespace           = %q
  manage_namespace    = true
  image               = %q
  max_concurrent_runs = 3
  annotations         = { "example.com/owner" = "ops" }
`, name, ns, img)

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			if _, err := e.kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("managed namespace %s still exists after destroy (err %v)", ns, err)
			}
			return e.checkConfigMapGone(name)()
		},
		Steps: []resource.TestStep{
			{
				Config: groupConfig(e, v1),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(groupAddr, plancheck.ResourceActionCreate),
					plancheck.ExpectKnownValue(groupAddr, tfjsonpath.New("rendered_pod"), knownvalue.StringRegexp(regexp.MustCompile(`image: `+regexp.QuoteMeta(img)))),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(groupAddr, tfjsonpath.New("id"), knownvalue.StringExact(name)),
					statecheck.ExpectKnownValue(groupAddr, tfjsonpath.New("pod_pending_timeout"), knownvalue.StringExact("5m")),
					statecheck.ExpectKnownValue(groupAddr, tfjsonpath.New("disconnect_grace_period"), knownvalue.StringExact("30s")),
					statecheck.ExpectKnownValue(groupAddr, tfjsonpath.New("launch_retries"), knownvalue.Int64Exact(3)),
					statecheck.ExpectKnownValue(groupAddr, tfjsonpath.New("rendered_pod"), knownvalue.StringRegexp(regexp.MustCompile(`team: platform`))),
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					e.checkQuota(ns, name, map[corev1.ResourceName]string{"pods": "2", "requests.cpu": "2", "requests.memory": "1Gi", "count/configmaps": "10"}),
					e.checkLedger(ns, name, "4"),
					e.checkQuotaRejectsOneTooMany(ns, 2),
				),
			},
			{
				Config: groupConfig(e, v2),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(groupAddr, plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(groupAddr, tfjsonpath.New("max_forks"), knownvalue.Null()),
					statecheck.ExpectKnownValue(groupAddr, tfjsonpath.New("rendered_pod"), knownvalue.StringRegexp(regexp.MustCompile(`example.com/owner: ops`))),
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					e.checkQuota(ns, name, map[corev1.ResourceName]string{"pods": "3"}),
					e.checkLedger(ns, name, ""),
				),
			},
			{
				ResourceName:                         groupAddr,
				ImportState:                          true,
				ImportStateId:                        name,
				ImportStateVerify:                    true,
				ImportStateVerifyIdentifierAttribute: "name",
			},
			{
				// Drift on the cluster: the quota was deleted by hand.
				PreConfig: func() {
					if err := e.kube.CoreV1().ResourceQuotas(ns).Delete(context.Background(), capacity.QuotaName(name), metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: groupConfig(e, v2),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(groupAddr, plancheck.ResourceActionUpdate),
				}},
				Check: e.checkQuota(ns, name, map[corev1.ResourceName]string{"pods": "3"}),
			},
			{
				// Drift in the catalog: the stored image was edited.
				PreConfig: func() {
					e.editConfigMap(name, func(cm *corev1.ConfigMap) {
						cm.Data[catalog.GroupSpecKey] = strings.Replace(cm.Data[catalog.GroupSpecKey], img, "edited:latest", 1)
					})
				},
				Config: groupConfig(e, v2),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(groupAddr, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(groupAddr, tfjsonpath.New("image"), knownvalue.StringExact(img)),
				}},
			},
			{
				// Deleted out of band: removed from state, created again.
				PreConfig: func() {
					if err := e.kube.CoreV1().ConfigMaps(e.catalog).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: groupConfig(e, v2),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(groupAddr, plancheck.ResourceActionCreate),
				}},
			},
		},
	})
}

// TestAccContainerGroup_podSecurity: a managed namespace carries the
// PodSecurity enforce label of the group's level, so the API server itself
// refuses a privileged or hostPath pod that never went through kubeplay's
// plan; the label follows the level and is repaired when removed by hand;
// a level the default pod cannot meet fails the plan naming each check.
func TestAccContainerGroup_podSecurity(t *testing.T) {
	e := newTestEnv(t)
	name, ns := randName("psa"), randName("kp-psa")
	t.Cleanup(func() { e.deleteNamespace(ns) }) // in case destroy did not run
	body := func(level string) string {
		b := fmt.Sprintf("  name             = %q\n  namespace        = %q\n  manage_namespace = true\n  image            = %q\n",
			name, ns, acctest.TestImage())
		if level != "" {
			b += fmt.Sprintf("  pod_security_level = %q\n", level)
		}
		return b
	}
	privileged := func(p *corev1.Pod) {
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	}
	hostPath := func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: groupConfig(e, body("")),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(groupAddr, tfjsonpath.New("pod_security_level"), knownvalue.StringExact("baseline")),
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					e.checkNamespaceLabels(ns, map[string]string{
						"pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/enforce-version": "latest",
					}),
					// The rendered pod passes; pods made behind kubeplay's back do not.
					e.checkAdmission(ns, nil, ""),
					e.checkAdmission(ns, privileged, `violates PodSecurity "baseline:latest": privileged \(container "worker" must not set securityContext.privileged=true\)`),
					e.checkAdmission(ns, hostPath, `violates PodSecurity "baseline:latest": hostPath volumes \(volume "root"\)`),
				),
			},
			{
				Config:      groupConfig(e, body("restricted")),
				ExpectError: expectError(`(?s)Run Pod Below Pod Security Level.*violates PodSecurity "restricted:latest".*- allowPrivilegeEscalation != false: container "worker".*- runAsNonRoot != true.*- seccompProfile`),
			},
			{
				Config: groupConfig(e, body("privileged")),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(groupAddr, plancheck.ResourceActionUpdate),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					e.checkNamespaceLabels(ns, map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}),
					e.checkAdmission(ns, privileged, ""),
					e.checkAdmission(ns, hostPath, ""),
				),
			},
			{
				// Drift: the enforce label was removed by hand; the plan puts it back.
				PreConfig: func() {
					patch := []byte(`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":null}}}`)
					if _, err := e.kube.CoreV1().Namespaces().Patch(context.Background(), ns, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: groupConfig(e, body("")),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(groupAddr, plancheck.ResourceActionUpdate),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					e.checkNamespaceLabels(ns, map[string]string{"pod-security.kubernetes.io/enforce": "baseline"}),
					e.checkAdmission(ns, privileged, `violates PodSecurity "baseline:latest": privileged`),
				),
			},
		},
	})
}

// checkNamespaceLabels checks that ns carries want, among other labels.
func (e *testEnv) checkNamespaceLabels(ns string, want map[string]string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		got, err := e.kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for k, v := range want {
			if got.Labels[k] != v {
				return fmt.Errorf("namespace %s label %s = %q, want %q (labels %v)", ns, k, got.Labels[k], v, got.Labels)
			}
		}
		return nil
	}
}

// checkAdmission creates the group's rendered pod, changed by edit, directly
// with client-go (a server-side dry run: it goes through admission and
// leaves nothing), and expects the API server to refuse it with an error
// matching refusal, or to admit it when refusal is "".
func (e *testEnv) checkAdmission(ns string, edit func(*corev1.Pod), refusal string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		var pod corev1.Pod
		if err := yaml.UnmarshalStrict([]byte(s.RootModule().Resources[groupAddr].Primary.Attributes["rendered_pod"]), &pod); err != nil {
			return fmt.Errorf("rendered_pod: %w", err)
		}
		pod.GenerateName = "bypass-"
		if edit != nil {
			edit(&pod)
		}
		_, err := e.kube.CoreV1().Pods(ns).Create(context.Background(), &pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case refusal == "" && err != nil:
			return fmt.Errorf("the API server refused a pod its namespace's level allows: %w", err)
		case refusal == "":
			return nil
		case err == nil || !apierrors.IsForbidden(err) || !regexp.MustCompile(refusal).MatchString(err.Error()):
			return fmt.Errorf("pod made without kubeplay in %s: got %v, want the API server's refusal %q", ns, err, refusal)
		}
		e.t.Logf("refused by the API server's PodSecurity admission: %v", err)
		return nil
	}
}

// TestAccContainerGroup_seed000 applies AWX's override verbatim: the unnamed
// container becomes the worker and keeps its defaults, the namespace comes
// from the override, and the rendered pod is known at plan time.
func TestAccContainerGroup_seed000(t *testing.T) {
	e := newTestEnv(t)
	name := randName("awx")
	want := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  labels:
    app.kubernetes.io/managed-by: kubeplay
    kubeplay.io/container-group: %s
  namespace: my-namespace
spec:
  automountServiceAccountToken: false
  containers:
  - args:
    - sleep
    - infinity
    image: my-custom-image
    imagePullPolicy: IfNotPresent
    name: worker
    resources:
      requests:
        cpu: 250m
        memory: 100Mi
    stdin: true
    tty: true
    volumeMounts:
    - mountPath: /tmp
      name: kubeplay-tmp
  restartPolicy: Never
  volumes:
  - emptyDir:
      sizeLimit: 1Gi
    name: kubeplay-tmp
`, name)
	cfg := groupConfig(e, fmt.Sprintf("  name              = %q\n  pod_spec_override = <<-EOT\n%s\n  EOT\n", name, seed000Override))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: cfg,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectKnownValue(groupAddr, tfjsonpath.New("rendered_pod"), knownvalue.StringExact(want)),
				plancheck.ExpectKnownValue(groupAddr, tfjsonpath.New("namespace"), knownvalue.StringExact("my-namespace")),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(groupAddr, tfjsonpath.New("rendered_pod"), knownvalue.StringExact(want)),
				statecheck.ExpectKnownValue(groupAddr, tfjsonpath.New("image"), knownvalue.StringExact("quay.io/ansible/awx-ee:latest")),
			},
		}},
	})
}

// TestAccContainerGroup_dataSource reads a group by name, as another
// workspace would, and a missing credential fails the apply naming it.
func TestAccContainerGroup_dataSource(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-ds")
	name := randName("shared")
	body := fmt.Sprintf("  name      = %q\n  namespace = %q\n  max_concurrent_runs = 5\n  default_label_cpu = \"500m\"\n"+
		"  pod_security_level = \"privileged\"\n", name, ns)
	ds := "\ndata \"kubeplay_container_group\" \"test\" {\n  name = kubeplay_container_group.test.name\n}\n"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: groupConfig(e, body) + ds,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.kubeplay_container_group.test", tfjsonpath.New("namespace"), knownvalue.StringExact(ns)),
					statecheck.ExpectKnownValue("data.kubeplay_container_group.test", tfjsonpath.New("max_concurrent_runs"), knownvalue.Int64Exact(5)),
					statecheck.ExpectKnownValue("data.kubeplay_container_group.test", tfjsonpath.New("default_label_cpu"), knownvalue.StringExact("500m")),
					statecheck.ExpectKnownValue("data.kubeplay_container_group.test", tfjsonpath.New("pod_security_level"), knownvalue.StringExact("privileged")),
					statecheck.CompareValuePairs(groupAddr, tfjsonpath.New("rendered_pod"),
						"data.kubeplay_container_group.test", tfjsonpath.New("rendered_pod"), compare.ValuesSame()),
				},
			},
			{
				Config:      e.providerBlock() + "\ndata \"kubeplay_container_group\" \"missing\" {\n  name = \"no-such-group\"\n}\n",
				ExpectError: expectError(`Container Group Not Found`),
			},
			{
				Config:      groupConfig(e, fmt.Sprintf("  name       = %q\n  namespace  = %q\n  credential = \"no-such-credential\"\n", randName("other"), ns)),
				ExpectError: expectError(`(?s)Credential Unavailable.*credential "no-such-credential" does not exist`),
			},
		},
	})
}

// TestAccContainerGroup_applyErrors: what only the cluster can tell fails
// the apply, naming the credential or namespace at fault.
func TestAccContainerGroup_applyErrors(t *testing.T) {
	e := newTestEnv(t)
	existing := e.namespace("kp-taken")
	missing := randName("kp-missing")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config:      groupConfig(e, fmt.Sprintf("  name       = \"g\"\n  namespace  = %q\n  credential = \"no-such-credential\"\n", existing)),
				ExpectError: expectError(`(?s)Credential Unavailable.*credential "no-such-credential" does not exist in catalog namespace`),
			},
			{
				Config:      groupConfig(e, fmt.Sprintf("  name             = \"g\"\n  namespace        = %q\n  manage_namespace = true\n", existing)),
				ExpectError: expectError(`(?s)Namespace Already Exists.*Namespace "` + existing + `" already exists`),
			},
			{
				Config:      groupConfig(e, fmt.Sprintf("  name      = \"g\"\n  namespace = %q\n  max_forks = 3\n", missing)),
				ExpectError: expectError(`(?s)Namespace Not Found.*Namespace "` + missing + `" does not exist`),
			},
		},
	})
}

// TestAccContainerGroup_planErrors: each bad input fails the plan, naming
// the attribute and, for YAML, the line. Validation needs no cluster, so it
// runs in plain go test.
func TestAccContainerGroup_planErrors(t *testing.T) {
	cases := []struct{ body, want string }{
		{"  namespace = \"other\"\n  pod_spec_override = <<-EOT\n" + seed000Override + "\n  EOT\n",
			`(?s)Conflicting Namespaces.*metadata.namespace "my-namespace" but namespace is "other"`},
		{"  max_cores = \"-1\"\n", `(?s)Invalid Quantity.*max_cores.*"-1" is negative`},
		{"  default_label_cpu_limit = \"two\"\n", `(?s)Invalid Quantity.*"two" is not a Kubernetes quantity`},
		{"  max_resources = { \"requests.nvidia.com/gpu\" = \"1x\" }\n", `(?s)Invalid Quantity.*max_resources\["requests.nvidia.com/gpu"\]`},
		{"  max_ram = -5\n", `(?s)max_ram.*must be at least 0`},
		{"  pod_spec_override = \"spec:\\n  containers:\\n  - name: a\\n   image: b\\n\"\n",
			`(?s)Invalid Pod Spec Override.*line 3: did not find expected key`},
		{"  pod_spec_override = \"spec:\\n  containers:\\n  - name: a\\n    imagee: b\\n\"\n",
			`(?s)Invalid Pod Spec Override.*line 4: unknown field "spec.containers\[0\].imagee"`},
		{"  pod_spec_override = \"apiVersion: apps/v1\\nkind: Deployment\\n\"\n", `(?s)Invalid Pod Spec Override.*is a Deployment, not a Pod`},
		{"  pod_pending_timeout = \"soon\"\n", `(?s)Invalid Duration.*"soon"`},
		{"  disconnect_grace_period = \"5s\"\n", `(?s)Invalid Disconnect Grace Period.*disconnect_grace_period.*"5s" is not a duration from 10s to 1h`},
		{"  disconnect_grace_period = \"2h\"\n", `(?s)Invalid Disconnect Grace Period.*"2h"`},
		{"  disconnect_grace_period = \"soon\"\n", `(?s)Invalid Disconnect Grace Period.*"soon"`},
		{"  labels = { \"team\" = \"not a label value\" }\n", `(?s)Invalid Label Value`},
		// Found by users: these crashed the provider at plan or apply.
		{"  pod_spec_override = \"spec:\\n  containers: null\\n\"\n", `(?s)Pod Spec Override Removes Every Container`},
		{"  pod_spec_override = \"spec:\\n  containers:\\n    $patch: replace\\n\"\n", `(?s)pod_spec_override`},
		{"  pod_spec_override = \"metadata:\\n  labels:\\n    app.kubernetes.io/managed-by: someone-else\\n\"\n",
			`(?s)Run Pod Labels Reserved By Kubeplay.*app.kubernetes.io/managed-by`},
		{"  pod_spec_override = \"spec:\\n  hostname: a\\n  hostname: b\\n\"\n", `(?s)Invalid Pod Spec Override.*line 3.*hostname`},
		// Pod security: the group's own pod is held to its level at plan.
		{"  pod_spec_override = \"spec:\\n  hostNetwork: true\\n\"\n",
			`(?s)Run Pod Below Pod Security Level.*pod_spec_override.*violates PodSecurity "baseline:latest".*- host namespaces: hostNetwork=true`},
		{"  pod_security_level = \"restricted\"\n",
			`(?s)Run Pod Below Pod Security Level.*violates PodSecurity "restricted:latest".*- runAsNonRoot != true.*the default pod meets "baseline"`},
		{"  pod_security_level = \"none\"\n", `(?s)pod_security_level.*value must be one of`},
	}
	steps := make([]resource.TestStep, 0, len(cases))
	for _, c := range cases {
		steps = append(steps, resource.TestStep{
			Config:      unreachableProvider + "\nresource \"kubeplay_container_group\" \"test\" {\n  name = \"bad\"\n" + c.body + "}\n",
			PlanOnly:    true,
			ExpectError: expectError(c.want),
		})
	}
	resource.UnitTest(t, resource.TestCase{ProtoV6ProviderFactories: testAccProtoV6ProviderFactories, Steps: steps})
}

// TestAccContainerGroup_nullLabelsPlan: an override whose metadata.labels is
// null crashed the run's plan ("assignment to entry in nil map"); now the run
// renders its pod (podspec's tests check that it keeps kubeplay's labels).
func TestAccContainerGroup_nullLabelsPlan(t *testing.T) {
	resource.UnitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: unreachableProvider + `
resource "kubeplay_container_group" "test" {
  name              = "nulls"
  namespace         = "runs"
  pod_spec_override = "metadata:\n  labels: null\n  annotations: null\n"
}

resource "kubeplay_run" "test" {
  container_group = kubeplay_container_group.test.name
  command         = ["true"]
}
`,
			// The plan renders the run's pod with kubeplay's labels; the apply
			// then meets the unreachable cluster.
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectKnownValue("kubeplay_run.test", tfjsonpath.New("rendered_pod"),
					knownvalue.StringRegexp(regexp.MustCompile(`app.kubernetes.io/managed-by: kubeplay\n\s+kubeplay.io/container-group: nulls`))),
			}},
			ExpectError: expectError(`(?s)127.0.0.1:1`),
		}},
	})
}

// checkQuota checks the group's ResourceQuota holds exactly want.
func (e *testEnv) checkQuota(ns, group string, want map[corev1.ResourceName]string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		q, err := e.kube.CoreV1().ResourceQuotas(ns).Get(context.Background(), capacity.QuotaName(group), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(q.Spec.Hard) != len(want) {
			return fmt.Errorf("quota hard = %v, want %v", q.Spec.Hard, want)
		}
		for k, v := range want {
			if got := q.Spec.Hard[k]; got.String() != v {
				return fmt.Errorf("quota hard[%s] = %s, want %s", k, got.String(), v)
			}
		}
		return nil
	}
}

// checkLedger checks the forks ledger's max-forks; "" means no ledger.
func (e *testEnv) checkLedger(ns, group, maxForks string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		cm, err := e.kube.CoreV1().ConfigMaps(ns).Get(context.Background(), capacity.LedgerName(group), metav1.GetOptions{})
		if maxForks == "" {
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("forks ledger still exists (err %v)", err)
			}
			return nil
		}
		if err != nil {
			return err
		}
		if got := cm.Annotations[capacity.AnnotationMaxForks]; got != maxForks {
			return fmt.Errorf("ledger max-forks = %q, want %q", got, maxForks)
		}
		return nil
	}
}

// checkQuotaRejectsOneTooMany creates the group's rendered pod, as a run
// would, until the quota's pod count is reached, and expects the next one to
// be refused by the API server with "exceeded quota".
func (e *testEnv) checkQuotaRejectsOneTooMany(ns string, limit int) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		var pod corev1.Pod
		if err := yaml.UnmarshalStrict([]byte(s.RootModule().Resources[groupAddr].Primary.Attributes["rendered_pod"]), &pod); err != nil {
			return fmt.Errorf("rendered_pod: %w", err)
		}
		pod.GenerateName = "run-"
		pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0) // so the namespace goes quickly
		pods := e.kube.CoreV1().Pods(ns)
		for i := range limit {
			if _, err := pods.Create(context.Background(), &pod, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("pod %d of %d refused: %w", i+1, limit, err)
			}
		}
		_, err := pods.Create(context.Background(), &pod, metav1.CreateOptions{})
		if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota") {
			return fmt.Errorf("pod %d of a quota of %d: got %v, want the API server's exceeded quota", limit+1, limit, err)
		}
		e.t.Logf("pod %d of %d refused by the API server: %v", limit+1, limit, err)
		return nil
	}
}

func (e *testEnv) checkConfigMapGone(name string) func() error {
	return func() error {
		_, err := e.kube.CoreV1().ConfigMaps(e.catalog).Get(context.Background(), name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("catalog ConfigMap %s still exists (err %v)", name, err)
		}
		return nil
	}
}

func (e *testEnv) editConfigMap(name string, edit func(*corev1.ConfigMap)) {
	e.t.Helper()
	cms := e.kube.CoreV1().ConfigMaps(e.catalog)
	cm, err := cms.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	edit(cm)
	if _, err := cms.Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}
