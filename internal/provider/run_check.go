// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalogkey"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/outputtail"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runengine"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
)

// The values of plan_check and of a group's default_plan_check.
const (
	planCheckOff     = "off"
	planCheckChanges = "changes"
	planCheckDrift   = "drift"
)

var planCheckModes = []string{planCheckOff, planCheckChanges, planCheckDrift}

const (
	defaultPlanCheckTimeout = 5 * time.Minute
	// planCheckPrivateKey holds, in a run's private state, the check that
	// found its hosts drifted, for the create half of the replacement.
	planCheckPrivateKey = "plan_check"
	// planCheckOutputLimit bounds the output a check keeps, for its error.
	planCheckOutputLimit = 64 << 10
)

const planCheckDescription = "Whether `terraform plan` first runs the playbook in check mode ([Checking At " +
	"Plan](#checking-at-plan)): `off`, `changes` (for a run to be created or replaced) or `drift` (also " +
	"for an applied run). Unset, the group's `default_plan_check` when the provider allows it, else " +
	"`off`."

func planCheckAttributes() map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"plan_check": schema.StringAttribute{
			MarkdownDescription: planCheckDescription,
			Optional:            true,
			Validators:          []validator.String{stringvalidator.OneOf(planCheckModes...)},
		},
		"plan_check_diffs": schema.BoolAttribute{
			MarkdownDescription: "Whether the plan-time check keeps each task's diff text, which may hold secrets (see [Checking At " +
				"Plan](#checking-at-plan)). Defaults to `false`.",
			Optional: true, Computed: true, Default: booldefault.StaticBool(false),
		},
		"planned_changes": schema.SingleNestedAttribute{
			MarkdownDescription: fmt.Sprintf("What the plan-time check found: the first %d tasks that would change a host, with the size of each "+
				"change and, with `plan_check_diffs`, its diff (cut to %d characters). Null when no check ran.", bundle.MaxChanges, bundle.MaxDiff),
			Computed: true,
			Attributes: map[string]schema.Attribute{
				"hosts": schema.ListAttribute{MarkdownDescription: "The hosts that would change, by name.",
					Computed: true, ElementType: types.StringType},
				"tasks": schema.ListNestedAttribute{
					MarkdownDescription: "The tasks that would change a host.",
					Computed:            true,
					NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
						"host":      schema.StringAttribute{MarkdownDescription: "The host.", Computed: true},
						"task":      schema.StringAttribute{MarkdownDescription: "The task's name.", Computed: true},
						"action":    schema.StringAttribute{MarkdownDescription: "The task's module.", Computed: true},
						"diff":      schema.StringAttribute{MarkdownDescription: "The change, as `--diff` shows it, redacted as `output` is. Null unless `plan_check_diffs` is `true`.", Computed: true},
						"diff_size": schema.Int64Attribute{MarkdownDescription: "The whole diff's length in characters.", Computed: true},
						"lines_added": schema.Int64Attribute{MarkdownDescription: "How many lines the diff adds.",
							Computed: true},
						"lines_removed": schema.Int64Attribute{MarkdownDescription: "How many lines the diff removes.",
							Computed: true},
						"ran": schema.BoolAttribute{MarkdownDescription: "Whether the task has `check_mode: false` and so ran for real.", Computed: true},
					}},
				},
				"task_count":    schema.Int64Attribute{MarkdownDescription: "How many tasks would change a host.", Computed: true},
				"not_checkable": schema.Int64Attribute{MarkdownDescription: "How many tasks the check skipped as not checkable.", Computed: true},
				"drifted_run":   schema.StringAttribute{MarkdownDescription: "The applied run whose hosts drifted; null before a create.", Computed: true},
			},
		},
	}
}

var plannedTaskType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"host": types.StringType, "task": types.StringType, "action": types.StringType, "diff": types.StringType,
	"diff_size": types.Int64Type, "lines_added": types.Int64Type, "lines_removed": types.Int64Type, "ran": types.BoolType,
}}

var plannedChangesType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"hosts": types.ListType{ElemType: types.StringType}, "tasks": types.ListType{ElemType: plannedTaskType},
	"task_count": types.Int64Type, "not_checkable": types.Int64Type, "drifted_run": types.StringType,
}}

// checkResult is what a plan-time check found, as a record and private
// state keep it.
type checkResult struct {
	Tasks        []bundle.Change `json:"tasks"`
	TaskCount    int64           `json:"task_count"`
	NotCheckable int64           `json:"not_checkable"`
	DriftedRun   string          `json:"drifted_run,omitempty"`
	// Diffs: the run has plan_check_diffs, so Tasks keep their diff text.
	Diffs bool `json:"diffs,omitempty"`
}

// hosts are the result's hosts, sorted.
func (c checkResult) hosts() []string {
	var hs []string
	for _, t := range c.Tasks {
		if !slices.Contains(hs, t.Host) {
			hs = append(hs, t.Host)
		}
	}
	slices.Sort(hs)
	return hs
}

// value is the result as planned_changes.
func (c checkResult) value() types.Object {
	tasks := make([]attr.Value, 0, len(c.Tasks))
	for _, t := range c.Tasks {
		diff := types.StringNull()
		if c.Diffs {
			diff = types.StringValue(t.Diff)
		}
		tasks = append(tasks, types.ObjectValueMust(plannedTaskType.AttrTypes, map[string]attr.Value{
			"host": types.StringValue(t.Host), "task": types.StringValue(t.Task), "action": types.StringValue(t.Action),
			"diff": diff, "diff_size": types.Int64Value(t.DiffSize), "lines_added": types.Int64Value(t.LinesAdded),
			"lines_removed": types.Int64Value(t.LinesRemoved), "ran": types.BoolValue(t.Ran),
		}))
	}
	hosts := make([]attr.Value, 0)
	for _, h := range c.hosts() {
		hosts = append(hosts, types.StringValue(h))
	}
	return types.ObjectValueMust(plannedChangesType.AttrTypes, map[string]attr.Value{
		"hosts": types.ListValueMust(types.StringType, hosts), "tasks": types.ListValueMust(plannedTaskType, tasks),
		"task_count": types.Int64Value(c.TaskCount), "not_checkable": types.Int64Value(c.NotCheckable),
		"drifted_run": stringOrNull(c.DriftedRun),
	})
}

// checkResultOf is the result of a check's run; without diffs
// (plan_check_diffs) it keeps no diff text, whatever the pod sent.
func checkResultOf(c *bundle.Check, diffs bool) checkResult {
	r := checkResult{Tasks: []bundle.Change{}, Diffs: diffs}
	if c != nil {
		r.Tasks = append(r.Tasks, c.Changes...)
		r.TaskCount, r.NotCheckable = c.ChangeCount, c.NotCheckable
	}
	if !diffs {
		for i := range r.Tasks {
			r.Tasks[i].Diff = ""
		}
	}
	return r
}

// planTimeoutKey is the key of the run's timeouts block that bounds a
// plan-time check.
const planTimeoutKey = "plan"

// withPlanTimeout adds the plan key to a run's timeouts block.
func withPlanTimeout(block schema.Block) schema.Block {
	b, ok := block.(schema.SingleNestedBlock)
	if !ok {
		return block
	}
	t, ok := b.CustomType.(timeouts.Type)
	if !ok {
		return block
	}
	desc := "How long a plan-time check may take, as a duration; past it, the plan goes on without the check. " +
		"Defaults to `5m`."
	// The package's duration check, as its own keys have it, then kubeplay's.
	var vs []validator.String
	if pkg, ok := timeouts.Block(context.Background(), timeouts.Opts{Read: true}).(schema.SingleNestedBlock); ok {
		if read, ok := pkg.Attributes["read"].(schema.StringAttribute); ok {
			vs = append(vs, read.Validators...)
		}
	}
	b.Attributes[planTimeoutKey] = schema.StringAttribute{
		Description: desc, MarkdownDescription: desc, Optional: true,
		Validators: append(vs, positiveDuration()),
	}
	t.AttrTypes = maps.Clone(t.AttrTypes)
	t.AttrTypes[planTimeoutKey] = types.StringType
	b.CustomType = t
	return b
}

// planTimeout is the run's timeouts.plan, else defaultPlanCheckTimeout.
func planTimeout(v timeouts.Value) time.Duration {
	if v.IsNull() || v.IsUnknown() {
		return defaultPlanCheckTimeout
	}
	s, ok := v.Attributes()[planTimeoutKey].(types.String)
	if !ok || s.IsNull() || s.IsUnknown() {
		return defaultPlanCheckTimeout
	}
	d, err := time.ParseDuration(s.ValueString())
	if err != nil || d <= 0 {
		return defaultPlanCheckTimeout
	}
	return d
}

// planCheckMode is the run's check mode under the provider's switches
// (resolveCheckMode); "" when it is known only at apply (the group is).
func (r *runResource) planCheckMode(ctx context.Context, m runModel, diags *diag.Diagnostics) string {
	if !m.Command.IsNull() {
		return planCheckOff // a command has no check mode
	}
	var sw checkSwitches
	if r.data != nil {
		sw = r.data.checks
	}
	mode, disabled := resolveCheckMode(m.PlanCheck, sw, func() string { return r.groupDefaultCheck(ctx, m) })
	if disabled {
		r.data.warnChecksOff(diags)
	}
	return mode
}

// groupDefaultCheck is the default_plan_check of the run's group; "" when
// it is known only at apply.
func (r *runResource) groupDefaultCheck(ctx context.Context, m runModel) string {
	names, _ := groupNames(m, runengine.OperationCreate)
	if len(names) == 0 || names[0] == "" {
		return ""
	}
	g, _, _, err := r.groupFor(ctx, names[0], true)
	switch {
	case err != nil || g == nil:
		return ""
	case g.DefaultPlanCheck == "":
		return planCheckOff
	}
	return g.DefaultPlanCheck
}

// checksKnown reports whether the run's inputs are all known, which a
// check needs.
func checksKnown(config tfsdk.Config, plan runModel) bool {
	return config.Raw.IsFullyKnown() && !plan.ProjectHash.IsUnknown()
}

// planCreateCheck sets planned_changes of a run to be created: null without
// a check, the check's result, or unknown when it could not run. A check
// made for this configuration and not applied yet (by this plan's first
// walk, or by the plan a saved plan holds) is reused, so that the apply's
// plan reproduces it without a second check.
func (r *runResource) planCreateCheck(ctx context.Context, req resource.ModifyPlanRequest, plan *runModel, resp *resource.ModifyPlanResponse) {
	mode := r.planCheckMode(ctx, *plan, &resp.Diagnostics)
	plan.PlannedChanges = types.ObjectUnknown(plannedChangesType.AttrTypes)
	switch mode {
	case planCheckOff:
		plan.PlannedChanges = types.ObjectNull(plannedChangesType.AttrTypes)
		return
	case "":
		return // known at apply
	}
	if raw := privateCheck(ctx, req); len(raw) > 0 {
		// The create half of a replacement that a drift check planned.
		var res checkResult
		if json.Unmarshal(raw, &res) == nil {
			plan.PlannedChanges = res.value()
			return
		}
	}
	if r.data == nil || !checksKnown(req.Config, *plan) {
		return // checked, if at all, by a plan that knows the inputs
	}
	inv := r.data.invocation
	if r.data.skipCheck(ctx, &resp.Diagnostics) {
		return
	}
	key, err := r.checkKey(ctx, req.Config, *plan)
	if err != nil {
		resp.Diagnostics.AddWarning("Playbook Check Not Run", fmt.Sprintf("The plan-time check of the run needs the "+
			"catalog key to keep its result for the apply: %v. The plan goes on without it. Give the provider's "+
			"identity read access to the Secret %s of the catalog namespace (or set the provider's catalog_key), "+
			"and plan again.", err, catalogkey.SecretName))
		return
	}
	// terraform plan never applies: its check is always a fresh one. Other
	// plans show the check of this configuration not applied yet, if any.
	if !inv.Known || inv.Command != "plan" {
		res, written, lerr := r.loadCheck(ctx, key)
		ok := lerr == nil
		// A drift check's record is for the apply of the replacement it
		// planned (whose walk deleted the drifted run first, or a saved plan):
		// another plan of a create checks afresh.
		if ok && res.DriftedRun != "" && !r.data.applying.Load() && !inv.PlanFile {
			ok = false
		}
		if ok {
			reusedCheck(ctx, key, written, inv.PlanFile, &resp.Diagnostics)
			plan.PlannedChanges = res.value()
			return
		}
		if r.data.applying.Load() || inv.PlanFile {
			// The plan showed a check that is gone: an error now, before
			// anything exists, not Terraform's inconsistent final plan.
			if why := r.checkGone(ctx, key, lerr); why != "" {
				r.checkGoneError(why, &resp.Diagnostics)
				return
			}
		}
	}
	if r.data.applying.Load() || inv.PlanFile {
		// The apply's plan of a run its plan did not check: no check now.
		tflog.Info(ctx, "no plan-time check in an apply", map[string]any{"record": key})
		return
	}
	if names, _ := groupNames(*plan, runengine.OperationCreate); len(names) > 0 {
		if _, _, _, err := r.groupFor(ctx, names[0], false); err != nil {
			// Created by this apply, or missing: nothing to check in yet.
			tflog.Info(ctx, "no plan-time check: the run's group is not in the catalog yet", map[string]any{"reason": err.Error()})
			return
		}
	}
	res, ok := r.runCheck(ctx, req.Config, *plan, &resp.Diagnostics)
	if !ok {
		r.supersedeCheck(ctx, key)
		return
	}
	r.storeCheck(ctx, key, res, &resp.Diagnostics)
	plan.PlannedChanges = res.value()
	summarizeCheck(res, &resp.Diagnostics)
}

// privateCheck is the check the run's private state carries, if any.
func privateCheck(ctx context.Context, req resource.ModifyPlanRequest) []byte {
	if req.Private == nil {
		return nil
	}
	raw, d := req.Private.GetKey(ctx, planCheckPrivateKey)
	if d.HasError() {
		return nil
	}
	return raw
}

// planDriftCheck checks an applied run whose configuration did not change,
// when this plan refreshed it: a host that would change replaces the run.
func (r *runResource) planDriftCheck(ctx context.Context, req resource.ModifyPlanRequest, plan, state runModel, resp *resource.ModifyPlanResponse) {
	if r.data == nil || r.planCheckMode(ctx, plan, &resp.Diagnostics) != planCheckDrift || !r.data.wasRefreshed(state.ID.ValueString()) {
		return // no refresh in this walk: -refresh=false, or the apply's plan
	}
	if !checksKnown(req.Config, plan) || state.Status.ValueString() != runner.StatusSuccessful {
		return
	}
	if r.data.skipCheck(ctx, &resp.Diagnostics) {
		return
	}
	res, ok := r.runCheck(ctx, req.Config, plan, &resp.Diagnostics)
	if !ok || res.TaskCount == 0 {
		return
	}
	res.DriftedRun = state.ID.ValueString()
	// The create half of the replacement reads it from the private state;
	// the apply's plan of that create, from the record.
	raw, _ := json.Marshal(res)
	resp.Diagnostics.Append(resp.Private.SetKey(ctx, planCheckPrivateKey, raw)...)
	if key, err := r.checkKey(ctx, req.Config, plan); err == nil {
		r.storeCheck(ctx, key, res, &resp.Diagnostics)
	}
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("planned_changes"), res.value())...)
	resp.RequiresReplace = append(resp.RequiresReplace, path.Root("planned_changes"))
	resp.Diagnostics.AddWarning(fmt.Sprintf("Hosts Drifted: Run %s Replaced", state.ID.ValueString()),
		fmt.Sprintf("plan_check = \"drift\": the playbook's check says %s would change since the run was applied, "+
			"so the plan runs it again (replace).\n\n%s", countPhrase(res), checkDetail(res)))
}

// runCheck runs the playbook in check and diff mode in a pod of the run's
// group; false, after a warning that says why, when it could not.
func (r *runResource) runCheck(ctx context.Context, config tfsdk.Config, plan runModel, diags *diag.Diagnostics) (checkResult, bool) {
	var cfg runModel
	var d diag.Diagnostics
	d.Append(config.Get(ctx, &cfg)...)
	timeout := planTimeout(plan.Timeouts)
	m := plan
	m.ID = types.StringValue(runengine.NewID())
	m.KeepPodOnFailure, m.OutputLimit = types.BoolValue(false), types.Int64Value(planCheckOutputLimit)
	if !d.HasError() && resolveProject(ctx, &m, false, &d) {
		b := r.bundle(ctx, m, cfg, m.Playbook.ValueString(), &d)
		if !d.HasError() {
			return r.place(ctx, m, b, timeout, diags)
		}
	}
	warnNotRun("the run's inputs could not be read: "+errorsOf(d), diags)
	return checkResult{}, false
}

// place runs the check's bundle b.
func (r *runResource) place(ctx context.Context, m runModel, b bundle.Bundle, timeout time.Duration, diags *diag.Diagnostics) (checkResult, bool) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	diffs := m.PlanCheckDiffs.ValueBool()
	b.Check, b.Diff, b.CheckDiffs = true, true, diffs
	var d diag.Diagnostics
	_, cands, groupsAt := r.candidates(ctx, m, runengine.OperationCreate, &d)
	if d.HasError() {
		warnNotRun(errorsOf(d), diags)
		return checkResult{}, false
	}
	id := m.ID.ValueString()
	tflog.Info(ctx, "plan-time check starting", map[string]any{"check": id, "timeout": timeout.String()})
	out, _, err := runengine.Place(ctx, runengine.Request{
		RunInfo:   runengine.RunInfo{ID: id, Name: m.Name.ValueString()},
		Operation: runengine.OperationCreate, Bundle: b, Forks: m.Forks.ValueInt64(),
		OutputLimit: planCheckOutputLimit, Timeout: timeout,
		// No OnLine: a check's output, diffs included, goes to no log.
		Node: m.Node.ValueString(),
	}, cands)
	if err != nil {
		var nd diag.Diagnostics
		notStarted(err, groupsAt, &nd)
		warnNotRun(errorsOf(nd), diags)
		return checkResult{}, false
	}
	cleanupWarnings(out.Warnings, diags)
	res := out.Result
	if res.Status != runner.StatusSuccessful {
		detail := fmt.Sprintf("the check ended with status %s (exit code %d%s)", res.Status, res.ExitCode, reasonNote(res.Reason))
		switch {
		case res.Reason == runner.ReasonTimeout:
			detail += fmt.Sprintf(": it did not end within timeouts.plan (%s)", timeout)
		case res.Message != "":
			detail += ": " + res.Message
		}
		detail += failedDetail(res, diffs)
		warnNotRun(detail, diags)
		return checkResult{}, false
	}
	tflog.Info(ctx, "plan-time check done", map[string]any{"check": id, "pod": res.PodName})
	return checkResultOf(res.Check, diffs), true
}

// failedDetail names the failed tasks of a check that failed; their
// messages and the output's last lines, which may quote what the play
// rendered, only with diffs (plan_check_diffs).
func failedDetail(res runner.Result, diffs bool) string {
	var sb strings.Builder
	for _, t := range res.FailedTasks {
		fmt.Fprintf(&sb, "\n  %s: %s", t.Host, t.Task)
		if diffs && t.Message != "" {
			sb.WriteString(": " + t.Message)
		}
	}
	if !diffs {
		if len(res.FailedTasks) > 0 || res.Output != "" {
			sb.WriteString("\n\nThe tasks' messages and the check's output are not shown, as they may hold secrets " +
				"the playbook renders: run the playbook (or the check with plan_check_diffs = true) to see them.")
		}
		return sb.String()
	}
	if tail := lastLines(res.Output, 10); tail != "" {
		sb.WriteString("\n\nThe output's last lines:\n" + tail)
	}
	return sb.String()
}

func warnNotRun(why string, diags *diag.Diagnostics) {
	diags.AddWarning("Playbook Check Not Run", outputtail.Sanitize("The plan-time check of the run (plan_check) "+
		"could not run: "+strings.TrimSuffix(why, ".")+". The plan goes on without it: a run to be created has "+
		"planned_changes unknown, and an applied run is not checked for drift. Fix the cause, or lengthen "+
		"timeouts.plan when the group had no room, and plan again."))
}

func errorsOf(d diag.Diagnostics) string {
	var parts []string
	for _, e := range d.Errors() {
		parts = append(parts, strings.TrimSuffix(e.Summary()+": "+e.Detail(), "."))
	}
	if len(parts) == 0 {
		return "unknown error"
	}
	return strings.Join(parts, "; ")
}

// countPhrase is "2 tasks on 1 host".
func countPhrase(c checkResult) string {
	return fmt.Sprintf("%s on %s", countOf(c.TaskCount, "task"), countOf(int64(len(c.hosts())), "host"))
}

func countOf(n int64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// summaryLines bounds the diff lines a summary quotes per task.
const summaryLines = 20

// checkDetail lists the result's tasks with the size of their changes,
// and with diffs (plan_check_diffs) the start of their diffs.
func checkDetail(c checkResult) string {
	var sb strings.Builder
	for _, t := range c.Tasks {
		fmt.Fprintf(&sb, "%s: %s (%s)", t.Host, t.Task, t.Action)
		if t.DiffSize > 0 || t.LinesAdded > 0 || t.LinesRemoved > 0 {
			fmt.Fprintf(&sb, " +%d -%d lines", t.LinesAdded, t.LinesRemoved)
		}
		if t.Ran {
			sb.WriteString(" [check_mode: false, ran for real]")
		}
		sb.WriteString("\n")
		if !c.Diffs {
			continue
		}
		lines := strings.Split(strings.TrimRight(t.Diff, "\n"), "\n")
		if t.Diff == "" {
			lines = nil
		}
		for i, l := range lines {
			if i == summaryLines {
				fmt.Fprintf(&sb, "    ... %d more lines in planned_changes\n", len(lines)-summaryLines)
				break
			}
			sb.WriteString("    " + l + "\n")
		}
		if t.DiffSize > bundle.MaxDiff {
			fmt.Fprintf(&sb, "    [diff cut at %d of its %d characters]\n", bundle.MaxDiff, t.DiffSize)
		}
	}
	if more := c.TaskCount - int64(len(c.Tasks)); more > 0 {
		fmt.Fprintf(&sb, "... and %d more tasks, not kept.\n", more)
	}
	fmt.Fprintf(&sb, "\n%s skipped as not checkable (their modules do not support check mode).", countOf(c.NotCheckable, "task"))
	return sb.String()
}

// summarizeCheck is the plan-time summary a reviewer reads in the human
// plan output: a warning, since Terraform shows no other provider text.
func summarizeCheck(c checkResult, diags *diag.Diagnostics) {
	if c.TaskCount == 0 {
		if c.NotCheckable > 0 {
			diags.AddWarning("Playbook Check: No Changes", fmt.Sprintf("The playbook's check says no host would "+
				"change, but it skipped %s as not checkable (their modules do not support check mode).", countOf(c.NotCheckable, "task")))
		}
		return
	}
	// The hosts in the summary keep Terraform from folding the summaries of
	// several runs into one ("and N more similar warnings").
	hosts := c.hosts()
	named := strings.Join(hosts[:min(3, len(hosts))], ", ")
	if len(hosts) > 3 {
		named += ", ..."
	}
	diags.AddWarning("Playbook Check: "+titleCount(c)+" ("+named+")", "The playbook's check (ansible-playbook --check --diff) says "+
		countPhrase(c)+" would change:\n\n"+checkDetail(c))
}

// titleCount is "2 Tasks Would Change On 1 Host".
func titleCount(c checkResult) string {
	return countOf(c.TaskCount, "Task") + " Would Change On " + countOf(int64(len(c.hosts())), "Host")
}
