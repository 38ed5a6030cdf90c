// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/credential"
)

// selfContainedKubeconfig returns the test kubeconfig with its files
// embedded, as Cluster API writes kubeconfig Secrets.
func (e *testEnv) selfContainedKubeconfig() []byte {
	e.t.Helper()
	return selfContained(e.t, e.kubeconfig)
}

// selfContained returns the kubeconfig at path with its files embedded.
func selfContained(t testing.TB, path string) []byte {
	t.Helper()
	raw, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := clientcmdapi.FlattenConfig(raw); err != nil {
		t.Fatal(err)
	}
	b, err := clientcmd.Write(*raw)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func clusterAPIConfig(e *testEnv, name, clusterName, ns, timeout string) string {
	return e.providerBlock() + fmt.Sprintf(`
resource "kubeplay_credential" "mgmt" {
  name = "mgmt"
  kind = "provider"
}

resource "kubeplay_credential" "child" {
  name               = %q
  kind               = "cluster_api"
  parent             = kubeplay_credential.mgmt.name
  cluster_name       = %q
  cluster_namespace  = %q
  kubeconfig_timeout = %q
}
`, name, clusterName, ns, timeout)
}

// TestAccCredential_clusterAPI: a cluster_api credential waits for the
// kubeconfig Secret that "Cluster API" (the test) writes a few seconds after
// apply starts, connects with it (to the same local cluster), and a phase is
// applied through it. A missing Secret fails with its namespace and name;
// a credential that is its own parent fails at plan.
func TestAccCredential_clusterAPI(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-capi")
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "workload-kubeconfig", Namespace: ns},
		Data:       map[string][]byte{"value": e.selfContainedKubeconfig()},
	}
	var created time.Time
	phaseBlock := fmt.Sprintf(`
resource "kubeplay_phase" "test" {
  name      = %q
  cluster   = kubeplay_credential.child.name
  documents = [%q]
}
`, randName("capi"), cmDoc(ns, "through-child", "1"))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config:      e.providerBlock() + "resource \"kubeplay_credential\" \"loop\" {\n  name = \"loop\"\n  kind = \"cluster_api\"\n  parent = \"loop\"\n  cluster_name = \"x\"\n}\n",
				PlanOnly:    true,
				ExpectError: expectError(`Credential Parent Cycle`),
			},
			{
				Config:      clusterAPIConfig(e, "missing", "nowhere", ns, "2s"),
				ExpectError: expectError(`(?s)Secret ` + ns + `/nowhere-kubeconfig.*not found in the parent cluster`),
			},
			{
				PreConfig: func() {
					// Provisioning finishes while apply waits.
					time.AfterFunc(3*time.Second, func() {
						created = time.Now()
						if _, err := e.kube.CoreV1().Secrets(ns).Create(context.Background(), secret, metav1.CreateOptions{}); err != nil {
							t.Error(err)
						}
					})
				},
				Config: clusterAPIConfig(e, "child", "workload", ns, "2m") + phaseBlock,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("kubeplay_credential.child", tfjsonpath.New("username"), knownvalue.StringExact(e.adminUser)),
					statecheck.ExpectKnownValue("kubeplay_credential.child", tfjsonpath.New("cluster_namespace"), knownvalue.StringExact(ns)),
				},
				Check: func(*terraform.State) error {
					if created.IsZero() {
						return fmt.Errorf("the credential was created before its kubeconfig Secret existed")
					}
					_, err := e.kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "through-child", metav1.GetOptions{})
					return err
				},
			},
			{
				// A longer loop, through a credential already stored: a -> b -> a.
				PreConfig: func() {
					b := credential.Spec{Name: "b", Kind: credential.KindClusterAPI, Parent: "a", ClusterName: "x", Namespace: "default"}
					if _, err := e.kube.CoreV1().Secrets(e.catalog).Create(context.Background(), b.Secret(e.catalog, credential.Report{}, time.Now()), metav1.CreateOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: clusterAPIConfig(e, "child", "workload", ns, "2m") + phaseBlock +
					"resource \"kubeplay_credential\" \"a\" {\n  name = \"a\"\n  kind = \"cluster_api\"\n  parent = \"b\"\n  cluster_name = \"x\"\n}\n",
				PlanOnly:    true,
				ExpectError: expectError(`(?s)Credential Parent Cycle.*a -> b -> a`),
			},
		},
	})
}
