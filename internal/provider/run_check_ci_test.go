// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// ciRepo is a repository that uses examples/ci: its Terraform configuration
// and a copy of examples/ci as ci/, where ciShell runs ciCommands.
type ciRepo struct {
	name, dir string
}

// ciShell runs ciCommands as a CI job does, with sh, in a ciRepo, with the
// terraform CLI, jq, curl and the opa stand-in on PATH, and counts the
// commands it ran.
type ciShell struct {
	t   *testing.T
	env []string
	mu  sync.Mutex
	ran map[string]bool
}

// run runs the command ciCommands[key] in repo with env added; it returns
// the output and the exit code.
func (s *ciShell) run(repo ciRepo, key string, env ...string) (string, int, error) {
	command, ok := ciCommands[key]
	if !ok {
		return "", 0, fmt.Errorf("no CI command %q", key)
	}
	cmd := exec.Command("sh", "-c", command)
	cmd.Dir = repo.dir
	cmd.Env = append(append(os.Environ(), s.env...), env...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code, err = ee.ExitCode(), nil
	}
	s.t.Logf("%s: %s: exit %d in %s", repo.name, command, code, time.Since(start).Round(time.Millisecond))
	s.mu.Lock()
	s.ran[key] = true
	s.mu.Unlock()
	return string(out), code, err
}

// must runs a command that must exit with want.
func (s *ciShell) must(repo ciRepo, key string, want int, env ...string) string {
	s.t.Helper()
	out, code, err := s.run(repo, key, env...)
	if err != nil || code != want {
		s.t.Fatalf("%s: %s: exit %d (%v), want %d:\n%s", repo.name, ciCommands[key], code, err, want, out)
	}
	return out
}

// flow runs commands that must succeed, for a goroutine: the first failure
// is returned.
func (s *ciShell) flow(repo ciRepo, keys ...string) error {
	for _, key := range keys {
		out, code, err := s.run(repo, key)
		if err != nil || code != 0 {
			return fmt.Errorf("%s: %s: exit %d (%v):\n%s", repo.name, ciCommands[key], code, err, out)
		}
	}
	return nil
}

// TestAccRun_planCheckCI runs the commands of examples/ci's GitHub Actions
// workflow and GitLab CI pipeline (every one of ciCommands) as their jobs
// do, with the terraform CLI and the provider built from this tree, against
// real plans whose runs check a copy task on local hosts in the pod:
//   - a harmless plan (2 hosts): the comment shows hosts, tasks and sizes,
//     never the diff, with the policy's "no objection"; it is posted to a
//     stand-in of the GitHub and GitLab APIs; the policy allows it, asks for
//     no approval, and the saved plan is applied;
//   - a plan that changes a protected host (db-prod-1): the policy denies it;
//   - a plan that changes 6 hosts: the policy asks for an approval, and the
//     GitLab gate stops its apply;
//   - a fork's pull request: checks off (KUBEPLAY_DISABLE_PLAN_CHECKS=1), it
//     validates, and plans with planned_changes null.
//
// The policy is evaluated with the OPA Go library, directly and through
// the opa commands of the CI files (a stand-in of opa eval: opaStandIn). The
// real plan's shape is also compared with ciPlan's, which TestCIPolicy uses.
func TestAccRun_planCheckCI(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-checkci")
	group := randName("grp")
	terraformBin, _, err := providerCLI(t)
	if err != nil {
		t.Fatal(err)
	}
	// terraform init installs the build from a filesystem mirror, as a CI
	// job installs the provider from the registry.
	cliConfig := mirrorCLIConfig(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.Symlink(terraformBin, filepath.Join(bin, "terraform")); err != nil {
		t.Fatal(err)
	}
	opa := fmt.Sprintf("#!/bin/sh\n%s=1 exec '%s' \"$@\"\n", envOPAStandIn, self)
	if err := os.WriteFile(filepath.Join(bin, "opa"), []byte(opa), 0o700); err != nil {
		t.Fatal(err)
	}

	// The GitHub and GitLab APIs that the comment commands post to.
	var (
		postsMu sync.Mutex
		posts   = map[string]*http.Request{}
		bodies  = map[string]string{}
	)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		postsMu.Lock()
		posts[r.Method+" "+r.URL.Path], bodies[r.Method+" "+r.URL.Path] = r, string(b)
		postsMu.Unlock()
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte("{}\n"))
	}))
	defer api.Close()

	sh := &ciShell{t: t, ran: map[string]bool{}, env: []string{
		"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"TF_CLI_CONFIG_FILE=" + cliConfig, "TF_IN_AUTOMATION=1", "TF_LOG=", "CHECKPOINT_DISABLE=1",
		// The jobs' credentials come from the environment (KUBE_HOST and
		// KUBE_TOKEN in the examples); here, the test kubeconfig.
		"KUBE_CONFIG_PATH=" + e.kubeconfig, "KUBEPLAY_DISABLE_PLAN_CHECKS=",
		"GITHUB_API_URL=" + api.URL, "GITHUB_REPOSITORY=example/infra", "GITHUB_TOKEN=gh-token", "PR_NUMBER=42",
		"CI_API_V4_URL=" + api.URL + "/api/v4", "CI_PROJECT_ID=7", "CI_MERGE_REQUEST_IID=42", "KUBEPLAY_NOTE_TOKEN=gl-token",
	}}

	// The group, from a workspace of its own: a run is checked once its
	// group exists.
	groupDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(groupDir, "main.tf"), []byte(cliRequiredProviders+e.runGroup(group, ns)), 0o600); err != nil {
		t.Fatal(err)
	}
	tf := func(dir string, args ...string) {
		t.Helper()
		env := []string{"KUBE_CONFIG_PATH=" + e.kubeconfig}
		if out, err := terraformCommand(terraformBin, cliConfig, dir, env, args...).CombinedOutput(); err != nil {
			t.Fatalf("terraform %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	tf(groupDir, "init", "-input=false", "-no-color")
	tf(groupDir, "apply", "-input=false", "-no-color", "-auto-approve")
	defer tf(groupDir, "destroy", "-input=false", "-no-color", "-auto-approve")

	// proof is in the files the runs write: the plan's diffs show it, the
	// comment must not.
	proof := "ci-proof-" + randName("x")
	repo := func(name string, hosts ...string) ciRepo {
		t.Helper()
		dir := filepath.Join(t.TempDir(), name)
		if err := os.CopyFS(filepath.Join(dir, "ci"), os.DirFS(ciDir(t))); err != nil {
			t.Fatal(err)
		}
		inventory := ""
		for _, h := range hosts {
			inventory += h + " ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n"
		}
		playbook := "- hosts: all\n  gather_facts: false\n  tasks:\n    - name: write the proof\n" +
			"      ansible.builtin.copy: {dest: \"/tmp/proof-{{ inventory_hostname }}\", content: \"" + proof + "\\n\"}\n"
		cfg := cliRequiredProviders + fmt.Sprintf(`provider "kubeplay" {
  catalog_namespace = %q
}

resource "kubeplay_run" "site" {
  container_group  = %q
  playbook         = %q
  inventory        = %q
  plan_check       = "changes"
  plan_check_diffs = true
}
`, e.catalog, group, playbook, inventory)
		if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return ciRepo{name: name, dir: dir}
	}
	harmless, protected, many, fork := repo("harmless", "h1", "h2"), repo("protected", "h1", "db-prod-1"),
		repo("many", "h1", "h2", "h3", "h4", "h5", "h6"), repo("fork", "h1", "h2")

	// The plans, at once: each checks in a pod of the group.
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i, r := range []ciRepo{harmless, protected, many} {
		wg.Go(func() { errs[i] = sh.flow(r, "init", "plan", "show") })
	}
	// A fork's pull request: the GitHub job validates, the GitLab one plans
	// against staging; no check.
	wg.Go(func() {
		off := "KUBEPLAY_DISABLE_PLAN_CHECKS=1"
		for _, key := range []string{"init-no-backend", "validate", "init", "plan", "show", "comment"} {
			if out, code, err := sh.run(fork, key, off); err != nil || code != 0 {
				errs[3] = fmt.Errorf("fork: %s: exit %d (%v):\n%s", ciCommands[key], code, err, out)
				return
			}
		}
	})
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	t.Logf("the four plans: %s", time.Since(start).Round(time.Millisecond))

	planOf := func(r ciRepo) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(r.dir, "plan.json"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	read := func(r ciRepo, name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(r.dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	// The real plans' kubeplay_run changes have the shape of ciPlan's.
	if got, want := planShape(t, planOf(harmless)), planShape(t, ciPlan(ciRun{address: "kubeplay_run.site", group: group, hosts: []string{"h1"}})); !reflect.DeepEqual(got, want) {
		t.Errorf("the plan's shape differs from ciPlan's (TestCIPolicy's plans):\n got %v\nwant %v", got, want)
	}
	if !strings.Contains(string(planOf(harmless)), proof) {
		t.Fatal("the harmless plan's JSON has no diff with the proof: plan_check_diffs did not apply")
	}

	// The harmless plan: the comment, the policy, the apply.
	sh.must(harmless, "comment", 0)
	sh.must(harmless, "policy-comment", 0)
	comment := read(harmless, "comment.md")
	for _, want := range []string{
		"1 run in this plan",
		"### `kubeplay_run.site` (create): 2 tasks would change, on 2 hosts\n\nHosts: `h1`, `h2`\n",
		"| h1 | write the proof | `ansible.builtin.copy` | +1 -0 |",
		"| h2 | write the proof | `ansible.builtin.copy` | +1 -0 |",
		"### Policy\n\nNo objection",
	} {
		if !strings.Contains(comment, want) {
			t.Errorf("the comment has no %q:\n%s", want, comment)
		}
	}
	if strings.Contains(comment, proof) {
		t.Errorf("the comment shows a diff:\n%s", comment)
	}
	sh.must(harmless, "github-comment", 0)
	sh.must(harmless, "gitlab-note", 0)
	postsMu.Lock()
	ghKey, glKey := "POST /repos/example/infra/issues/42/comments", "POST /api/v4/projects/7/merge_requests/42/notes"
	var ghBody struct{ Body string }
	if r := posts[ghKey]; r == nil || r.Header.Get("Authorization") != "Bearer gh-token" ||
		json.Unmarshal([]byte(bodies[ghKey]), &ghBody) != nil || ghBody.Body != comment {
		t.Errorf("the GitHub comment: %v %q", r, bodies[ghKey])
	}
	note, _ := url.ParseQuery(bodies[glKey])
	if r := posts[glKey]; r == nil || r.Header.Get("PRIVATE-TOKEN") != "gl-token" || note.Get("body") != comment {
		t.Errorf("the GitLab note: %v %q", r, bodies[glKey])
	}
	postsMu.Unlock()
	if v := evalCIPolicy(t, planOf(harmless)); len(v.Deny)+len(v.Approval) != 0 {
		t.Errorf("the harmless plan: deny %q, approval %q", v.Deny, v.Approval)
	}
	sh.must(harmless, "deny", 0)
	githubOutput := filepath.Join(t.TempDir(), "github_output")
	sh.must(harmless, "github-approval", 0, "GITHUB_OUTPUT="+githubOutput)
	sh.must(harmless, "gitlab-approval", 0)
	if got, gl := read(ciRepo{dir: filepath.Dir(githubOutput)}, "github_output"), read(harmless, "policy.env"); got != "approval=false\n" || gl != got {
		t.Errorf("the harmless plan's approval: GitHub %q, GitLab %q, want approval=false", got, gl)
	}
	sh.must(harmless, "gitlab-gate", 0, "approval=false")
	sh.must(harmless, "apply", 0)
	defer tf(harmless.dir, "destroy", "-input=false", "-no-color", "-auto-approve")

	// A protected host.
	if v := evalCIPolicy(t, planOf(protected)); !slices.Equal(v.Deny, []string{"kubeplay_run.site would change the protected host db-prod-1"}) || len(v.Approval) != 0 {
		t.Errorf("the protected host's plan: deny %q, approval %q", v.Deny, v.Approval)
	}
	if out := sh.must(protected, "deny", 1); !strings.Contains(out, "kubeplay_run.site would change the protected host db-prod-1") {
		t.Errorf("the policy's output: %s", out)
	}

	// More than 5 hosts.
	wantApproval := []string{"6 hosts would change, more than 5: h1, h2, h3, h4, h5, h6"}
	if v := evalCIPolicy(t, planOf(many)); len(v.Deny) != 0 || !slices.Equal(v.Approval, wantApproval) {
		t.Errorf("the plan of 6 hosts: deny %q, approval %q", v.Deny, v.Approval)
	}
	sh.must(many, "deny", 0)
	githubOutput = filepath.Join(t.TempDir(), "github_output")
	sh.must(many, "github-approval", 0, "GITHUB_OUTPUT="+githubOutput)
	sh.must(many, "gitlab-approval", 0)
	if got := read(ciRepo{dir: filepath.Dir(githubOutput)}, "github_output"); got != "approval=true\n" || read(many, "policy.env") != got {
		t.Errorf("the plan of 6 hosts: approval %q, want approval=true", got)
	}
	if out := sh.must(many, "gitlab-gate", 1, "approval=true"); !strings.Contains(out, "asks for an approval") {
		t.Errorf("the gate's output: %s", out)
	}

	// The fork: no check.
	var forkPlan struct {
		ResourceChanges []struct {
			Change struct {
				After map[string]json.RawMessage `json:"after"`
			} `json:"change"`
		} `json:"resource_changes"`
	}
	if err := json.Unmarshal(planOf(fork), &forkPlan); err != nil || len(forkPlan.ResourceChanges) != 1 ||
		string(forkPlan.ResourceChanges[0].Change.After["planned_changes"]) != "null" {
		t.Errorf("the fork's plan: %v, want planned_changes null", forkPlan)
	}
	if c := read(fork, "comment.md"); !strings.Contains(c, "not checked (`plan_check` off, or checks disabled)") {
		t.Errorf("the fork's comment:\n%s", c)
	}

	for _, key := range slices.Sorted(maps.Keys(ciCommands)) {
		if !sh.ran[key] {
			t.Errorf("ciCommands[%q] was not run: %s", key, ciCommands[key])
		}
	}
	if err := e.checkNoRunPods(ns)(nil); err != nil {
		t.Error(err)
	}
}

// planShape is the shape of a plan's kubeplay_run changes, as the policy
// and plan-comment.jq read them: each JSON path under resource_changes[] with
// the type of its value (lists as [], keys of after but planned_changes
// left out).
func planShape(t *testing.T, planJSON []byte) []string {
	t.Helper()
	var plan struct {
		ResourceChanges []map[string]any `json:"resource_changes"`
	}
	if err := json.Unmarshal(planJSON, &plan); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				walk(path+"."+k, x)
			}
		case []any:
			for _, x := range v {
				walk(path+"[]", x)
			}
		default:
			typ := fmt.Sprintf("%T", v)
			if strings.HasSuffix(path, ".diff") || strings.HasSuffix(path, ".drifted_run") {
				typ = "string or null" // a diff with plan_check_diffs, a drifted run's id
			}
			seen[path+": "+typ] = true
		}
	}
	for _, rc := range plan.ResourceChanges {
		if rc["type"] != "kubeplay_run" {
			continue
		}
		change, _ := rc["change"].(map[string]any)
		after, _ := change["after"].(map[string]any)
		for _, k := range []string{"address", "type"} {
			walk(k, rc[k])
		}
		walk("change.actions", change["actions"])
		walk("change.after.planned_changes", after["planned_changes"])
		walk("change.after.container_group", after["container_group"])
		unknown, _ := change["after_unknown"].(map[string]any)
		walk("change.after_unknown.planned_changes", unknown["planned_changes"])
	}
	return slices.Sorted(maps.Keys(seen))
}
