// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/capacity"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

// TestAccContainerGroup_orphanIDNotStolen: whoever may write ConfigMaps in
// a group's namespace plants a "ledger" of a group about to be created there
// that records another group's owner id, named as that new group's
// predecessor. The new group must not take the id over: it would then own,
// and its destroy delete, the other group's namespace.
func TestAccContainerGroup_orphanIDNotStolen(t *testing.T) {
	e := newTestEnv(t)
	ns := randName("kp-orphan")
	owner, newcomer := randName("orph-b"), randName("orph-a")
	groupB := ownerGroup("b", "", owner, ns, "baseline")
	groupA := groupB + fmt.Sprintf(`
resource "kubeplay_container_group" "a" {
  name       = %q
  namespace  = kubeplay_container_group.b.namespace
  image      = %q
}
`, newcomer, acctest.TestImage())
	var ownerID string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: e.providerBlock() + groupB,
				Check: func(s *terraform.State) error {
					ownerID = s.RootModule().Resources["kubeplay_container_group.b"].Primary.Attributes["owner_id"]
					return nil
				},
			},
			{
				PreConfig: func() {
					ctx := context.Background()
					cat, err := e.kube.CoreV1().Namespaces().Get(ctx, e.catalog, metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					planted := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
						Name:      capacity.Ledger{Group: newcomer, Kind: capacity.Runs}.ConfigMapName(),
						Namespace: ns,
						Labels:    managed.Labels(managed.LabelContainerGroup, newcomer),
						Annotations: managed.Owner{ID: ownerID, Kind: "container group", Name: newcomer, Catalog: e.catalog,
							CatalogUID: string(cat.UID)}.Annotations(),
					}}
					if _, err := e.kube.CoreV1().ConfigMaps(ns).Create(ctx, planted, metav1.CreateOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: e.providerBlock() + groupA,
				Check: func(s *terraform.State) error {
					if got := s.RootModule().Resources["kubeplay_container_group.a"].Primary.Attributes["owner_id"]; got == ownerID || got == "" {
						return fmt.Errorf("the new group's owner_id is %q, group %s's is %q: it took over another group's id", got, owner, ownerID)
					}
					return nil
				},
			},
			// Destroying the newcomer alone leaves the other group's namespace.
			{
				Config: e.providerBlock() + groupB,
				Check: func(*terraform.State) error {
					_, err := e.kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
					return err
				},
			},
		},
	})
}
