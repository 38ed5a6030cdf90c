// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/credential"
)

// recaCredentialCheck changes, between plan and apply, the CA bundle of a
// catalog credential and signs it as kubeplay does (someone holding the
// catalog key): the cluster it trusts is no longer the one the plan showed.
type recaCredentialCheck struct {
	e         *testEnv
	name, add string
}

func (c recaCredentialCheck) CheckPlan(ctx context.Context, _ plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	s := catalog.New(c.e.kube, c.e.catalog, nil)
	got, err := s.GetCredential(ctx, c.name)
	if err != nil {
		resp.Error = err
		return
	}
	v := got.Value
	v.Spec.CACert += c.add
	_, resp.Error = s.PutCredential(ctx, v, catalog.CreateOrUpdate)
}

// TestAccRun_credentialChangedAfterPlan (issue 40): a saved plan shows the
// run's target, the server and CA fingerprint of its group's credential;
// the credential is then rewritten, correctly signed, to trust another CA
// bundle. The apply refuses it (Terraform plans the run again at apply and
// refuses the changed planned_targets) before any pod exists. Before
// planned_targets, only the pod was compared and the run ran.
func TestAccRun_credentialChangedAfterPlan(t *testing.T) {
	e := newTestEnv(t)
	ctx := context.Background()
	ns := e.namespace("tgt-cred")
	host, ca := e.clusterHostAndCA()
	cred, group := randName("tgt-cred"), randName("tgt-grp")
	store := catalog.New(e.kube, e.catalog, nil)
	if err := store.EnsureNamespace(ctx); err != nil {
		t.Fatal(err)
	}
	// Managed by another workspace, as kubeplay writes it.
	if _, err := store.PutCredential(ctx, catalog.Credential{Spec: credential.Spec{Name: cred, Kind: credential.KindBearerToken,
		Host: host, BearerToken: e.token(ns, "runner", "admin"), CACert: ca, VerifySSL: true, Namespace: ns},
		CheckedAt: time.Now()}, catalog.NewOnly); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.DeleteCredential(context.Background(), cred) })
	sum := sha256.Sum256([]byte(ca))
	groupCfg := fmt.Sprintf(`
resource "kubeplay_container_group" "g" {
  name       = %q
  namespace  = %q
  image      = %q
  credential = %q
}
`, group, ns, acctest.TestImage(), cred)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{
			{Config: e.providerBlock() + groupCfg},
			{
				Config: e.providerBlock() + groupCfg + trustRun("kubeplay_container_group.g.name", "null"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue(runAddr, tfjsonpath.New("planned_targets"), knownvalue.ListExact([]knownvalue.Check{
						knownvalue.ObjectExact(map[string]knownvalue.Check{
							"container_group": knownvalue.StringExact(group),
							"server":          knownvalue.StringExact(host),
							"ca_sha256":       knownvalue.StringExact(hex.EncodeToString(sum[:])),
							"pod_sha256":      knownvalue.StringRegexp(regexp.MustCompile(`^[0-9a-f]{64}$`)),
						}),
					})),
					recaCredentialCheck{e: e, name: cred, add: selfSignedCA(t)},
				}},
				ExpectError: expectError(`(?s)Provider produced inconsistent final plan.*kubeplay_run\.test.*` +
					`\.planned_targets\[0\]\.ca_sha256: was cty\.StringVal\("` + hex.EncodeToString(sum[:]) + `"\), but now`),
			},
			{
				PreConfig: func() { e.checkNoPodEver(ns) },
				Config:    e.providerBlock() + groupCfg,
			},
		},
	})
}

// TestAccRun_groupsChangedDuringApply (issue 40): a run with two
// container_groups, whose pods differ, so it has no rendered_pod; both
// groups change in the same apply, so the plan knows them as planned, and
// between their apply and the run's someone holding the catalog key
// rewrites the second. The run fails with the second group's target diff
// before any pod exists, though the first group, where it would have run,
// is as planned. Before planned_targets, nothing was compared and it ran.
func TestAccRun_groupsChangedDuringApply(t *testing.T) {
	e := newTestEnv(t)
	ns1, ns2 := e.namespace("tgt-multi1"), e.namespace("tgt-multi2")
	g1, g2 := randName("tgt-grp1"), randName("tgt-grp2")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	groups := func(runs int) string {
		return fmt.Sprintf(`
resource "kubeplay_container_group" "g1" {
  name                = %q
  namespace           = %q
  image               = %q
  max_concurrent_runs = %[4]d
}

resource "kubeplay_container_group" "g2" {
  name                = %q
  namespace           = %q
  image               = %[3]q
  max_concurrent_runs = %[4]d
}
`, g1, ns1, acctest.TestImage(), runs, g2, ns2)
	}
	run := e.forgeGroupHCL(exe, g2, "g2") + `
resource "kubeplay_run" "test" {
  container_groups = [kubeplay_container_group.g1.name, kubeplay_container_group.g2.name]
  command          = ["sh", "-c", "echo ran"]
  depends_on       = [terraform_data.forge]
}
`
	digest := knownvalue.StringRegexp(regexp.MustCompile(`^[0-9a-f]{64}$`))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkNoRunPods(ns1),
		Steps: []resource.TestStep{
			{Config: e.providerBlock() + groups(2)},
			{
				Config: e.providerBlock() + groups(3) + run,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectUnknownValue(runAddr, tfjsonpath.New("rendered_pod")),
					plancheck.ExpectKnownValue(runAddr, tfjsonpath.New("planned_targets").AtSliceIndex(1), knownvalue.ObjectExact(
						map[string]knownvalue.Check{"container_group": knownvalue.StringExact(g2), "server": knownvalue.NotNull(),
							"ca_sha256": knownvalue.NotNull(), "pod_sha256": digest})),
				}},
				ExpectError: expectError(`(?s)Run Pod Differs From Plan.*Container group "` + g2 + `".*Nothing was created, claimed ` +
					`or sent to a pod.*-pod_sha256: [0-9a-f]{64}\s+\+pod_sha256: [0-9a-f]{64}.*Plan again.*planned_targets`),
			},
			{
				PreConfig: func() {
					e.checkNoPodEver(ns1)
					e.checkNoPodEver(ns2)
				},
				Config: e.providerBlock() + groups(3),
			},
		},
	})
}
