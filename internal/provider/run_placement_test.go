// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/capacity"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
)

// placement is two container groups, a and b, each in a namespace of its
// own with one run slot.
type placement struct {
	e          *testEnv
	names, nss [2]string
	groups     string
	ledgers    [2]capacity.Ledger
}

func newPlacement(e *testEnv, attrs [2]string) *placement {
	p := &placement{e: e, groups: e.providerBlock()}
	for i, key := range []string{"a", "b"} {
		p.names[i], p.nss[i] = randName("place-"+key), e.namespace("kp-place")
		p.groups += fmt.Sprintf(`
resource "kubeplay_container_group" %q {
  name                = %q
  namespace           = %q
  image               = %q
  max_concurrent_runs = 1
  %s
}
`, key, p.names[i], p.nss[i], acctest.TestImage(), attrs[i])
		p.ledgers[i] = capacity.Ledger{Kube: e.kube, Namespace: p.nss[i], Group: p.names[i], Kind: capacity.Runs, Limit: 1}
	}
	return p
}

// run is the groups and a run that may run in a, then b.
func (p *placement) run(body string) string {
	return p.groups + `
resource "kubeplay_run" "test" {
  container_groups = [kubeplay_container_group.a.name, kubeplay_container_group.b.name]
` + body + "}\n"
}

// hold takes group i's only run slot, as another run would.
func (p *placement) hold(i int) {
	p.e.t.Helper()
	// The ledger is the group's only under the group's owner id.
	g, err := catalog.New(p.e.kube, p.e.catalog, nil).GetGroup(context.Background(), p.names[i])
	if err != nil {
		p.e.t.Fatalf("reading group %s: %v", p.names[i], err)
	}
	p.ledgers[i].Owner.ID = g.Value.OwnerID
	ok, _, err := p.ledgers[i].TryAcquire(context.Background(), "holder", 1, 30*time.Minute)
	if !ok || err != nil {
		p.e.t.Fatalf("holding group %s's slot: %v, %v", p.names[i], ok, err)
	}
}

// checkPlaced checks the run's recorded group and that group j still has
// its holder's claim only.
func (p *placement) checkPlaced(i int) resource.TestCheckFunc {
	return resource.ComposeAggregateTestCheckFunc(
		resource.TestCheckResourceAttr(runAddr, "container_group", p.names[i]),
		resource.TestCheckResourceAttr(runAddr, "status", "successful"),
		p.e.checkNoRunPods(p.nss[0]), p.e.checkNoRunPods(p.nss[1]),
	)
}

// TestAccRun_placementFirstFull: a run whose first group's only slot is
// held runs in its second at once, records it, plans empty afterwards,
// and runs its destroy playbook there too (in the first it would wait out
// its 20s pod_pending_timeout and fail the destroy).
func TestAccRun_placementFirstFull(t *testing.T) {
	e := newTestEnv(t)
	p := newPlacement(e, [2]string{`pod_pending_timeout = "20s"`, ""})
	play := `"- hosts: all\n  gather_facts: false\n  tasks:\n    - debug: {msg: placed}\n"`
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: p.groups},
			{
				PreConfig: func() { p.hold(0) },
				Config:    p.run("  playbook = " + play + "\n  destroy_playbook = " + play + "\n"),
				Check:     p.checkPlaced(1),
			},
			{Config: p.run("  playbook = " + play + "\n  destroy_playbook = " + play + "\n"), PlanOnly: true},
		},
	})
}

// TestAccRun_placementAllFull: with both groups' slots held the run waits;
// when the second frees it runs there, after the slot freed.
func TestAccRun_placementAllFull(t *testing.T) {
	e := newTestEnv(t)
	p := newPlacement(e, [2]string{`pod_pending_timeout = "10m"`, `pod_pending_timeout = "10m"`})
	freed := make(chan time.Time, 1)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: p.groups},
			{
				PreConfig: func() {
					p.hold(0)
					p.hold(1)
					go func() {
						time.Sleep(8 * time.Second) // past the run's plan: it is waiting
						freed <- time.Now()
						if err := p.ledgers[1].Release(context.Background(), "holder"); err != nil {
							t.Error(err)
						}
					}()
				},
				Config: p.run("  command = [\"true\"]\n"),
				Check: resource.ComposeAggregateTestCheckFunc(p.checkPlaced(1),
					func(s *terraform.State) error {
						at := <-freed
						// started_at is when the run began to wait; its pod came after its queue, the timeline's first step.
						a := s.RootModule().Resources[runAddr].Primary.Attributes
						if a["timeline.0.step"] != "queued" {
							return fmt.Errorf("the run's timeline begins with %q, want queued", a["timeline.0.step"])
						}
						started, err := time.Parse(time.RFC3339Nano, a["timeline.1.started_at"])
						if err != nil {
							return err
						}
						if started.Before(at) {
							return fmt.Errorf("the run's %s step began at %s, before group b's slot freed at %s: it did not wait", a["timeline.1.step"], started, at)
						}
						claims, err := p.ledgers[0].Claims(context.Background())
						if _, held := claims["holder"]; err != nil || len(claims) != 1 || !held {
							return fmt.Errorf("group a's claims %v, %v: want the holder's only", claims, err)
						}
						return nil
					}),
			},
		},
	})
}

// TestAccRun_placementPriority: with both groups free, the list [a, b] and
// b's priority lower than a's, the run goes to b.
func TestAccRun_placementPriority(t *testing.T) {
	e := newTestEnv(t)
	p := newPlacement(e, [2]string{"priority = 10", "priority = 1"})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: p.run("  command = [\"true\"]\n"), Check: p.checkPlaced(1)},
		},
	})
}

// TestAccRun_placementPlanErrors: exactly one of container_group and
// container_groups, at plan time; every group of the list must exist, at
// apply (at plan, a missing one is a warning: it must not block a destroy).
func TestAccRun_placementPlanErrors(t *testing.T) {
	e := newTestEnv(t)
	run := func(body string) string {
		return e.providerBlock() + "resource \"kubeplay_run\" \"test\" {\n  command = [\"true\"]\n" + body + "}\n"
	}
	steps := []resource.TestStep{}
	for _, c := range []struct{ body, want string }{
		{"  container_group = \"g\"\n  container_groups = [\"g\"]\n",
			`(?s)Invalid Attribute Combination.*container_group = "g".*2 attributes specified when one \(and only one\) of \[container_group,container_groups\]`},
		{"", `(?s)Invalid Attribute Combination.*No attribute specified when one \(and only one\) of \[container_group,container_groups\]`},
		{"  container_groups = []\n", `(?s)Invalid Attribute Value.*container_groups = \[\].*at least 1`},
	} {
		steps = append(steps, resource.TestStep{Config: run(c.body), PlanOnly: true, ExpectError: expectError(c.want)})
	}
	// A missing group is a warning at plan (it must not block a destroy)
	// and an error at apply, at the element's path.
	missing := run("  container_groups = [\"nope-" + randName("x") + "\"]\n")
	steps = append(steps, resource.TestStep{Config: missing, PlanOnly: true, ExpectNonEmptyPlan: true}, resource.TestStep{
		Config:      missing,
		ExpectError: expectError(`(?s)Container Group Unavailable.*container_groups = \["nope-.*container group "nope-.*" does not exist in catalog namespace`),
	})
	resource.Test(t, resource.TestCase{ProtoV6ProviderFactories: testAccProtoV6ProviderFactories, Steps: steps})
}

// TestAccRunAction_placement invokes the action with container_groups
// while both groups' only slots are held: its progress says it waits on
// both, and, once the second frees, that it ran there.
func TestAccRunAction_placement(t *testing.T) {
	requireActions(t)
	e := newTestEnv(t)
	groupB, nsB := randName("place-b"), e.namespace("kp-place")
	f := newFaultEnvWith(t, e, e.kubeconfig, faultGroup{attrs: "max_concurrent_runs = 1\n  pod_pending_timeout = \"10m\"\n",
		extra: fmt.Sprintf(`
resource "kubeplay_container_group" "b" {
  name                = %q
  namespace           = %q
  image               = %q
  max_concurrent_runs = 1
  pod_pending_timeout = "10m"
}
`, groupB, nsB, acctest.TestImage())})
	p := &placement{e: e, names: [2]string{f.group, groupB}, nss: [2]string{f.ns, nsB}}
	for i := range p.ledgers {
		p.ledgers[i] = capacity.Ledger{Kube: e.kube, Namespace: p.nss[i], Group: p.names[i], Kind: capacity.Runs, Limit: 1}
		p.hold(i)
	}
	// The second group's slot frees once the action says it waits (a fixed delay freed it
	// before the action started on a loaded machine), or after 3 minutes, which fails below.
	waitingRE := regexp.MustCompile(fmt.Sprintf(`waiting for capacity: none of container groups %q, %q has room`, f.group, groupB))
	var release sync.Once
	free := func() {
		release.Do(func() {
			if err := p.ledgers[1].Release(context.Background(), "holder"); err != nil {
				t.Error(err)
			}
		})
	}
	timer := time.AfterFunc(3*time.Minute, free)
	defer timer.Stop()
	dir := f.dir(t, fmt.Sprintf(`action "kubeplay_run" "x" {
  config {
    container_groups = [%q, %q]
    command          = ["sh", "-c", "echo placed-by-the-action"]
  }
}
`, f.group, groupB))
	lines, stderr, err := terraformLinesFunc(t, f.terraformBin, f.cliConfig, dir, func(line string) {
		if waitingRE.MatchString(line) {
			free()
		}
	}, "apply", "-invoke=action.kubeplay_run.x", "-auto-approve", "-input=false", "-no-color")
	if err != nil {
		t.Fatalf("invoking the action: %v\n%s\n%s", err, dump(lines), stderr)
	}
	waiting := firstLine(lines, waitingRE.String())
	output, ran := firstLine(lines, `: placed-by-the-action$`), firstLine(lines, fmt.Sprintf(`ran in container group %q`, groupB))
	if waiting < 0 || output < waiting || ran < output {
		t.Errorf("want the wait (line %d), the output (line %d), then the group it ran in (line %d):\n%s", waiting, output, ran, dump(lines))
	}
}
