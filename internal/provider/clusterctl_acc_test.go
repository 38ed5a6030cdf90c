// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/waitfor"
)

var (
	capiClusters  = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "clusters"}
	capiInventory = schema.GroupVersionResource{Group: "clusterctl.cluster.x-k8s.io", Version: "v1alpha3", Resource: "providers"}
)

// capiSide is one of the two control planes as the clusterctl test sees it.
type capiSide struct {
	kube kubernetes.Interface
	dyn  dynamic.Interface
}

func newCapiSide(t *testing.T, cfg *rest.Config) capiSide {
	t.Helper()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return capiSide{kube: kube, dyn: dyn}
}

// capiFiles writes the Cluster API core provider's components (through edit,
// when not nil), its metadata and cert-manager's API to files, and returns
// their paths.
func capiFiles(t *testing.T, edit func(string) string) (components, metadata, certManager string) {
	t.Helper()
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		writeTestFile(t, p, text)
		return p
	}
	c := acctest.ClusterAPICoreComponents(t)
	if edit != nil {
		c = edit(c)
	}
	return write("core-components.yaml", c), write("metadata.yaml", acctest.ClusterAPIMetadata(t)),
		write("cert-manager-api.yaml", acctest.CertManagerAPI())
}

// hclMap renders m as an HCL object, keys sorted.
func hclMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("{\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "    %s = %q\n", k, m[k])
	}
	b.WriteString("  }")
	return b.String()
}

// TestAccClusterctl_initAndMove: init installs the Cluster API core provider,
// built from its module source, on both control planes, each after a phase
// that gives it cert-manager's API, and its controller becomes available on
// each cluster's real node; move takes a Cluster and its kubeconfig Secret
// from the first control plane to the second (through a cluster_api
// credential) and leaves the source without them; an inventory entry
// deleted outside Terraform is planned as a new init; a change of
// variables_wo alone plans nothing, one of variables_wo_version plans a
// new init; destroy removes the providers, their namespaces and CRDs.
func TestAccClusterctl_initAndMove(t *testing.T) {
	e := newTestEnv(t)
	// Cert-manager's and Cluster API's CRDs are cluster-scoped, and the second
	// cluster is one: the tests that install them or use it take turns.
	acctest.Exclusive(t, acctest.ClusterAPILock)
	second := newSecondCluster(t, e)
	acctest.ClusterAPIImage(t, 1)
	acctest.ClusterAPIImage(t, 2)
	one := newCapiSide(t, acctest.RESTConfig(t))
	cfg2, err := clientcmd.RESTConfigFromKubeConfig(second.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	two := newCapiSide(t, cfg2)

	components, metadata, certManager := capiFiles(t, nil)

	secretNS, moveNS := e.namespace("kp-parent"), e.namespace("kp-move")
	putSecondKubeconfig(t, e, second, secretNS)
	t.Cleanup(func() {
		_ = two.kube.CoreV1().Namespaces().Delete(context.Background(), moveNS, metav1.DeleteOptions{})
	})
	// version and port are the second init's variables_wo_version and, when
	// not "", a stand-in for its write-only value.
	init := func(res, name, cluster string, n, version int, port string) string {
		clusterLine, cm := "", "kubeplay_phase.cert_manager_one"
		vars := acctest.ClusterAPIVariables(n)
		if cluster != "" {
			clusterLine, cm = fmt.Sprintf("  cluster = %s\n", cluster), "kubeplay_phase.cert_manager_two"
			if port == "" {
				port = vars["KUBERNETES_SERVICE_PORT"]
			}
			// One value write-only: the init fails unless it reaches clusterctl.
			clusterLine += fmt.Sprintf("  variables_wo = { KUBERNETES_SERVICE_PORT = %q }\n", port)
			clusterLine += fmt.Sprintf("  variables_wo_version = %d\n", version)
			delete(vars, "KUBERNETES_SERVICE_PORT")
		}
		return fmt.Sprintf(`
resource "kubeplay_clusterctl" %q {
  name   = %q
  action = "init"
%s  providers = [{
    name       = "cluster-api"
    type       = "CoreProvider"
    version    = %q
    components = file(%q)
    metadata   = file(%q)
  }]
  variables    = %s
  destroy_crds = true
  depends_on   = [%s]
  # 6m, not 3m: on a slower machine under make test-all's load the Cluster
  # API controller was not available within 3 minutes.
  timeouts {
    create = "6m"
  }
}
`, res, name, clusterLine, acctest.ClusterAPIVersion, components, metadata, hclMap(vars), cm)
	}
	child, certOne, certTwo, initOne, initTwo := randName("child"), randName("certmgr"), randName("certmgr"), randName("init"), randName("init")
	config := func(version int, port string) string {
		return clusterAPIConfig(e, child, "second", secretNS, "1m") + fmt.Sprintf(`
resource "kubeplay_phase" "cert_manager_one" {
  name      = %q
  documents = [file(%q)]
}

resource "kubeplay_phase" "cert_manager_two" {
  name      = %q
  cluster   = kubeplay_credential.child.name
  documents = [file(%q)]
}
`, certOne, certManager, certTwo, certManager) + init("one", initOne, "", 1, 0, "") +
			init("two", initTwo, "kubeplay_credential.child.name", 2, version, port)
	}
	base := config(1, "")
	move := base + fmt.Sprintf(`
resource "kubeplay_clusterctl" "move" {
  name       = "move"
  action     = "move"
  to_cluster = kubeplay_credential.child.name
  namespace  = %q
  depends_on = [kubeplay_clusterctl.one, kubeplay_clusterctl.two]
}
`, moveNS)

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		TerraformVersionChecks:   writeOnlyVersions,
		CheckDestroy: func(*terraform.State) error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			for i, s := range []capiSide{one, two} {
				if err := waitfor.Gone(ctx, waitfor.Named(s.kube.CoreV1().Namespaces(), acctest.ClusterAPINamespace), &corev1.Namespace{}); err != nil {
					return fmt.Errorf("cluster %d: namespace capi-system after destroy: %w", i+1, err)
				}
				if _, err := s.dyn.Resource(capiClusters).List(ctx, metav1.ListOptions{}); err == nil {
					return fmt.Errorf("cluster %d: the Cluster CRD is still served after destroy with destroy_crds", i+1)
				}
				if _, err := s.dyn.Resource(capiInventory).List(ctx, metav1.ListOptions{}); err == nil {
					return fmt.Errorf("cluster %d: clusterctl's inventory CRD is still served after destroy", i+1)
				}
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: base,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("kubeplay_clusterctl.two", tfjsonpath.New("variables_wo"), knownvalue.Null()),
					statecheck.ExpectKnownValue("kubeplay_clusterctl.two", tfjsonpath.New("variables_wo_version"), knownvalue.Int64Exact(1)),
				},
				Check: func(*terraform.State) error {
					for i, s := range []capiSide{one, two} {
						if err := controllerAvailable(s.kube, i+1, second.node); err != nil {
							return err
						}
					}
					// The move's objects, on the first cluster: a Cluster whose
					// infrastructure and control plane are up, and its kubeconfig.
					// No infrastructure provider runs here, so the test writes
					// that status, with the first cluster's controller stopped so
					// that it does not write it back.
					if err := scaleDown(one.kube, acctest.ClusterAPINamespace, acctest.ClusterAPIDeployment); err != nil {
						return err
					}
					return createMovable(one, moveNS, "c1")
				},
			},
			{
				// A new write-only value alone: Terraform sees no change.
				Config:   config(1, "1"),
				PlanOnly: true,
			},
			{
				// A new variables_wo_version: the init is planned again.
				Config:             config(2, ""),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("kubeplay_clusterctl.two", plancheck.ResourceActionDestroyBeforeCreate),
					plancheck.ExpectResourceAction("kubeplay_clusterctl.one", plancheck.ResourceActionNoop),
				}},
			},
			{
				Config: move,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("kubeplay_clusterctl.move", tfjsonpath.New("id"), knownvalue.StringExact("move")),
				},
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("kubeplay_clusterctl.move", plancheck.ResourceActionCreate),
					plancheck.ExpectResourceAction("kubeplay_clusterctl.one", plancheck.ResourceActionNoop),
				}},
				Check: func(*terraform.State) error {
					ctx := context.Background()
					if _, err := one.dyn.Resource(capiClusters).Namespace(moveNS).Get(ctx, "c1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
						return fmt.Errorf("Cluster c1 on the first cluster after the move: err=%v, want not found", err)
					}
					if _, err := one.kube.CoreV1().Secrets(moveNS).Get(ctx, "c1-kubeconfig", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
						return fmt.Errorf("Secret c1-kubeconfig on the first cluster after the move: err=%v, want not found", err)
					}
					if _, err := two.dyn.Resource(capiClusters).Namespace(moveNS).Get(ctx, "c1", metav1.GetOptions{}); err != nil {
						return fmt.Errorf("Cluster c1 on the second cluster after the move: %w", err)
					}
					s, err := two.kube.CoreV1().Secrets(moveNS).Get(ctx, "c1-kubeconfig", metav1.GetOptions{})
					if err != nil || string(s.Data["value"]) != "kubeconfig of c1" {
						return fmt.Errorf("Secret c1-kubeconfig on the second cluster after the move: %v", err)
					}
					return nil
				},
			},
			{
				// An inventory entry deleted outside Terraform: plan shows a new
				// init, and the apply installs the provider again.
				PreConfig: func() {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
					defer cancel()
					// Let the second cluster's controller delete the moved
					// Cluster now, before destroy takes the controller away.
					if err := waitfor.DeleteObject(ctx, two.dyn.Resource(capiClusters).Namespace(moveNS), "c1", metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
					list, err := one.dyn.Resource(capiInventory).List(ctx, metav1.ListOptions{})
					if err != nil || len(list.Items) != 1 {
						t.Fatalf("the first cluster's clusterctl inventory: %v (%d entries, want 1)", err, len(list.Items))
					}
					it := list.Items[0]
					if err := one.dyn.Resource(capiInventory).Namespace(it.GetNamespace()).Delete(ctx, it.GetName(), metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: move,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("kubeplay_clusterctl.one", plancheck.ResourceActionCreate),
					plancheck.ExpectResourceAction("kubeplay_clusterctl.two", plancheck.ResourceActionNoop),
				}},
				Check: func(*terraform.State) error { return controllerAvailable(one.kube, 1, second.node) },
			},
		},
	})
}

// controllerAvailable checks that the Cluster API controller of cluster n is
// available, that its log shows no refused request, and on cluster 2 that
// its pod runs on the second node.
func controllerAvailable(kube kubernetes.Interface, n int, node2 string) error {
	ctx := context.Background()
	d, err := kube.AppsV1().Deployments(acctest.ClusterAPINamespace).Get(ctx, acctest.ClusterAPIDeployment, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("cluster %d: the controller's Deployment: %w", n, err)
	}
	available := false
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
			available = true
		}
	}
	if !available || d.Status.ReadyReplicas != 1 {
		return fmt.Errorf("cluster %d: the controller is not available after init: %+v", n, d.Status)
	}
	pods, err := kube.CoreV1().Pods(acctest.ClusterAPINamespace).List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != 1 {
		return fmt.Errorf("cluster %d: the controller's pods: %v (%d, want 1)", n, err, len(pods.Items))
	}
	pod := pods.Items[0]
	if n == 2 && pod.Spec.NodeName != node2 {
		return fmt.Errorf("cluster 2: the controller's pod runs on %q, want node %s", pod.Spec.NodeName, node2)
	}
	// The fixture's role is the release's role.yaml: the controller must lack no permission.
	logs, err := kube.CoreV1().Pods(acctest.ClusterAPINamespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "manager"}).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("cluster %d: the controller's log: %w", n, err)
	}
	for _, line := range strings.Split(string(logs), "\n") {
		if strings.Contains(line, "forbidden") {
			return fmt.Errorf("cluster %d: the controller lacks a permission: %s", n, line)
		}
	}
	return nil
}

// createMovable makes, in ns, what clusterctl move takes: a Cluster that has
// finished provisioning and the Secret Cluster API writes with its kubeconfig.
func createMovable(s capiSide, ns, name string) error {
	ctx := context.Background()
	c := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"controlPlaneEndpoint": map[string]any{"host": "10.0.0.1", "port": int64(6443)}},
	}}
	if _, err := s.dyn.Resource(capiClusters).Namespace(ns).Create(ctx, c, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Cluster %s: %w", name, err)
	}
	// Retry on conflict: the API server may still be writing defaults.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := s.dyn.Resource(capiClusters).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(cur.Object, "status", "conditions")
		conds = append(conds, map[string]any{
			"type": "ControlPlaneInitialized", "status": "True", "reason": "Initialized", "message": "",
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339), "observedGeneration": cur.GetGeneration(),
		})
		if err := unstructured.SetNestedSlice(cur.Object, conds, "status", "conditions"); err != nil {
			return err
		}
		if err := unstructured.SetNestedField(cur.Object, true, "status", "initialization", "infrastructureProvisioned"); err != nil {
			return err
		}
		_, err = s.dyn.Resource(capiClusters).Namespace(ns).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("setting Cluster %s's status: %w", name, err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-kubeconfig", Namespace: ns, Labels: map[string]string{"cluster.x-k8s.io/cluster-name": name}},
		Data:       map[string][]byte{"value": []byte("kubeconfig of " + name)},
	}
	if _, err := s.kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Secret %s: %w", secret.Name, err)
	}
	return nil
}

// scaleDown scales the Deployment to no replica and waits until its pods are gone.
func scaleDown(kube kubernetes.Interface, ns, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sc, err := kube.AppsV1().Deployments(ns).GetScale(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	sc.Spec.Replicas = 0
	if _, err := kube.AppsV1().Deployments(ns).UpdateScale(ctx, name, sc, metav1.UpdateOptions{}); err != nil {
		return err
	}
	_, err = acctest.WaitPods(ctx, kube, ns, "", func(pods []corev1.Pod) bool { return len(pods) == 0 })
	if err != nil {
		return fmt.Errorf("the pods of %s/%s after scaling it down: %w", ns, name, err)
	}
	return nil
}

// TestAccClusterctl_initFailure: init on a cluster without cert-manager's
// API fails at once and says to install it first; init of a provider whose
// controller's image no node has fails as soon as its pod shows it, long
// before timeouts.create, with the remedy, and leaves no namespace, CRD,
// inventory or ClusterRole behind.
func TestAccClusterctl_initFailure(t *testing.T) {
	e := newTestEnv(t)
	// Cert-manager's and Cluster API's CRDs are cluster-scoped, and the second
	// cluster is one: the tests that install them or use it take turns.
	acctest.Exclusive(t, acctest.ClusterAPILock)
	acctest.ClusterAPIImage(t, 1)
	one := newCapiSide(t, acctest.RESTConfig(t))
	// The controller's image is one no node has, and pulls are never made.
	components, metadata, certManager := capiFiles(t, func(c string) string {
		return strings.ReplaceAll(c, acctest.ClusterAPIManagerImage, "kubeplay.test/missing:v0")
	})
	initRes := func(dependsOn string) string {
		return fmt.Sprintf(`
resource "kubeplay_clusterctl" "test" {
  name   = "broken"
  action = "init"
  providers = [{
    name       = "cluster-api"
    type       = "CoreProvider"
    version    = %q
    components = file(%q)
    metadata   = file(%q)
  }]
  variables  = %s
  depends_on = [%s]
  timeouts {
    create = "10m"
  }
}
`, acctest.ClusterAPIVersion, components, metadata, hclMap(acctest.ClusterAPIVariables(1)), dependsOn)
	}
	certPhase := fmt.Sprintf(`
resource "kubeplay_phase" "cert_manager" {
  name      = %q
  documents = [file(%q)]
}
`, randName("certmgr"), certManager)
	nothingLeft := func() {
		ctx := context.Background()
		if _, err := one.kube.CoreV1().Namespaces().Get(ctx, acctest.ClusterAPINamespace, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("namespace capi-system after the failed init: err=%v, want not found", err)
		}
		if _, err := one.dyn.Resource(capiInventory).List(ctx, metav1.ListOptions{}); err == nil {
			t.Error("clusterctl's inventory CRD is still served after the failed init")
		}
		if _, err := one.dyn.Resource(capiClusters).List(ctx, metav1.ListOptions{}); err == nil {
			t.Error("the Cluster CRD the failed init installed is still served")
		}
		roles, err := one.kube.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{LabelSelector: "cluster.x-k8s.io/provider=cluster-api"})
		if err != nil || len(roles.Items) != 0 {
			t.Errorf("ClusterRoles of the provider after the failed init: %v (%d)", err, len(roles.Items))
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config:      e.providerBlock() + initRes(""),
				ExpectError: expectError(`(?s)Clusterctl Init Failed.*no cert-manager API.*install cert-manager first`),
			},
			{
				PreConfig:   nothingLeft,
				Config:      e.providerBlock() + certPhase + initRes("kubeplay_phase.cert_manager"),
				ExpectError: expectError(`(?s)Clusterctl Init Failed.*cannot start: container manager of pod\s+capi-system/capi-controller-manager-\S+ cannot\s+start: ErrImageNeverPull.*What the init\s+installed was deleted`),
			},
			{
				PreConfig: nothingLeft,
				Config:    e.providerBlock() + certPhase,
			},
		},
	})
}
