// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/querycheck"
	"github.com/hashicorp/terraform-plugin-testing/querycheck/queryfilter"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/phase"
)

// requireQuery skips the test unless the terraform CLI (TF_ACC_TERRAFORM_PATH
// or the one on PATH) has `terraform query`, which came with 1.14.
func requireQuery(t *testing.T) {
	t.Helper()
	if !terraformAtLeast(t, 14) {
		t.Skipf("terraform %s has no `terraform query` (needs 1.14.0 or later): set TF_ACC_TERRAFORM_PATH to a newer terraform",
			terraformVersion(t))
	}
}

// listFound is one result of `terraform query -json`.
type listFound struct {
	Address     string            `json:"address"`
	DisplayName string            `json:"display_name"`
	Identity    map[string]string `json:"identity"`
	Object      map[string]any    `json:"resource_object"`
}

// query runs `terraform query -json` (plus args) in dir and returns its results.
func query(t *testing.T, terraformBin, cliConfig, dir string, args ...string) []listFound {
	t.Helper()
	cmd := exec.Command(terraformBin, append([]string{"query", "-json", "-no-color"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+cliConfig, "TF_IN_AUTOMATION=1", "TF_LOG=", "CHECKPOINT_DISABLE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("terraform query: %v\n%s", err, out)
	}
	var found []listFound
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Found *listFound `json:"list_resource_found"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Found != nil {
			found = append(found, *line.Found)
		}
	}
	return found
}

// TestAccQuery_generateConfigImports: definitions another state made are
// found by `terraform query`, the configuration it generates imports them,
// and the plan afterwards is empty. Listed results never carry a secret:
// the service account credential's exported kubeconfig is null.
func TestAccQuery_generateConfigImports(t *testing.T) {
	e := newTestEnv(t)
	requireQuery(t)
	bin, rc, err := providerCLI(t)
	if err != nil {
		t.Fatal(err)
	}
	ns := e.namespace("kp-query")
	prefix := randName("q")
	header := cliHeader(e.kubeconfig, e.catalog)
	other := t.TempDir()
	writeFile(t, filepath.Join(other, "main.tf"), header+fmt.Sprintf(`resource "kubeplay_credential" "p" {
  name = "%[1]s-provider"
  kind = "provider"
}

resource "kubeplay_credential" "sa" {
  name              = "%[1]s-sa"
  kind              = "service_account"
  namespace         = %[2]q
  export_kubeconfig = true
}

resource "kubeplay_container_group" "g" {
  name       = "%[1]s-group"
  namespace  = %[2]q
  image      = %[3]q
  credential = kubeplay_credential.p.name
  max_forks  = 3
}

resource "kubeplay_container_group" "unlisted" {
  name      = "x%[1]s"
  namespace = %[2]q
  image     = %[3]q
}
`, prefix, ns, acctest.TestImage()))
	t.Cleanup(func() { _ = terraformCLI(bin, rc, other, "destroy", "-auto-approve", "-no-color") })
	if err := terraformCLI(bin, rc, other, "apply", "-auto-approve", "-input=false", "-no-color"); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "main.tf"), header)
	writeFile(t, filepath.Join(dir, "find.tfquery.hcl"), fmt.Sprintf(`list "kubeplay_credential" "c" {
  provider         = kubeplay
  include_resource = true
  config {
    name_prefix = %[1]q
  }
}

list "kubeplay_container_group" "g" {
  provider         = kubeplay
  include_resource = true
  config {
    name_prefix = %[1]q
  }
}
`, prefix))
	found := query(t, bin, rc, dir, "-generate-config-out=generated.tf")
	checkCatalogResults(t, found, prefix)
	generated, err := os.ReadFile(filepath.Join(dir, "generated.tf"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(generated), "import {"); n != 3 {
		t.Errorf("generated.tf has %d import blocks, want 3:\n%s", n, generated)
	}
	if err := terraformCLI(bin, rc, dir, "apply", "-auto-approve", "-input=false", "-no-color"); err != nil {
		t.Fatalf("importing with the generated configuration: %v\n%s", err, generated)
	}
	// -detailed-exitcode exits 2 when the plan has changes.
	if err := terraformCLI(bin, rc, dir, "plan", "-detailed-exitcode", "-input=false", "-no-color"); err != nil {
		t.Fatalf("the plan after the import is not empty: %v\n%s", err, generated)
	}
}

// checkCatalogResults checks the definitions listed under prefix: the two
// credentials and the group, named by identity, with the resource; the
// group that does not start with prefix is not listed.
func checkCatalogResults(t *testing.T, found []listFound, prefix string) {
	t.Helper()
	want := map[string]string{
		prefix + "-provider": "kubeplay_credential", prefix + "-sa": "kubeplay_credential", prefix + "-group": "kubeplay_container_group",
	}
	for _, f := range found {
		name := f.Identity["name"]
		if want[name] == "" || !strings.HasPrefix(f.Address, "list."+want[name]+".") {
			t.Errorf("unexpected result %s %q (identity %v)", f.Address, f.DisplayName, f.Identity)
			continue
		}
		delete(want, name)
		if !strings.HasSuffix(f.DisplayName, " "+name) || f.Object["name"] != name {
			t.Errorf("%s: display name %q, resource name %v; want both to name %s", f.Address, f.DisplayName, f.Object["name"], name)
		}
		if name == prefix+"-sa" && (f.Object["exported_kubeconfig"] != nil || f.Object["kind"] != "service_account") {
			t.Errorf("the service account credential's result carries exported_kubeconfig %v (kind %v), want null", f.Object["exported_kubeconfig"], f.Object["kind"])
		}
		if name == prefix+"-group" && fmt.Sprint(f.Object["max_forks"]) != "3" {
			t.Errorf("the group's result has max_forks %v, want 3", f.Object["max_forks"])
		}
	}
	for name := range want {
		t.Errorf("terraform query did not list %s", name)
	}
}

// TestAccQuery_orphanedRunPod: `terraform query` lists a run's pod as live
// while its provider runs it, and as orphaned once the provider was killed
// mid-run (kill -9), with its run id and the pod's phase.
func TestAccQuery_orphanedRunPod(t *testing.T) {
	if os.Getenv("TF_ACC") != "" {
		requireQuery(t)
	}
	f := newFaultEnv(t, faultGroup{attrs: faultLimits})
	s := f.runDir(t, commandRun(startedThen("sleep 300"), "30m"))
	qdir := f.dir(t, "")
	writeFile(t, filepath.Join(qdir, "pods.tfquery.hcl"), fmt.Sprintf(`list "kubeplay_run" "pods" {
  provider         = kubeplay
  include_resource = true
  config {
    container_group = %q
  }
}
`, f.group))
	cmd, out := s.start(t)
	pod := f.waitStarted(t, s, out)
	p, err := f.e.kube.CoreV1().Pods(f.ns).Get(context.Background(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	runID := p.Labels["kubeplay.io/run"]
	checkRunResult(t, query(t, f.terraformBin, f.cliConfig, qdir), f.group, runID, pod, `live, Running, \d+[sm]`)

	if err := syscall.Kill(providerPID(t, cmd.Process.Pid), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	s.waitPod(t, "ended", 3*time.Minute, func(p *corev1.Pod) bool {
		return p.Name == pod && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed)
	})
	checkRunResult(t, query(t, f.terraformBin, f.cliConfig, qdir), f.group, runID, pod, `orphaned, (Succeeded|Failed), \d+[sm]`)
}

// checkRunResult checks that found is the one run pod, with its identity,
// resource and a display name "run <id> (<status>)" where status matches.
func checkRunResult(t *testing.T, found []listFound, group, runID, pod, status string) {
	t.Helper()
	if len(found) != 1 {
		t.Fatalf("terraform query found %d run pods, want 1: %+v", len(found), found)
	}
	r := found[0]
	want := regexp.MustCompile(`^run ` + runID + ` \(` + status + `\)$`)
	if !want.MatchString(r.DisplayName) {
		t.Errorf("the run pod's display name is %q, want it to match %s", r.DisplayName, want)
	}
	if r.Identity["container_group"] != group || r.Identity["run_id"] != runID {
		t.Errorf("the run pod's identity is %v, want container_group %s and run_id %s", r.Identity, group, runID)
	}
	if r.Object["pod_name"] != pod || r.Object["id"] != runID {
		t.Errorf("the run pod's resource has pod_name %v and id %v, want %s and %s", r.Object["pod_name"], r.Object["id"], pod, runID)
	}
}

// TestAccQuery_nodeLabelAndPhase lists a node label and a phase with the
// testing framework's query mode: each by its identity, the phase with the
// objects its Read finds for an import.
func TestAccQuery_nodeLabelAndPhase(t *testing.T) {
	e := newTestEnv(t)
	ns := randName("kp-query")
	e.cleanupNamespace(ns)
	name := randName("q")
	cfg := labelConfig(e, fmt.Sprintf("  name  = %q\n  image = %q\n  cpu   = \"100m\"\n", name, acctest.TestImage())) +
		phaseConfig("test", name, []string{nsDoc(ns), cmDoc(ns, "a", "1")}, "")
	// The configuration of the step before, with its provider block, stays.
	lists := fmt.Sprintf(`
list "kubeplay_node_label" "l" {
  provider = kubeplay
  config {
    name_prefix = %[1]q
  }
}

list "kubeplay_phase" "p" {
  provider         = kubeplay
  include_resource = true
  config {
    name_prefix = %[1]q
  }
}
`, name)
	byName := queryfilter.ByResourceIdentity(map[string]knownvalue.Check{"name": knownvalue.StringExact(name), "cluster": knownvalue.Null()})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_14_0)},
		Steps: []resource.TestStep{
			{Config: cfg},
			{
				Query:  true,
				Config: lists,
				QueryResultChecks: []querycheck.QueryResultCheck{
					querycheck.ExpectLength("kubeplay_node_label.l", 1),
					querycheck.ExpectIdentity("kubeplay_node_label.l", map[string]knownvalue.Check{"name": knownvalue.StringExact(name)}),
					querycheck.ExpectLength("kubeplay_phase.p", 1),
					querycheck.ExpectResourceDisplayName("kubeplay_phase.p", byName, knownvalue.StringExact("phase "+name)),
					querycheck.ExpectResourceKnownValues("kubeplay_phase.p", byName, []querycheck.KnownValueCheck{
						{Path: tfjsonpath.New("inventory_id"), KnownValue: knownvalue.StringExact(phase.ApplySetID(phase.InventoryName(name), e.catalog))},
						{Path: tfjsonpath.New("objects"), KnownValue: knownvalue.ListSizeExact(2)},
					}),
				},
			},
		},
	})
}

// TestAccQuery_endedRuns: the runs of a group with a ledger that ended are
// listed by `terraform query` after its run pods, newest first, each named
// by how it ended and where its time went, with its status, reason and
// timeline; the container group data source sums them up in
// start_figures. None of it costs a request per run: the records ride on
// each run's release of its claim.
func TestAccQuery_endedRuns(t *testing.T) {
	if os.Getenv("TF_ACC") != "" {
		requireQuery(t)
	}
	f := newFaultEnv(t, faultGroup{attrs: faultLimits})
	ok := f.runDir(t, commandRun("echo ok", "10m"))
	if err := f.terraform(ok.dir, "apply", "-auto-approve", "-input=false", "-no-color"); err != nil {
		t.Fatal(err)
	}
	failed := f.runDir(t, commandRun("exit 3", "10m")+"\n  ignore_failure = true")
	if err := f.terraform(failed.dir, "apply", "-auto-approve", "-input=false", "-no-color"); err != nil {
		t.Fatal(err)
	}
	okID, failedID := ok.runState(t)["id"], failed.runState(t)["id"]

	qdir := f.dir(t, "")
	writeFile(t, filepath.Join(qdir, "runs.tfquery.hcl"), fmt.Sprintf(`list "kubeplay_run" "runs" {
  provider         = kubeplay
  include_resource = true
  config {
    container_group = %q
  }
}
`, f.group))
	found := query(t, f.terraformBin, f.cliConfig, qdir)
	if len(found) != 2 {
		t.Fatalf("terraform query found %d results, want the 2 ended runs: %+v", len(found), found)
	}
	for i, want := range []struct {
		id, how, status string
		reason          any
	}{{fmt.Sprint(failedID), "failed: command_failed", "failed", "command_failed"}, {fmt.Sprint(okID), "successful", "successful", nil}} {
		r := found[i]
		// Seconds, or minutes on a loaded machine (make test-all saw "1m ago").
		name := regexp.MustCompile(`^run ` + want.id + ` \(ended ` + want.how + `, (\d+s|[1-9]m) ago; to start \d+\.\ds: queued \d+\.\ds, ` +
			`scheduling \d+\.\ds, image \d+\.\ds, start \d+\.\ds; playbook \d+\.\ds\)$`)
		if !name.MatchString(r.DisplayName) {
			t.Errorf("result %d is named %q, want it to match %s", i, r.DisplayName, name)
		}
		if r.Identity["run_id"] != want.id || r.Object["status"] != want.status || r.Object["status_reason"] != want.reason {
			t.Errorf("result %d: identity %v, status %v (%v); want run %s, %s (%v)", i, r.Identity, r.Object["status"],
				r.Object["status_reason"], want.id, want.status, want.reason)
		}
		if _, err := timelineOf(r.Object, coldSteps); err != nil {
			t.Errorf("result %d: %v", i, err)
		}
	}

	figures := f.dir(t, fmt.Sprintf(`data "kubeplay_container_group" "g" {
  name = %q
}

output "figures" {
  value = data.kubeplay_container_group.g.start_figures
}
`, f.group))
	if err := f.terraform(figures, "apply", "-auto-approve", "-input=false", "-no-color"); err != nil {
		t.Fatal(err)
	}
	out, err := terraformCommand(f.terraformBin, f.cliConfig, figures, nil, "output", "-json", "figures").Output()
	if err != nil {
		t.Fatal(err)
	}
	var fig struct {
		Runs      int     `json:"runs"`
		WarmShare float64 `json:"warm_share"`
		ToStart   struct {
			P50, P90 float64
		} `json:"to_start"`
	}
	if err := json.Unmarshal(out, &fig); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	t.Logf("start_figures: %s", out)
	if fig.Runs != 2 || fig.WarmShare != 0 || fig.ToStart.P50 <= 0 || fig.ToStart.P90 < fig.ToStart.P50 {
		t.Errorf("start_figures %s: want 2 runs, none warm, a time to start above 0 with p90 at least p50", out)
	}
}
