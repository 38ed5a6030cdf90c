// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/config"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/outputtail"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podexec"
)

// checkTarget is one SSH target and a run that templates a file on it with
// a secret of extra_vars_wo, for the plan-time check's tests.
type checkTarget struct {
	e      *testEnv
	ns     string
	key    string
	target acctest.SSHTarget
	token  string
}

const checkFile = "/home/" + acctest.SSHUser + "/app.conf"

func newCheckTarget(t *testing.T, e *testEnv, prefix string) *checkTarget {
	ns := e.namespace(prefix)
	key, pub := acctest.SSHKey(t)
	return &checkTarget{e: e, ns: ns, key: key, target: acctest.SSHTargets(t, e.kube, ns, 1, pub)[0],
		token: "tok-" + randName("secret")}
}

// config is the group and the run with plan_check mode and word in the
// template.
func (c *checkTarget) config(group, mode, word, extra string) string {
	inventory := fmt.Sprintf("t0 ansible_host=%s\n[all:vars]\nansible_user=%s\nansible_python_interpreter=/usr/bin/python3\n"+
		"ansible_ssh_timeout=60\nansible_ssh_retries=3\n", c.target.IP, acctest.SSHUser)
	playbook := "- hosts: all\n  gather_facts: false\n  tasks:\n    - name: template the config\n" +
		"      ansible.builtin.template: {src: app.conf.j2, dest: " + checkFile + ", mode: \"0600\"}\n"
	return c.e.runGroup(group, c.ns) + `
variable "key" {
  type      = string
  sensitive = true
  ephemeral = true
}
variable "token" {
  type      = string
  sensitive = true
  ephemeral = true
}

resource "kubeplay_run" "test" {
  container_group     = kubeplay_container_group.g.name
  playbook            = ` + fmt.Sprintf("%q", playbook) + `
  files               = { "app.conf.j2" = "word={{ word }}\ntoken={{ token }}\n" }
  inventory           = ` + fmt.Sprintf("%q", inventory) + `
  ssh_known_hosts     = ` + fmt.Sprintf("%q", c.target.KnownHosts+"\n") + `
  ssh_private_keys_wo = [var.key]
  extra_vars          = { word = "` + word + `" }
  extra_vars_wo       = jsonencode({ token = var.token })
` + planCheckLine(mode) + extra + "}\n"
}

// planCheckLine sets plan_check, unless mode is "" (the group's default).
func planCheckLine(mode string) string {
	if mode == "" {
		return ""
	}
	return "  plan_check          = \"" + mode + "\"\n"
}

// withGroupDefault gives config's group a default_plan_check, and lets it
// apply (group_default_plan_checks).
func withGroupDefault(config, mode string) string {
	config = strings.Replace(config, "  catalog_namespace =", "  group_default_plan_checks = true\n  catalog_namespace =", 1)
	return strings.Replace(config, "  image     =", "  default_plan_check = \""+mode+"\"\n  image     =", 1)
}

// groupOnly is config's group alone: a run is checked at plan only once
// its group exists.
func (c *checkTarget) groupOnly(group string) string {
	return c.e.runGroup(group, c.ns) + "variable \"key\" {\n  type = string\n  ephemeral = true\n}\n" +
		"variable \"token\" {\n  type = string\n  ephemeral = true\n}\n"
}

func (c *checkTarget) vars() config.Variables {
	return config.Variables{"key": config.StringVariable(c.key), "token": config.StringVariable(c.token)}
}

// exec runs a shell command in the target's pod.
func (c *checkTarget) exec(script string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	code, err := podexec.Run(ctx, acctest.RESTConfig(c.e.t), c.e.kube, c.ns, c.target.Pod, "sshd",
		[]string{"sh", "-c", script}, nil, &out, &errOut)
	if err == nil && code != 0 {
		err = fmt.Errorf("exit %d: %s", code, errOut.String())
	}
	return out.String(), err
}

// checkFileIs checks the file the run templates.
func (c *checkTarget) checkFileIs(word string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		got, err := c.exec("cat " + checkFile)
		if err != nil {
			return err
		}
		if want := "word=" + word + "\ntoken=" + c.token + "\n"; got != want {
			return fmt.Errorf("%s is %q, want %q", checkFile, got, want)
		}
		return nil
	}
}

// noCheckRecords fails when a plan-time check's record is left in the
// catalog namespace.
func (e *testEnv) noCheckRecords() error {
	l, err := e.kube.CoreV1().ConfigMaps(e.catalog).List(context.Background(),
		metav1.ListOptions{LabelSelector: managed.Selector(managed.LabelComponent, catalog.ComponentCheckRecord)})
	if err != nil {
		return err
	}
	if len(l.Items) > 0 {
		return fmt.Errorf("%d plan-time check records left, such as %s", len(l.Items), l.Items[0].Name)
	}
	return nil
}

// runPodCounter counts the run pods (checks' and runs') created in a
// namespace.
type runPodCounter struct {
	mu    sync.Mutex
	names map[string]bool
}

func (e *testEnv) countRunPods(ns string) *runPodCounter {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := e.kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: managed.LabelRun})
	if err != nil {
		e.t.Fatal(err)
	}
	c := &runPodCounter{names: map[string]bool{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok {
				c.mu.Lock()
				c.names[p.Name] = true
				c.mu.Unlock()
			}
		}
	}()
	e.t.Cleanup(func() { w.Stop(); cancel(); <-done })
	return c
}

// n is how many run pods were seen; it waits a moment for the watch.
func (c *runPodCounter) n() int {
	time.Sleep(2 * time.Second)
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.names)
}

// planCheckDiffsLine opts a run in to the check's diff text.
const planCheckDiffsLine = "  plan_check_diffs    = true\n"

// TestAccRun_planCheck: a run whose playbook templates a file on an SSH
// target, with plan_check = "changes" and plan_check_diffs: the plan shows
// the host, the task and the file's diff, the secret of extra_vars_wo
// redacted from it, and the apply of that plan creates the file; the plan
// after shows no change.
func TestAccRun_planCheck(t *testing.T) {
	e := newTestEnv(t)
	c := newCheckTarget(t, e, "kp-check")
	group := randName("grp")
	task := func(checks map[string]knownvalue.Check) knownvalue.Check {
		return knownvalue.ObjectPartial(map[string]knownvalue.Check{
			"hosts": knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("t0")}),
			"tasks": knownvalue.ListExact([]knownvalue.Check{knownvalue.ObjectPartial(checks)}), "task_count": knownvalue.Int64Exact(1),
			"not_checkable": knownvalue.Int64Exact(0), "drifted_run": knownvalue.Null(),
		})
	}
	planned := task(map[string]knownvalue.Check{
		"host": knownvalue.StringExact("t0"), "task": knownvalue.StringExact("template the config"),
		"action": knownvalue.StringRegexp(regexp.MustCompile(`template$`)), "ran": knownvalue.Bool(false),
		"diff": knownvalue.StringRegexp(regexp.MustCompile(`(?s)\+word=one\n\+token=` + regexp.QuoteMeta(outputtail.Redacted))),
		"diff_size": knownvalue.Int64Func(func(v int64) error {
			if v <= 0 {
				return fmt.Errorf("diff_size %d, want the diff's length", v)
			}
			return nil
		}),
		"lines_added": knownvalue.Int64Exact(2), "lines_removed": knownvalue.Int64Exact(0),
	})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories, TerraformVersionChecks: writeOnlyVersions,
		Steps: []resource.TestStep{
			{Config: c.groupOnly(group), ConfigVariables: c.vars()},
			{
				Config: c.config(group, planCheckChanges, "one", planCheckDiffsLine), ConfigVariables: c.vars(),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue(runAddr, tfjsonpath.New("planned_changes"), planned),
					noSecretInPlan{c.token, c.key},
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("successful")),
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("planned_changes"), planned),
				},
				Check: resource.ComposeAggregateTestCheckFunc(c.checkFileIs("one"), checkNoSecretInState(c.token),
					e.checkNoRunPods(c.ns), func(*terraform.State) error { return e.noCheckRecords() }),
			},
			{
				// plan_check off: no check, and the change of mode updates the run in place.
				Config: c.config(group, planCheckOff, "one", planCheckDiffsLine), ConfigVariables: c.vars(),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(runAddr, plancheck.ResourceActionUpdate),
				}},
			},
			{
				// No plan_check: the group's default_plan_check ("changes", set in the same apply)
				// checks the replacement that a new word plans, whose diff starts from the file
				// the run wrote.
				Config: withGroupDefault(c.config(group, "", "two", planCheckDiffsLine), planCheckChanges), ConfigVariables: c.vars(),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(runAddr, plancheck.ResourceActionReplace),
					plancheck.ExpectKnownValue(runAddr, tfjsonpath.New("planned_changes").AtMapKey("tasks").AtSliceIndex(0).AtMapKey("diff"),
						knownvalue.StringRegexp(regexp.MustCompile(`(?s)-word=one\n\+word=two\n`))),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(c.checkFileIs("two"), e.checkNoRunPods(c.ns),
					func(*terraform.State) error { return e.noCheckRecords() }),
			},
		},
	})
}

// TestAccRun_planCheckFlows runs the terraform CLI as a user would, with
// plan_check = "drift" and plan_check_diffs, and counts the run pods each command creates: a
// plan checks once, the apply of that plan (saved or not) never again; the
// file edited on the target by hand makes the next plan replace the run,
// with the diff, and exit 2 with -detailed-exitcode; the apply restores
// the file; then no change. A plan with -refresh=false and a destroy check
// nothing. The secret of extra_vars_wo is in no plan, its JSON or the
// Terraform and provider logs at trace level.
func TestAccRun_planCheckFlows(t *testing.T) {
	e := newTestEnv(t)
	c := newCheckTarget(t, e, "kp-checkflow")
	terraformBin, cliConfig, err := providerCLI(t)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	logFile := filepath.Join(t.TempDir(), "terraform.log")
	pods := e.countRunPods(c.ns)
	group := randName("grp")
	write := func(word string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(cliRequiredProviders+c.config(group, planCheckDrift, word, planCheckDiffsLine)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Secrets through the environment, as a CI job passes them: Terraform's
	// log at INFO has its command line.
	secretEnv := []string{"TF_VAR_key=" + c.key, "TF_VAR_token=" + c.token}
	var outputs []string
	// tf runs terraform; it returns the output and the exit code.
	tf := func(args ...string) (string, int) {
		t.Helper()
		start := time.Now()
		cmd := terraformCommand(terraformBin, cliConfig, dir, append([]string{"TF_LOG=trace", "TF_LOG_PATH=" + logFile}, secretEnv...), args...)
		out, err := cmd.CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("terraform %s: %v", args[0], err)
		}
		t.Logf("terraform %s: exit %d in %s", strings.Join(args[:1], " "), code, time.Since(start).Round(time.Millisecond))
		outputs = append(outputs, string(out))
		return string(out), code
	}
	must := func(want int, args ...string) string {
		t.Helper()
		out, code := tf(args...)
		if code != want {
			t.Fatalf("terraform %s: exit %d, want %d:\n%s", strings.Join(args, " "), code, want, out)
		}
		return out
	}
	// cli runs terraform sub non-interactively, without color, with args.
	cli := func(want int, sub string, args ...string) string {
		t.Helper()
		return must(want, append([]string{sub, "-input=false", "-no-color"}, args...)...)
	}
	expectPods := func(want int, after string) {
		t.Helper()
		if got := pods.n(); got != want {
			t.Fatalf("after %s: %d run pods created in all, want %d", after, got, want)
		}
	}
	planJSON := func(file string) string {
		t.Helper()
		return must(0, "show", "-json", file)
	}
	changes := func(doc string) map[string]any {
		t.Helper()
		var p struct {
			ResourceChanges []struct {
				Address string
				Change  struct {
					Actions []string
					After   map[string]any
				}
			} `json:"resource_changes"`
		}
		if err := json.Unmarshal([]byte(doc), &p); err != nil {
			t.Fatal(err)
		}
		for _, rc := range p.ResourceChanges {
			if rc.Address == runAddr {
				pc, _ := rc.Change.After["planned_changes"].(map[string]any)
				if pc == nil {
					t.Fatalf("the plan of %s has no planned_changes: %v", runAddr, rc.Change.After)
				}
				pc["actions"] = strings.Join(rc.Change.Actions, ",")
				return pc
			}
		}
		t.Fatalf("the plan has no change of %s", runAddr)
		return nil
	}
	firstDiff := func(pc map[string]any) string {
		tasks, _ := pc["tasks"].([]any)
		if len(tasks) != 1 {
			t.Fatalf("planned_changes has %d tasks, want 1: %v", len(tasks), pc)
		}
		task, _ := tasks[0].(map[string]any)
		if task["host"] != "t0" || task["task"] != "template the config" {
			t.Fatalf("planned task %v", task)
		}
		d, _ := task["diff"].(string)
		return d
	}

	// 0. The group first: a run is checked once its group exists.
	write("one")
	cli(0, "apply", "-auto-approve", "-target=kubeplay_container_group.g")
	expectPods(0, "the group's apply")
	// 1. plan -out: one check; the plan JSON shows the host, the task and the diff.
	out := cli(0, "plan", "-out=tfplan")
	if !strings.Contains(out, "Warning: Playbook Check: 1 Task Would Change On 1 Host") || !strings.Contains(out, "t0: template the config") {
		t.Fatalf("the plan's output has no check summary:\n%s", out)
	}
	expectPods(1, "plan -out")
	if d := firstDiff(changes(planJSON("tfplan"))); !strings.Contains(d, "+word=one") || !strings.Contains(d, "+token="+outputtail.Redacted) {
		t.Fatalf("planned diff %q", d)
	}
	// 2. apply of the saved plan: the run, no second check.
	cli(0, "apply", "tfplan")
	expectPods(2, "apply tfplan")
	if err := c.checkFileIs("one")(nil); err != nil {
		t.Fatal(err)
	}
	// 3. The next plan checks for drift, finds none, plans nothing.
	cli(0, "plan", "-detailed-exitcode")
	expectPods(3, "the plan after the apply")
	// 4. The file edited by hand: the plan replaces the run, with the diff, and exits 2.
	if _, err := c.exec("printf 'word=edited\\n' >" + checkFile); err != nil {
		t.Fatal(err)
	}
	out = cli(2, "plan", "-detailed-exitcode", "-out=drift.tfplan")
	if !strings.Contains(out, "Hosts Drifted: Run") || !strings.Contains(out, "-word=edited") || !strings.Contains(out, "must be replaced") {
		t.Fatalf("the drift plan's output:\n%s", out)
	}
	expectPods(4, "the drift plan")
	pc := changes(planJSON("drift.tfplan"))
	if d := firstDiff(pc); !strings.Contains(d, "-word=edited") || !strings.Contains(d, "+word=one") || pc["actions"] != "delete,create" || pc["drifted_run"] == nil {
		t.Fatalf("the drift plan's planned_changes %v", pc)
	}
	// 5. apply, not of the saved plan: its own plan checks once, its apply does not.
	cli(0, "apply", "-auto-approve")
	expectPods(6, "apply")
	if err := c.checkFileIs("one")(nil); err != nil {
		t.Fatal(err)
	}
	// 6. No change now.
	cli(0, "plan", "-detailed-exitcode")
	expectPods(7, "the plan after the re-run")
	// 7. -refresh=false: no check, even with the file edited again.
	if _, err := c.exec("printf 'word=again\\n' >" + checkFile); err != nil {
		t.Fatal(err)
	}
	cli(0, "plan", "-detailed-exitcode", "-refresh=false")
	expectPods(7, "plan -refresh=false")
	// 8. destroy: no check.
	cli(0, "destroy", "-auto-approve")
	expectPods(7, "destroy")
	// 9. plan, then apply without a saved plan: the plan checks; the apply's
	// own plan shows that check again (the same configuration, not applied
	// yet), and its apply runs the run; then destroy. The group first again.
	cli(0, "apply", "-auto-approve", "-target=kubeplay_container_group.g")
	out = cli(2, "plan", "-detailed-exitcode")
	if !strings.Contains(out, "Warning: Playbook Check: 1 Task Would Change On 1 Host (t0)") {
		t.Fatalf("the plan's output has no check summary:\n%s", out)
	}
	expectPods(8, "plan")
	out = cli(0, "apply", "-auto-approve")
	// The apply's plan shows the check's result in planned_changes (a create
	// shows the attribute even without one: "(known after apply)").
	if !regexp.MustCompile(`(?s)planned_changes\s+= \{.*"t0".*ansible\.builtin\.template.*\+word=one`).MatchString(out) {
		t.Fatalf("the apply's plan does not show the check:\n%s", out)
	}
	expectPods(9, "apply after plan")
	cli(0, "destroy", "-auto-approve")
	expectPods(9, "destroy")

	if err := e.checkNoRunPods(c.ns)(nil); err != nil {
		t.Fatal(err)
	}
	if err := e.noCheckRecords(); err != nil {
		t.Fatal(err)
	}
	logs, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	plans := planJSON("tfplan") + planJSON("drift.tfplan")
	for what, doc := range map[string]string{"the log": string(logs), "the plans' JSON": plans, "the output": strings.Join(outputs, "")} {
		if i := strings.Index(doc, c.token); i >= 0 {
			t.Errorf("%s holds the secret of extra_vars_wo: ...%s...", what,
				strings.ReplaceAll(doc[max(0, i-300):min(len(doc), i+len(c.token)+100)], c.token, "<SECRET>"))
		}
	}
	if !strings.Contains(string(logs), "plan-time check") {
		t.Error("the trace log does not show the checks")
	}
}

// TestAccRun_planCheckNoCapacity: a check that cannot get its group's
// capacity within timeouts.plan is a warning; the plan succeeds, with
// planned_changes unknown, and leaves no pod, claim or record behind.
func TestAccRun_planCheckNoCapacity(t *testing.T) {
	e := newTestEnv(t)
	c := newCheckTarget(t, e, "kp-checkfull")
	terraformBin, cliConfig, err := providerCLI(t)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	group := randName("grp")
	cfg := strings.Replace(c.config(group, planCheckChanges, "one", "  timeouts {\n    plan = \"15s\"\n  }\n"),
		"  image     =", "  max_concurrent_runs = 1\n  image     =", 1)
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(cliRequiredProviders+cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"TF_VAR_key=" + c.key, "TF_VAR_token=" + c.token}
	run := func(args ...string) (string, error) {
		out, err := terraformCommand(terraformBin, cliConfig, dir, env, args...).CombinedOutput()
		return string(out), err
	}
	if out, err := run("apply", "-input=false", "-no-color", "-auto-approve", "-target=kubeplay_container_group.g"); err != nil {
		t.Fatalf("applying the group: %v\n%s", err, out)
	}
	// The group's one pod slot is taken: the SSH target runs in its namespace.
	pods := e.countRunPods(c.ns)
	start := time.Now()
	out, err := run("plan", "-input=false", "-no-color")
	if err != nil {
		t.Fatalf("the plan failed: %v\n%s", err, out)
	}
	t.Logf("plan with a full group: %s\n%s", time.Since(start).Round(time.Millisecond), out[strings.Index(out, "Plan:"):])
	if !strings.Contains(out, "Warning: Playbook Check Not Run") || !strings.Contains(out, "planned_changes") {
		t.Fatalf("the plan's output has no warning:\n%s", out)
	}
	if n := pods.n(); n != 0 {
		t.Errorf("%d run pods created", n)
	}
	if err := e.checkNoRunPods(c.ns)(nil); err != nil {
		t.Error(err)
	}
	if err := e.noCheckRecords(); err != nil {
		t.Error(err)
	}
	ledger, err := e.kube.CoreV1().ConfigMaps(c.ns).Get(context.Background(), "kubeplay-runs-"+group, metav1.GetOptions{})
	if err == nil && len(ledger.Data) > 0 {
		t.Errorf("claims left in the runs ledger: %v", ledger.Data)
	}
	if out, err := run("destroy", "-input=false", "-no-color", "-auto-approve"); err != nil {
		t.Fatalf("destroy: %v\n%s", err, out)
	}
}

// TestAccRun_planCheckProject: a check of a run from a project directory,
// with a vaulted variable (vault_password_wo), tags and limit, sees what the
// run would do: the tagged task on the limited host, with the vaulted value
// decrypted (shown with plan_check_diffs), and not the other tasks.
func TestAccRun_planCheckProject(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-checkproj")
	group := randName("grp")
	vaultPW := "vault-pw-" + randName("v")
	dir := filepath.Join(t.TempDir(), "project")
	if err := os.MkdirAll(filepath.Join(dir, "group_vars"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"site.yml": "- hosts: all\n  gather_facts: false\n  tasks:\n" +
			"    - name: tagged config\n      ansible.builtin.copy: {dest: /tmp/proof, content: \"{{ word }} {{ inventory_hostname }}\\n\"}\n      tags: [cfg]\n" +
			"    - name: untagged config\n      ansible.builtin.copy: {dest: /tmp/other, content: \"x\\n\"}\n",
		"inventory.ini":      "one ansible_connection=local ansible_python_interpreter=/usr/bin/python3\ntwo ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n",
		"group_vars/all.yml": "word: !vault |\n" + indent(acctest.VaultEncrypt(t, "vaulted-word-5e1f", vaultPW, ""), 2),
	}
	for p, c := range files {
		if err := os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := e.runGroup(group, ns) + `
variable "vault_pw" {
  type      = string
  sensitive = true
  ephemeral = true
}

resource "kubeplay_run" "test" {
  container_group   = kubeplay_container_group.g.name
  project_dir       = ` + fmt.Sprintf("%q", dir) + `
  playbook_path     = "site.yml"
  inventories       = ["inventory.ini"]
  vault_password_wo = var.vault_pw
  tags              = ["cfg"]
  limit             = ["two"]
  plan_check        = "changes"
  plan_check_diffs  = true
}
`
	vars := config.Variables{"vault_pw": config.StringVariable(vaultPW)}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories, TerraformVersionChecks: writeOnlyVersions,
		Steps: []resource.TestStep{
			{Config: e.runGroup(group, ns) + "variable \"vault_pw\" {\n  type = string\n  ephemeral = true\n}\n", ConfigVariables: vars},
			{
				Config: cfg, ConfigVariables: vars,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue(runAddr, tfjsonpath.New("planned_changes"), knownvalue.ObjectPartial(map[string]knownvalue.Check{
						"hosts": knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("two")}),
						"tasks": knownvalue.ListExact([]knownvalue.Check{knownvalue.ObjectPartial(map[string]knownvalue.Check{
							"host": knownvalue.StringExact("two"), "task": knownvalue.StringExact("tagged config"),
							"diff": knownvalue.StringRegexp(regexp.MustCompile(`\+vaulted-word-5e1f two`)),
						})}),
						"task_count": knownvalue.Int64Exact(1),
					})),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("successful")),
				},
				Check: resource.ComposeAggregateTestCheckFunc(e.checkNoRunPods(ns), func(*terraform.State) error { return e.noCheckRecords() }),
			},
		},
	})
}
