// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
)

// switchConfig is a group with default_plan_check = "changes" and two runs
// whose playbook copies a file in their own pod: check may be "" (no
// plan_check), provider is added to the provider block.
func (e *testEnv) switchConfig(group, ns, check, provider string) string {
	header := cliRequiredProviders + fmt.Sprintf("provider \"kubeplay\" {\n  config_path       = %q\n  catalog_namespace = %q\n%s}\n\n",
		e.kubeconfig, e.catalog, provider)
	runs := ""
	for _, name := range []string{"a", "b"} {
		runs += fmt.Sprintf(`
resource "kubeplay_run" %q {
  container_group = kubeplay_container_group.g.name
  playbook        = "- hosts: localhost\n  gather_facts: false\n  tasks:\n    - name: write\n      ansible.builtin.copy: {dest: /tmp/switch, content: \"x\\n\"}\n"
%s}
`, name, planCheckLine(check))
	}
	return header + fmt.Sprintf(`resource "kubeplay_container_group" "g" {
  name               = %q
  namespace          = %q
  image              = %q
  default_plan_check = "changes"
}
`, group, ns, acctest.TestImage()) + runs
}

// TestAccRun_planCheckSwitches runs the terraform CLI with the built
// provider, as a CI job does, and counts the run pods each plan creates:
// a group's default_plan_check checks nothing unless the provider's
// group_default_plan_checks says so; KUBEPLAY_DISABLE_PLAN_CHECKS turns a
// run's own plan_check off, whatever disable_plan_checks says; a terraform
// binary under another name (an invocation kubeplay cannot read) checks
// nothing and warns once.
func TestAccRun_planCheckSwitches(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-checkswitch")
	terraformBin, cliConfig, err := providerCLI(t)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	group := randName("grp")
	tf := func(bin string, env []string, cfg string, args ...string) string {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := terraformCommand(bin, cliConfig, dir, env, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("terraform %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// planned is each run's planned_changes in a saved plan: "null",
	// "unknown" or the number of tasks it would change.
	planned := func(env []string) map[string]string {
		t.Helper()
		out, err := terraformCommand(terraformBin, cliConfig, dir, env, "show", "-json", "tfplan").Output()
		if err != nil {
			t.Fatalf("terraform show: %v", err)
		}
		var p struct {
			ResourceChanges []struct {
				Address string `json:"address"`
				Type    string `json:"type"`
				Change  struct {
					After        map[string]json.RawMessage `json:"after"`
					AfterUnknown map[string]json.RawMessage `json:"after_unknown"`
				} `json:"change"`
			} `json:"resource_changes"`
		}
		if err := json.Unmarshal(out, &p); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, rc := range p.ResourceChanges {
			if rc.Type != "kubeplay_run" {
				continue
			}
			var pc struct {
				TaskCount int `json:"task_count"`
			}
			switch raw := rc.Change.After["planned_changes"]; {
			case string(rc.Change.AfterUnknown["planned_changes"]) == "true":
				got[rc.Address] = "unknown"
			case raw == nil || string(raw) == "null":
				got[rc.Address] = "null"
			case json.Unmarshal(raw, &pc) == nil:
				got[rc.Address] = fmt.Sprint(pc.TaskCount)
			}
		}
		return got
	}
	want := func(what string, got map[string]string, v string) {
		t.Helper()
		if got["kubeplay_run.a"] != v || got["kubeplay_run.b"] != v {
			t.Errorf("%s: planned_changes %v, want %s for both runs", what, got, v)
		}
	}
	tf(terraformBin, nil, e.switchConfig(group, ns, "", ""), "apply", "-input=false", "-no-color", "-auto-approve",
		"-target=kubeplay_container_group.g")
	plan := []string{"plan", "-input=false", "-no-color", "-out=tfplan"}

	// (a) The group's default, with group_default_plan_checks unset: no check.
	pods := e.countRunPods(ns)
	out := tf(terraformBin, nil, e.switchConfig(group, ns, "", ""), plan...)
	if n := pods.n(); n != 0 {
		t.Errorf("group default, group_default_plan_checks unset: %d check pods", n)
	}
	want("group default, group_default_plan_checks unset", planned(nil), "null")
	if strings.Contains(out, "Warning: Playbook Check") || strings.Contains(out, "Warning: Plan-Time Checks") {
		t.Errorf("group default, group_default_plan_checks unset: a warning:\n%s", out)
	}

	// (b) The variable turns a run's own plan_check off; disable_plan_checks
	// = false cannot turn it back on.
	off := []string{"KUBEPLAY_DISABLE_PLAN_CHECKS=1"}
	out = tf(terraformBin, off, e.switchConfig(group, ns, planCheckChanges, "  group_default_plan_checks = true\n  disable_plan_checks = false\n"), plan...)
	if n := pods.n(); n != 0 {
		t.Errorf("KUBEPLAY_DISABLE_PLAN_CHECKS=1: %d check pods", n)
	}
	want("KUBEPLAY_DISABLE_PLAN_CHECKS=1", planned(off), "null")
	if strings.Count(out, "Warning: Plan-Time Checks Disabled") != 1 || !strings.Contains(out, "KUBEPLAY_DISABLE_PLAN_CHECKS:") {
		t.Errorf("KUBEPLAY_DISABLE_PLAN_CHECKS=1: want one warning naming it:\n%s", out)
	}

	// (c) Terraform under another name: kubeplay cannot tell the command,
	// so it checks nothing, and says so once.
	renamed := filepath.Join(t.TempDir(), "tf-renamed")
	if err := os.Symlink(terraformBin, renamed); err != nil {
		t.Fatal(err)
	}
	out = tf(renamed, nil, e.switchConfig(group, ns, planCheckChanges, ""), plan...)
	if n := pods.n(); n != 0 {
		t.Errorf("renamed terraform: %d check pods", n)
	}
	want("renamed terraform", planned(nil), "unknown")
	if strings.Count(out, "Warning: Playbook Checks Not Run") != 1 || !strings.Contains(out, `"tf-renamed", is not terraform or tofu`) {
		t.Errorf("renamed terraform: want one warning saying why:\n%s", out)
	}

	// The control: group_default_plan_checks = true lets the group's default
	// check both runs.
	out = tf(terraformBin, nil, e.switchConfig(group, ns, "", "  group_default_plan_checks = true\n"), plan...)
	if n := pods.n(); n == 0 {
		t.Errorf("group_default_plan_checks = true: no check pod\n%s", out)
	}
	want("group_default_plan_checks = true", planned(nil), "1")

	tf(terraformBin, nil, e.switchConfig(group, ns, "", ""), "destroy", "-input=false", "-no-color", "-auto-approve")
}

// runDiagnostics records the diagnostics of the provider's plans of runs,
// which terraform-plugin-testing does not show.
type runDiagnostics struct {
	mu    sync.Mutex
	diags []*tfprotov6.Diagnostic
}

type runRecordingServer struct {
	tfprotov6.ProviderServer
	rec *runDiagnostics
}

func (s *runRecordingServer) PlanResourceChange(ctx context.Context, req *tfprotov6.PlanResourceChangeRequest) (*tfprotov6.PlanResourceChangeResponse, error) {
	resp, err := s.ProviderServer.PlanResourceChange(ctx, req)
	if resp != nil && req.TypeName == "kubeplay_run" {
		s.rec.mu.Lock()
		s.rec.diags = append(s.rec.diags, resp.Diagnostics...)
		s.rec.mu.Unlock()
	}
	return resp, err
}

// count is how many recorded diagnostics have summary.
func (r *runDiagnostics) count(summary string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, d := range r.diags {
		if d.Summary == summary {
			n++
		}
	}
	return n
}

// TestAccRun_planCheckInvocationUnknown serves the provider as New does,
// with the real invocation: its parent is go test, which is not Terraform,
// so a plan of two runs with plan_check = "changes" checks neither (no pod,
// planned_changes unknown) and warns once.
func TestAccRun_planCheckInvocationUnknown(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-checkinv")
	group := randName("grp")
	rec := &runDiagnostics{}
	factories := map[string]func() (tfprotov6.ProviderServer, error){
		"kubeplay": func() (tfprotov6.ProviderServer, error) {
			s, err := providerserver.NewProtocol6WithError(New("test")())()
			return &runRecordingServer{ProviderServer: s, rec: rec}, err
		},
	}
	cfg := strings.TrimPrefix(e.switchConfig(group, ns, planCheckChanges, ""), cliRequiredProviders)
	var pods *runPodCounter
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{Config: e.runGroup(group, ns), Check: func(*terraform.State) error { pods = e.countRunPods(ns); return nil }},
			{
				Config: cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectUnknownValue("kubeplay_run.a", tfjsonpath.New("planned_changes")),
					plancheck.ExpectUnknownValue("kubeplay_run.b", tfjsonpath.New("planned_changes")),
					planCheckFunc(func() error {
						if n := pods.n(); n != 0 {
							return fmt.Errorf("%d check pods during the plan", n)
						}
						if n := rec.count("Playbook Checks Not Run"); n != 1 {
							return fmt.Errorf("%d warnings Playbook Checks Not Run in the plan, want 1", n)
						}
						return nil
					}),
				}},
			},
		},
	})
}

// planCheckFunc is a plan check that f makes.
type planCheckFunc func() error

func (f planCheckFunc) CheckPlan(_ context.Context, _ plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	resp.Error = f()
}
