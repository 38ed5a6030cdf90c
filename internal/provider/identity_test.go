// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/config"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/phase"
)

// identityVersions: resource identity came with Terraform 1.12.
var identityVersions = []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_12_0)}

// identityImportSteps creates the resource from cfg, checks the identity
// state holds, then imports it in a fresh state with an import block that
// gives only that identity: the plan must import it and change nothing, and
// the identity Terraform reads back must equal the one written at create.
func identityImportSteps(cfg string, vars config.Variables, addr string, identity map[string]knownvalue.Check) []resource.TestStep {
	return []resource.TestStep{
		{
			Config:          cfg,
			ConfigVariables: vars,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectIdentity(addr, identity),
				statecheck.ExpectIdentityValueMatchesState(addr, tfjsonpath.New("name")),
			},
		},
		{
			Config:          cfg,
			ConfigVariables: vars,
			ResourceName:    addr,
			ImportState:     true,
			ImportStateKind: resource.ImportBlockWithResourceIdentity,
		},
	}
}

func TestAccNodeLabel_importByIdentity(t *testing.T) {
	e := newTestEnv(t)
	name := randName("ident")
	cfg := labelConfig(e, fmt.Sprintf("  name   = %q\n  image  = %q\n  cpu    = \"100m\"\n  labels = { team = \"ci\" }\n", name, acctest.TestImage()))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		TerraformVersionChecks:   identityVersions,
		Steps: identityImportSteps(cfg, nil, labelAddr, map[string]knownvalue.Check{
			"name": knownvalue.StringExact(name),
		}),
	})
}

func TestAccContainerGroup_importByIdentity(t *testing.T) {
	e := newTestEnv(t)
	name, ns := randName("ident"), e.namespace("kp-ident")
	cfg := groupConfig(e, fmt.Sprintf("  name                = %q\n  namespace           = %q\n  max_concurrent_runs = 2\n", name, ns))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		TerraformVersionChecks:   identityVersions,
		Steps: identityImportSteps(cfg, nil, groupAddr, map[string]knownvalue.Check{
			"name": knownvalue.StringExact(name),
		}),
	})
}

func TestAccCredential_importByIdentity(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-ident")
	token := e.token(ns, "awx", "edit")
	host, ca := e.clusterHostAndCA()
	name := randName("ident")
	vars := config.Variables{"token": config.StringVariable(token)}
	cfg := bearerConfig(e, name, host, "var.token", ca, fmt.Sprintf("  namespace    = %q\n", ns))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		TerraformVersionChecks:   identityVersions,
		CheckDestroy:             e.checkSecretGone(name),
		Steps: identityImportSteps(cfg, vars, credAddr, map[string]knownvalue.Check{
			"name": knownvalue.StringExact(name),
		}),
	})
}

// TestAccPhase_importByIdentity imports a phase of the provider's own
// cluster (a null cluster in the identity) by identity.
func TestAccPhase_importByIdentity(t *testing.T) {
	e := newTestEnv(t)
	ns := randName("kp-ident")
	e.cleanupNamespace(ns)
	name := randName("ident")
	cfg := e.providerBlock() + phaseConfig("test", name, []string{nsDoc(ns), cmDoc(ns, "a", "1")}, "")
	steps := identityImportSteps(cfg, nil, phaseAddr, map[string]knownvalue.Check{
		"name":    knownvalue.StringExact(name),
		"cluster": knownvalue.Null(),
	})
	// As with an import by id, the documents cannot be read back: the import
	// plans an update that writes them, and nothing else.
	steps[1].ExpectNonEmptyPlan = true
	steps[1].ImportPlanChecks.PreApply = []plancheck.PlanCheck{
		plancheck.ExpectResourceAction(phaseAddr, plancheck.ResourceActionUpdate),
		plancheck.ExpectKnownValue(phaseAddr, tfjsonpath.New("inventory_id"), knownvalue.StringExact(phase.ApplySetID(phase.InventoryName(name), e.catalog))),
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		TerraformVersionChecks:   identityVersions,
		Steps:                    steps,
	})
}

// TestAccRun_identity: a run's identity is its container group and run id,
// set at create and kept by Read (refresh) and Update (output_limit changes
// in place), so that `terraform query` results of kubeplay_run name runs
// as state does.
func TestAccRun_identity(t *testing.T) {
	e := newTestEnv(t)
	name, ns := randName("ident"), e.namespace("kp-ident")
	run := func(limit int) string {
		return groupConfig(e, fmt.Sprintf("  name      = %q\n  namespace = %q\n  image     = %q\n", name, ns, acctest.TestImage())) + fmt.Sprintf(`
resource "kubeplay_run" "r" {
  container_group = kubeplay_container_group.test.name
  command         = ["true"]
  output_limit    = %d
}
`, limit)
	}
	checks := []statecheck.StateCheck{
		statecheck.ExpectIdentityValue("kubeplay_run.r", tfjsonpath.New("container_group"), knownvalue.StringExact(name)),
		statecheck.ExpectIdentityValueMatchesStateAtPath("kubeplay_run.r", tfjsonpath.New("run_id"), tfjsonpath.New("id")),
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		TerraformVersionChecks:   identityVersions,
		Steps: []resource.TestStep{
			{Config: run(1000), ConfigStateChecks: checks},
			{Config: run(2000), ConfigStateChecks: checks, ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction("kubeplay_run.r", plancheck.ResourceActionUpdate)},
			}},
		},
	})
}
