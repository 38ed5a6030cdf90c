// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	fwresource "github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/tfinvocation"
)

// TestCanonicalConfig: the record's key does not depend on the order
// Terraform sends a map's or a set's elements in, and tells values apart.
func TestCanonicalConfig(t *testing.T) {
	mapT := tftypes.Map{ElementType: tftypes.String}
	setT := tftypes.Set{ElementType: tftypes.String}
	objT := tftypes.Object{AttributeTypes: map[string]tftypes.Type{"m": mapT, "s": setT, "n": tftypes.Number, "b": tftypes.Bool, "x": tftypes.String}}
	obj := func(a, b string, n float64) tftypes.Value {
		return tftypes.NewValue(objT, map[string]tftypes.Value{
			"m": tftypes.NewValue(mapT, map[string]tftypes.Value{a: tftypes.NewValue(tftypes.String, "1"), b: tftypes.NewValue(tftypes.String, "2")}),
			"s": tftypes.NewValue(setT, []tftypes.Value{tftypes.NewValue(tftypes.String, a), tftypes.NewValue(tftypes.String, b)}),
			"n": tftypes.NewValue(tftypes.Number, n), "b": tftypes.NewValue(tftypes.Bool, true),
			"x": tftypes.NewValue(tftypes.String, nil),
		})
	}
	enc := func(v tftypes.Value) string {
		c, err := canonical(v)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(c)
		return string(b)
	}
	first := enc(obj("a", "b", 3))
	for range 20 {
		if got := enc(obj("a", "b", 3)); got != first {
			t.Fatalf("canonical form changed: %s, then %s", first, got)
		}
	}
	if enc(obj("b", "a", 3)) == first || enc(obj("a", "b", 4)) == first {
		t.Fatal("different configurations share a canonical form")
	}
	if _, err := canonical(tftypes.NewValue(tftypes.String, tftypes.UnknownValue)); err == nil {
		t.Fatal("an unknown value has a canonical form")
	}
}

// TestCheckSummary: with plan_check_diffs, the plan's warning names the
// hosts and tasks, quotes the start of each diff and says where a diff was
// cut and how many tasks were not checkable.
func TestCheckSummary(t *testing.T) {
	long := strings.Repeat("+line\n", 30)
	res := checkResult{TaskCount: 3, NotCheckable: 2, Diffs: true, Tasks: []bundle.Change{
		{Host: "web2", Task: "template the config", Action: "template", Diff: "-a\n+b\n"},
		{Host: "web1", Task: "big file", Action: "copy", Diff: long, DiffSize: 90000},
		{Host: "web1", Task: "gather", Action: "command", Ran: true},
	}}
	var d diag.Diagnostics
	summarizeCheck(res, &d)
	if len(d) != 1 || d[0].Severity() != diag.SeverityWarning {
		t.Fatalf("diagnostics %v", d)
	}
	if got := d[0].Summary(); got != "Playbook Check: 3 Tasks Would Change On 2 Hosts (web1, web2)" {
		t.Errorf("summary %q", got)
	}
	for _, want := range []string{"web2: template the config (template)\n    -a\n    +b\n", "... 10 more lines in planned_changes",
		"[diff cut at 8192 of its 90000 characters]", "web1: gather (command) [check_mode: false, ran for real]", "2 tasks skipped as not checkable"} {
		if !strings.Contains(d[0].Detail(), want) {
			t.Errorf("detail lacks %q:\n%s", want, d[0].Detail())
		}
	}
	if hs := res.hosts(); strings.Join(hs, ",") != "web1,web2" {
		t.Errorf("hosts %v", hs)
	}
	v := res.value()
	if v.IsNull() || v.IsUnknown() || len(v.Attributes()) != len(plannedChangesType.AttrTypes) {
		t.Errorf("value %v", v)
	}
	// No change and nothing skipped: nothing to say.
	d = nil
	summarizeCheck(checkResult{Tasks: []bundle.Change{}}, &d)
	if len(d) != 0 {
		t.Errorf("a check without changes warned: %v", d)
	}
	// The record's document decodes to the same value.
	raw, _ := json.Marshal(res)
	var back checkResult
	if err := json.Unmarshal(raw, &back); err != nil || !back.value().Equal(v) {
		t.Errorf("record round trip: %v, %v", err, back.value())
	}
}

// TestCheckSummaryNoDiffs: without plan_check_diffs, neither the plan's
// warning nor planned_changes carries diff text, even when the pod sent
// some: they show each task's host, name, module and size.
func TestCheckSummaryNoDiffs(t *testing.T) {
	const secret = "vault-plaintext-hunter2"
	res := checkResultOf(&bundle.Check{ChangeCount: 2, Changes: []bundle.Change{
		{Host: "web1", Task: "template the config", Action: "template", Diff: "-password=old\n+password=" + secret + "\n",
			DiffSize: 48, LinesAdded: 1, LinesRemoved: 1},
		{Host: "web1", Task: "secret task", Action: "copy"}, // no_log: no size
	}}, false)
	var d diag.Diagnostics
	summarizeCheck(res, &d)
	if len(d) != 1 {
		t.Fatalf("diagnostics %v", d)
	}
	detail := d[0].Detail()
	if strings.Contains(detail, secret) || strings.Contains(detail, "password") {
		t.Errorf("the warning quotes the diff:\n%s", detail)
	}
	for _, want := range []string{"web1: template the config (template) +1 -1 lines\n", "web1: secret task (copy)\n"} {
		if !strings.Contains(detail, want) {
			t.Errorf("detail lacks %q:\n%s", want, detail)
		}
	}
	raw, _ := json.Marshal(res) // private state's and the record's
	if strings.Contains(string(raw), secret) {
		t.Errorf("the kept result holds the diff: %s", raw)
	}
	task := firstPlannedTask(t, res)
	if !task["diff"].IsNull() || task["diff_size"].String() != "48" ||
		task["lines_added"].String() != "1" || task["lines_removed"].String() != "1" {
		t.Errorf("planned task %v", task)
	}
	// With plan_check_diffs the diff is kept.
	with := checkResultOf(&bundle.Check{ChangeCount: 1, Changes: res.Tasks[:1]}, true)
	with.Tasks[0].Diff = "+password=" + secret + "\n"
	if task := firstPlannedTask(t, with); task["diff"].String() != strconv.Quote(with.Tasks[0].Diff) {
		t.Errorf("with plan_check_diffs, diff %v", task["diff"])
	}
}

// TestCheckNotRunDetail: a failed check's warning names its failed tasks,
// but quotes their messages and the output only with plan_check_diffs.
func TestCheckNotRunDetail(t *testing.T) {
	const secret = "vault-plaintext-hunter2"
	res := runner.Result{Output: "TASK [template]\n--- before\n+++ after\n+password=" + secret + "\n",
		FailedTasks: []bundle.FailedTask{{Host: "web1", Task: "check the config", Message: "bad value " + secret}}}
	var d diag.Diagnostics
	warnNotRun("the check ended with status failed (exit code 2)"+failedDetail(res, false), &d)
	if len(d) != 1 || strings.Contains(d[0].Detail(), secret) || !strings.Contains(d[0].Detail(), "web1: check the config") {
		t.Errorf("without plan_check_diffs: %v", d)
	}
	if got := failedDetail(res, true); !strings.Contains(got, "bad value "+secret) || !strings.Contains(got, "+password="+secret) {
		t.Errorf("with plan_check_diffs: %q", got)
	}
}

// FuzzSummarizeCheck: any check result, as a check's pod may report it,
// gives one warning (or none when nothing would change and nothing was
// skipped), a detail that quotes at most summaryLines lines of each diff,
// and a planned_changes value that survives the record's round trip.
func FuzzSummarizeCheck(f *testing.F) {
	f.Add("web1", "template the config", "template", "-a\n+b\n", false, int64(0), int64(1), int64(0), uint8(1))
	f.Add("h", "t\nx", "", strings.Repeat("+l\n", 40), true, int64(90000), int64(7), int64(2), uint8(3))
	f.Add("", "", "", "", false, int64(-1), int64(0), int64(-3), uint8(0))
	f.Fuzz(func(t *testing.T, host, task, action, diff string, ran bool, diffSize, count, notCheckable int64, n uint8) {
		// A result comes decoded from JSON (bundle.DecodeCheck): its strings
		// are valid UTF-8, as Terraform's must be.
		host, task, action, diff = validUTF8(host), validUTF8(task), validUTF8(action), validUTF8(diff)
		res := checkResult{Tasks: []bundle.Change{}, TaskCount: count, NotCheckable: notCheckable, Diffs: n%2 == 0}
		for i := range int(n % 6) {
			res.Tasks = append(res.Tasks, bundle.Change{Host: host + strconv.Itoa(i%2), Task: task, Action: action,
				Diff: diff, DiffSize: diffSize, Ran: ran})
		}
		var d diag.Diagnostics
		summarizeCheck(res, &d)
		switch {
		case count == 0 && notCheckable <= 0 && len(d) != 0, len(d) > 1:
			t.Fatalf("%d diagnostics for %+v: %v", len(d), res, d)
		case len(d) == 1 && (d[0].Severity() != diag.SeverityWarning || !strings.HasPrefix(d[0].Summary(), "Playbook Check: ")):
			t.Fatalf("diagnostic %v", d[0])
		}
		// Each task: its header line (and the newlines of its names), at most
		// summaryLines diff lines and the "more lines" one, the cut's note;
		// then the "more tasks" line, a blank line and the skipped count.
		diffLines := strings.Count(strings.TrimRight(diff, "\n"), "\n") + 1
		if diff == "" {
			diffLines = 0
		}
		perTask := 1 + strings.Count(host+task+action, "\n") + min(diffLines, summaryLines+1) + 1
		detail := checkDetail(res)
		if got, bound := strings.Count(detail, "\n")+1, len(res.Tasks)*perTask+3; got > bound {
			t.Fatalf("the detail has %d lines, more than %d:\n%s", got, bound, detail)
		}
		v := res.value()
		raw, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		var back checkResult
		if err := json.Unmarshal(raw, &back); err != nil || !back.value().Equal(v) {
			t.Fatalf("record round trip: %v, %v != %v", err, back.value(), v)
		}
	})
}

// validUTF8 is s with its invalid UTF-8 replaced: valid, as any string
// decoded from JSON is.
func validUTF8(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

func TestSkipReason(t *testing.T) {
	for inv, want := range map[tfinvocation.Invocation]string{
		{Known: true, Command: "plan"}: "", {Known: true, Command: "apply", PlanFile: true}: "",
		{}: "the command that started the provider could not be read", {Unknown: "dlv is not terraform"}: "dlv is not terraform",
		{Known: true, Command: "destroy", Destroy: true}:   "the plan is a destroy's",
		{Known: true, Command: "plan", NoRefresh: true}:    "the plan has -refresh=false",
		{Known: true, Command: "apply", RefreshOnly: true}: "the plan is refresh-only",
		{Known: true, Command: "import"}:                   "terraform import runs no check",
	} {
		if got := skipReason(inv); got != want {
			t.Errorf("skipReason(%+v) = %q, want %q", inv, got, want)
		}
	}
}

func TestPlanTimeoutKey(t *testing.T) {
	ctx := context.Background()
	var resp fwresource.SchemaResponse
	newRunResource().Schema(ctx, fwresource.SchemaRequest{}, &resp)
	b, ok := resp.Schema.Blocks["timeouts"].(schema.SingleNestedBlock)
	if !ok {
		t.Fatal("no timeouts block")
	}
	ty, ok := b.CustomType.(timeouts.Type)
	if !ok || ty.AttrTypes[planTimeoutKey] == nil || b.Attributes[planTimeoutKey] == nil {
		t.Fatalf("the timeouts block has no %s key: %v", planTimeoutKey, b.CustomType)
	}
	var m runModel
	if d := planTimeout(m.Timeouts); d != defaultPlanCheckTimeout {
		t.Errorf("null timeouts: %s", d)
	}
	obj := func(plan attr.Value) timeouts.Value {
		return timeouts.Value{Object: types.ObjectValueMust(ty.AttrTypes, map[string]attr.Value{
			"create": types.StringNull(), "delete": types.StringNull(), planTimeoutKey: plan})}
	}
	if d := planTimeout(obj(types.StringValue("90s"))); d != 90*time.Second {
		t.Errorf("plan = 90s: %s", d)
	}
	if d := planTimeout(obj(types.StringNull())); d != defaultPlanCheckTimeout {
		t.Errorf("plan unset: %s", d)
	}
}

// firstPlannedTask is the first task of res as planned_changes has it.
func firstPlannedTask(t *testing.T, res checkResult) map[string]attr.Value {
	t.Helper()
	tasks, ok := res.value().Attributes()["tasks"].(types.List)
	if !ok || len(tasks.Elements()) == 0 {
		t.Fatalf("planned_changes has no tasks: %v", res.value())
	}
	task, ok := tasks.Elements()[0].(types.Object)
	if !ok {
		t.Fatalf("a planned task is %T", tasks.Elements()[0])
	}
	return task.Attributes()
}
