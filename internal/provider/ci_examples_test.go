// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/rego"
	"go.yaml.in/yaml/v3"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
)

// ciCommands are the commands of examples/ci's GitHub Actions workflow and
// GitLab CI pipeline, each once: TestCIExamples checks that the files run
// these and no others, and TestAccRun_planCheckCI runs each of them, as
// they are, against a real plan.
var ciCommands = map[string]string{
	"init":            `terraform init -input=false`,
	"init-no-backend": `terraform init -input=false -backend=false`,
	"validate":        `terraform validate -no-color`,
	"plan":            `terraform plan -input=false -no-color -out=tfplan`,
	"show":            `terraform show -json tfplan > plan.json`,
	"comment":         `jq -r -f ci/plan-comment.jq plan.json > comment.md`,
	"policy-comment":  `opa eval --format raw -d ci/policy -i plan.json data.kubeplay.markdown >> comment.md`,
	"github-comment": `jq -Rs '{body: .}' comment.md | curl -fsS -X POST -H "Authorization: Bearer $GITHUB_TOKEN" ` +
		`-H "Accept: application/vnd.github+json" --data-binary @- "$GITHUB_API_URL/repos/$GITHUB_REPOSITORY/issues/$PR_NUMBER/comments"`,
	"gitlab-note": `curl -fsS -X POST -H "PRIVATE-TOKEN: $KUBEPLAY_NOTE_TOKEN" --data-urlencode "body@comment.md" ` +
		`"$CI_API_V4_URL/projects/$CI_PROJECT_ID/merge_requests/$CI_MERGE_REQUEST_IID/notes"`,
	"deny":            `opa eval --fail-defined --format pretty -d ci/policy -i plan.json 'data.kubeplay.deny[_]'`,
	"github-approval": `echo "approval=$(opa eval --format raw -d ci/policy -i plan.json 'count(data.kubeplay.approval) > 0')" >> "$GITHUB_OUTPUT"`,
	"gitlab-approval": `echo "approval=$(opa eval --format raw -d ci/policy -i plan.json 'count(data.kubeplay.approval) > 0')" >> policy.env`,
	"gitlab-gate":     `test "$approval" = false || (echo "the policy asks for an approval (see plan:main), so apply:approved applies this plan" >&2; exit 1)`,
	"apply":           `terraform apply -input=false -no-color tfplan`,
}

// ciDir is examples/ci, which a repository copies to ci/.
func ciDir(t testing.TB) string {
	t.Helper()
	root, err := acctest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "examples", "ci")
}

// ciYAML reads a YAML file of examples/ci as GitHub and GitLab read it
// (YAML 1.2: `on` is a string).
func ciYAML(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ciDir(t), name))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return doc
}

// scriptLines are the commands of a run: or script: entry, one a line.
func scriptLines(s string) []string {
	var cmds []string
	for line := range strings.SplitSeq(s, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			cmds = append(cmds, line)
		}
	}
	return cmds
}

// TestCIExamples: examples/ci's GitHub Actions workflow and GitLab CI
// pipeline parse, have the structure each platform needs, keep the
// untrusted pull requests' jobs without secrets and with checks off, and run
// exactly the commands of ciCommands, which TestAccRun_planCheckCI runs.
func TestCIExamples(t *testing.T) {
	used := map[string][]string{} // command: the jobs that run it

	gh := ciYAML(t, "github-actions.yml")
	for _, key := range []string{"name", "on", "permissions", "jobs"} {
		if gh[key] == nil {
			t.Errorf("github-actions.yml: no %q", key)
		}
	}
	jobs, _ := gh["jobs"].(map[string]any)
	if len(jobs) == 0 {
		t.Fatal("github-actions.yml: no jobs")
	}
	for name, j := range jobs {
		job, _ := j.(map[string]any)
		where := "github-actions.yml: job " + name
		if s, _ := job["runs-on"].(string); s == "" {
			t.Errorf("%s: no runs-on", where)
		}
		steps, _ := job["steps"].([]any)
		if len(steps) == 0 {
			t.Errorf("%s: no steps", where)
		}
		for i, s := range steps {
			step, _ := s.(map[string]any)
			run, isRun := step["run"].(string)
			uses, isUses := step["uses"].(string)
			if isRun == isUses || (isRun && run == "") || (isUses && !strings.Contains(uses, "@")) {
				t.Errorf("%s, step %d: want either run: commands or uses: an action@version, got %v", where, i, step)
			}
			// Expressions in a script are a script injection; env: passes values.
			if strings.Contains(run, "${{") {
				t.Errorf("%s, step %d: an expression in run: pass it through env:", where, i)
			}
			for _, c := range scriptLines(run) {
				used[c] = append(used[c], where)
			}
		}
		if text := fmt.Sprint(job); strings.Contains(text, "secrets.") && job["environment"] == nil {
			t.Errorf("%s reads secrets outside an environment", where)
		}
	}
	if fork, _ := jobs["fork"].(map[string]any); fork == nil {
		t.Error("github-actions.yml: no fork job")
	} else {
		env, _ := fork["env"].(map[string]any)
		if env["KUBEPLAY_DISABLE_PLAN_CHECKS"] != "1" || strings.Contains(fmt.Sprint(fork), "secrets.") {
			t.Errorf("github-actions.yml: the fork job must set KUBEPLAY_DISABLE_PLAN_CHECKS=1 and read no secret: %v", fork)
		}
	}

	gl := ciYAML(t, "gitlab-ci.yml")
	stages, _ := gl["stages"].([]any)
	if len(stages) == 0 {
		t.Fatal("gitlab-ci.yml: no stages")
	}
	reserved := []string{"default", "include", "stages", "variables", "workflow", "image", "services", "cache", "before_script", "after_script"}
	glJobs := 0
	for name, j := range gl {
		if slices.Contains(reserved, name) || strings.HasPrefix(name, ".") {
			continue
		}
		glJobs++
		where := "gitlab-ci.yml: job " + name
		job, _ := j.(map[string]any)
		if !slices.Contains(stages, job["stage"]) {
			t.Errorf("%s: stage %v is not one of %v", where, job["stage"], stages)
		}
		script, _ := job["script"].([]any)
		if len(script) == 0 {
			t.Errorf("%s: no script", where)
		}
		for _, s := range script {
			line, ok := s.(string)
			if !ok {
				t.Errorf("%s: a script entry that is no string: %v", where, s)
			}
			for _, c := range scriptLines(line) {
				used[c] = append(used[c], where)
			}
		}
		if rules, _ := job["rules"].([]any); len(rules) == 0 {
			t.Errorf("%s: no rules (it would run in every pipeline)", where)
		}
	}
	if glJobs == 0 {
		t.Error("gitlab-ci.yml: no jobs")
	}
	if fork, _ := gl["plan:fork"].(map[string]any); fork == nil {
		t.Error("gitlab-ci.yml: no plan:fork job")
	} else {
		vars, _ := fork["variables"].(map[string]any)
		env, _ := fork["environment"].(map[string]any)
		if vars["KUBEPLAY_DISABLE_PLAN_CHECKS"] != "1" || env["name"] != "staging" {
			t.Errorf("gitlab-ci.yml: plan:fork must plan against staging with KUBEPLAY_DISABLE_PLAN_CHECKS=1: %v", fork)
		}
	}

	known := slices.Collect(maps.Values(ciCommands))
	for _, c := range slices.Sorted(maps.Keys(used)) {
		if !slices.Contains(known, c) {
			t.Errorf("%s runs a command that no test runs (add it to ciCommands, and run it in TestAccRun_planCheckCI):\n%s", used[c][0], c)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(ciCommands)) {
		if used[ciCommands[key]] == nil {
			t.Errorf("ciCommands[%q] is in neither CI file: %s", key, ciCommands[key])
		}
	}
}

// policyVerdict is what examples/ci/policy says of a plan.
type policyVerdict struct {
	Deny     []string `json:"deny"`
	Approval []string `json:"approval"`
	Markdown string   `json:"markdown"`
}

// evalCIPolicy evaluates examples/ci/policy, with its data.json, on a plan's
// JSON (terraform show -json) with the OPA Go library.
func evalCIPolicy(t testing.TB, planJSON []byte) policyVerdict {
	t.Helper()
	var input any
	if err := json.Unmarshal(planJSON, &input); err != nil {
		t.Fatal(err)
	}
	rs, err := rego.New(
		rego.Query(`deny := data.kubeplay.deny; approval := data.kubeplay.approval; markdown := data.kubeplay.markdown`),
		rego.Load([]string{filepath.Join(ciDir(t), "policy")}, nil),
		rego.Input(input),
	).Eval(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 {
		t.Fatalf("the policy gave %d results, want 1: %v", len(rs), rs)
	}
	b, err := json.Marshal(rs[0].Bindings)
	if err != nil {
		t.Fatal(err)
	}
	var v policyVerdict
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	slices.Sort(v.Deny)
	slices.Sort(v.Approval)
	return v
}

// ciRun is a kubeplay_run's change in a plan that ciPlan makes, shaped as
// terraform show -json shows it (TestAccRun_planCheckCI compares the shape
// with a real plan's).
type ciRun struct {
	address, group string
	actions        []string
	hosts          []string
	taskCount      int  // 0: one task per host
	null, unknown  bool // no check, or one that could not run
}

func ciPlan(runs ...ciRun) []byte {
	var changes []any
	for _, r := range runs {
		if r.actions == nil {
			r.actions = []string{"create"}
		}
		after := map[string]any{"container_group": r.group}
		afterUnknown := map[string]any{"id": true}
		switch {
		case r.unknown:
			afterUnknown["planned_changes"] = true
		case r.null:
			after["planned_changes"] = nil
		default:
			tasks := []any{}
			for _, h := range r.hosts {
				tasks = append(tasks, map[string]any{"host": h, "task": "write the proof", "action": "ansible.builtin.copy",
					"diff": nil, "diff_size": 74, "lines_added": 1, "lines_removed": 0, "ran": false})
			}
			hosts := slices.Sorted(slices.Values(r.hosts))
			if hosts == nil {
				hosts = []string{}
			}
			after["planned_changes"] = map[string]any{"hosts": hosts, "tasks": tasks,
				"task_count": max(r.taskCount, len(tasks)), "not_checkable": 0, "drifted_run": nil}
			// Terraform marks each known element of a list false.
			known, empty := []any{}, []any{}
			for range hosts {
				known, empty = append(known, false), append(empty, map[string]any{})
			}
			afterUnknown["planned_changes"] = map[string]any{"hosts": known, "tasks": empty}
		}
		var before any
		if r.actions[0] != "create" {
			before = map[string]any{"container_group": r.group, "planned_changes": nil}
		}
		if slices.Equal(r.actions, []string{"delete"}) {
			after, afterUnknown = nil, map[string]any{}
		}
		changes = append(changes, map[string]any{"address": r.address, "mode": "managed", "type": "kubeplay_run",
			"name": strings.TrimPrefix(r.address, "kubeplay_run."), "provider_name": "registry.terraform.io/kubeplay/kubeplay",
			"change": map[string]any{"actions": r.actions, "before": before, "after": after, "after_unknown": afterUnknown}})
	}
	b, err := json.Marshal(map[string]any{"format_version": "1.2", "resource_changes": changes})
	if err != nil {
		panic(err)
	}
	return b
}

// TestCIPolicy evaluates examples/ci/policy, with its data.json (protected
// hosts vault1 and vault2, and ^db-prod-[0-9]+$; the protected group
// production-db; 5 hosts at most without an approval), on plans that
// ciPlan makes.
func TestCIPolicy(t *testing.T) {
	hosts := func(n int) []string {
		var hs []string
		for i := range n {
			hs = append(hs, fmt.Sprintf("h%d", i+1))
		}
		return hs
	}
	for _, tc := range []struct {
		name           string
		runs           []ciRun
		deny, approval []string
	}{
		{name: "no runs"},
		{name: "harmless", runs: []ciRun{{address: "kubeplay_run.web", group: "ops", hosts: hosts(2)}}},
		{name: "protected host", runs: []ciRun{{address: "kubeplay_run.web", group: "ops", hosts: []string{"h1", "vault2"}}},
			deny: []string{"kubeplay_run.web would change the protected host vault2"}},
		{name: "protected pattern", runs: []ciRun{{address: "kubeplay_run.db", group: "ops", hosts: []string{"db-prod-12", "db-prod-x"}}},
			deny: []string{"kubeplay_run.db would change the protected host db-prod-12"}},
		{name: "protected group changes a host", runs: []ciRun{{address: "kubeplay_run.db", group: "production-db", hosts: []string{"db1"}, actions: []string{"delete", "create"}}},
			deny: []string{"kubeplay_run.db, of the protected group production-db, would change db1"}},
		{name: "protected group changes nothing", runs: []ciRun{{address: "kubeplay_run.db", group: "production-db"}}},
		{name: "protected group not checked", runs: []ciRun{{address: "kubeplay_run.db", group: "production-db", null: true}},
			approval: []string{"kubeplay_run.db, of the protected group production-db, was not checked (create)"}},
		{name: "protected group run deleted", runs: []ciRun{{address: "kubeplay_run.db", group: "production-db", actions: []string{"delete"}}},
			approval: []string{"kubeplay_run.db, of the protected group production-db, was not checked (delete)"}},
		{name: "unchanged run", runs: []ciRun{{address: "kubeplay_run.db", group: "production-db", null: true, actions: []string{"no-op"}}}},
		{name: "5 hosts", runs: []ciRun{{address: "kubeplay_run.a", group: "ops", hosts: hosts(5)}, {address: "kubeplay_run.b", group: "ops", hosts: hosts(5)}}},
		{name: "6 hosts in two runs", runs: []ciRun{{address: "kubeplay_run.a", group: "ops", hosts: hosts(3)}, {address: "kubeplay_run.b", group: "ops", hosts: []string{"h4", "h5", "h6"}}},
			approval: []string{"6 hosts would change, more than 5: h1, h2, h3, h4, h5, h6"}},
		{name: "check not run", runs: []ciRun{{address: "kubeplay_run.web", group: "ops", unknown: true}},
			approval: []string{"kubeplay_run.web: its check could not run, so the plan does not show what it would change"}},
		{name: "checks off", runs: []ciRun{{address: "kubeplay_run.web", group: "ops", null: true}}},
		{name: "tasks past the first 100", runs: []ciRun{{address: "kubeplay_run.web", group: "ops", hosts: hosts(1), taskCount: 140}},
			approval: []string{"kubeplay_run.web would change 140 tasks; the plan lists the first 1, so it may change hosts it does not name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := evalCIPolicy(t, ciPlan(tc.runs...))
			if !slices.Equal(v.Deny, tc.deny) || !slices.Equal(v.Approval, tc.approval) {
				t.Errorf("deny %q, approval %q;\nwant deny %q, approval %q", v.Deny, v.Approval, tc.deny, tc.approval)
			}
			if len(tc.deny)+len(tc.approval) == 0 && !strings.Contains(v.Markdown, "No objection") {
				t.Errorf("markdown %q", v.Markdown)
			}
			for _, m := range tc.deny {
				if !strings.Contains(v.Markdown, "- **Denied**: "+m) {
					t.Errorf("markdown %q does not list %q", v.Markdown, m)
				}
			}
		})
	}
}

// TestCIPlanComment renders a plan that ciPlan makes, with a diff and a
// table cell to escape, with examples/ci/plan-comment.jq.
func TestCIPlanComment(t *testing.T) {
	jq, err := exec.LookPath("jq")
	if err != nil {
		t.Skip("no jq")
	}
	plan := strings.Replace(string(ciPlan(
		ciRun{address: "kubeplay_run.web", group: "ops", hosts: []string{"h2", "h1"}},
		ciRun{address: "kubeplay_run.off", group: "ops", null: true},
		ciRun{address: "kubeplay_run.gone", group: "ops", unknown: true, actions: []string{"delete", "create"}},
		ciRun{address: "kubeplay_run.same", group: "ops", null: true, actions: []string{"no-op"}},
	)), `"diff":null`, `"diff":"+secret-diff-text"`, 1)
	plan = strings.Replace(plan, `"task":"write the proof"`, `"task":"write | proof"`, 1)
	cmd := exec.Command(jq, "-r", "-f", filepath.Join(ciDir(t), "plan-comment.jq"))
	cmd.Stdin = strings.NewReader(plan)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	got := string(out)
	for _, want := range []string{
		"2 hosts would change (3 runs in this plan).",
		"### `kubeplay_run.web` (create): 2 tasks would change, on 2 hosts\n\nHosts: `h1`, `h2`\n",
		"| h2 | write \\| proof | `ansible.builtin.copy` | +1 -0 | 74 |\n| h1 | write the proof |",
		"### `kubeplay_run.off` (create): not checked (`plan_check` off, or checks disabled)",
		"### `kubeplay_run.gone` (delete, create): **not checked**: the check could not run",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the comment has no %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "secret-diff-text") || strings.Contains(got, "kubeplay_run.same") {
		t.Errorf("the comment shows a diff or an unchanged run:\n%s", got)
	}
}

// envOPAStandIn makes the test binary the opa of the CI commands
// (TestMain): TestAccRun_planCheckCI puts a script named opa on their PATH
// that runs it.
const envOPAStandIn = "KUBEPLAY_TEST_OPA_STAND_IN"

// opaStandIn is `opa eval` with the flags ciCommands use (--fail-defined,
// --format raw or pretty, -d, -i, a query), evaluated with the OPA Go
// library that the opa CLI is built on; it refuses any other flag. It
// returns the exit code: 1 for a defined result with --fail-defined, 2 for
// an error, as opa does.
func opaStandIn(args []string, stdout, stderr io.Writer) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "opa (the tests' stand-in): "+format+"\n", a...)
		return 2
	}
	if len(args) == 0 || args[0] != "eval" {
		return fail("only eval, not %q", args)
	}
	var (
		failDefined          bool
		format, input, query string
		data                 []string
	)
	for i := 1; i < len(args); i++ {
		switch a := args[i]; a {
		case "--fail-defined":
			failDefined = true
		case "--format", "-d", "-i":
			if i++; i == len(args) {
				return fail("%s needs a value", a)
			}
			switch a {
			case "--format":
				format = args[i]
			case "-d":
				data = append(data, args[i])
			default:
				input = args[i]
			}
		default:
			if strings.HasPrefix(a, "-") || query != "" {
				return fail("unknown argument %q", a)
			}
			query = a
		}
	}
	if format != "raw" && format != "pretty" {
		return fail("--format raw or pretty, not %q", format)
	}
	opts := []func(*rego.Rego){rego.Query(query), rego.Load(data, nil)}
	if input != "" {
		b, err := os.ReadFile(input)
		if err != nil {
			return fail("%v", err)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			return fail("%s: %v", input, err)
		}
		opts = append(opts, rego.Input(v))
	}
	rs, err := rego.New(opts...).Eval(context.Background())
	if err != nil {
		return fail("%v", err)
	}
	var out bytes.Buffer
	for _, r := range rs {
		for _, e := range r.Expressions {
			if s, ok := e.Value.(string); ok && format == "raw" {
				out.WriteString(s + "\n")
				continue
			}
			b, err := json.MarshalIndent(e.Value, "", "  ")
			if err != nil {
				return fail("%v", err)
			}
			out.Write(append(b, '\n'))
		}
	}
	if _, err := stdout.Write(out.Bytes()); err != nil {
		return 2
	}
	if failDefined && len(rs) > 0 {
		return 1
	}
	return 0
}
