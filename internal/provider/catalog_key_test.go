// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalogkey"
)

// TestAccProvider_catalogKeyTooShort: a catalog key shorter than 32 bytes
// fails the plan, from the attribute and from the environment. It needs no
// cluster, so it runs in plain go test.
func TestAccProvider_catalogKeyTooShort(t *testing.T) {
	withCred := func(p string) string {
		return p + "\nresource \"kubeplay_credential\" \"test\" {\n  name = \"x\"\n  kind = \"provider\"\n}\n"
	}
	resource.UnitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config:      withCred("provider \"kubeplay\" {\n  host        = \"https://127.0.0.1:1\"\n  catalog_key = \"short\"\n}\n"),
				PlanOnly:    true,
				ExpectError: expectError(`(?s)catalog_key string length must be at least 32, got: 5`),
			},
			{
				PreConfig:   func() { t.Setenv(envCatalogKey, "also-short") },
				Config:      withCred(unreachableProvider),
				PlanOnly:    true,
				ExpectError: expectError(`(?s)Catalog Key Too Short.*KUBEPLAY_CATALOG_KEY is 10 bytes long; a catalog key needs at least 32`),
			},
		},
	})
}

// TestAccProvider_catalogKey: with catalog_key set, kubeplay signs with it
// and makes no key Secret; a workspace on the same catalog without the key
// sees the group as changed outside kubeplay and plans to write it again.
func TestAccProvider_catalogKey(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("plan-key")
	group := randName("plan-grp")
	key := strings.Repeat("0123456789abcdef", 3)
	keyed := fmt.Sprintf("provider \"kubeplay\" {\n  config_path       = %q\n  catalog_namespace = %q\n  catalog_key       = %q\n}\n",
		e.kubeconfig, e.catalog, key)
	body := fmt.Sprintf(`
resource "kubeplay_container_group" "g" {
  name      = %q
  namespace = %q
  image     = %q
}
`, group, ns, acctest.TestImage()) + trustRun("kubeplay_container_group.g.name", "null")
	noSecret := func(*terraform.State) error {
		_, err := e.kube.CoreV1().Secrets(e.catalog).Get(context.Background(), catalogkey.SecretName, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("the key Secret: %v, want not found: the configured key is used", err)
		}
		return nil
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{
			{
				Config: keyed + body,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("successful")),
				},
				Check: noSecret,
			},
			{
				Config:             e.providerBlock() + body,
				PlanOnly:           true,
				ExpectNonEmptyPlan: true, // the group's update: its signature does not verify without the key
			},
			{Config: keyed + body, Check: noSecret},
		},
	})
}
