// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	pschema "github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/tfinvocation"
)

// envDisablePlanChecks turns every plan-time check off, whatever the
// configuration says: a pull request controls the configuration, not the
// environment of the CI job that plans it.
const envDisablePlanChecks = "KUBEPLAY_DISABLE_PLAN_CHECKS"

// checkSwitches are the provider's settings for plan-time checks.
type checkSwitches struct {
	// groupDefaults: group_default_plan_checks, so that a group's
	// default_plan_check applies to runs that set no plan_check.
	groupDefaults bool
	// off names the switch that turned every check off; "" when none did.
	off string
}

func groupDefaultPlanChecksAttribute() pschema.BoolAttribute {
	return pschema.BoolAttribute{
		MarkdownDescription: "Whether a container group's `default_plan_check` applies to the runs of this " +
			"workspace that set no `plan_check`. Defaults to `false`: a group, which another workspace may define, " +
			"never makes this workspace's plans run playbooks with its secrets; a run checks only when its own " +
			"`plan_check` says so. See [Checking At Plan](resources/run.md#checking-at-plan).",
		Optional: true,
	}
}

func disablePlanChecksAttribute() pschema.BoolAttribute {
	return pschema.BoolAttribute{
		MarkdownDescription: "Whether every plan-time check is off: `plan_check`, drift checks and group defaults. " +
			"Runs then plan `planned_changes` as null, and the plan warns once. Defaults to `false`. The environment " +
			"variable `" + envDisablePlanChecks + "` (`1`, `true` or `yes`) also turns checks off and wins over this " +
			"attribute, so that the CI job of untrusted pull requests can turn them off whatever the pull request's " +
			"configuration says.",
		Optional: true,
	}
}

// checkSwitchesFrom reads the provider's settings and the environment. An
// unknown disable_plan_checks turns checks off: it might be true.
func checkSwitchesFrom(groupDefaults, disable types.Bool, getenv func(string) string) (checkSwitches, diag.Diagnostics) {
	var diags diag.Diagnostics
	sw := checkSwitches{groupDefaults: groupDefaults.ValueBool()}
	switch v := strings.ToLower(strings.TrimSpace(getenv(envDisablePlanChecks))); v {
	case "1", "true", "yes":
		sw.off = envDisablePlanChecks
		return sw, diags
	case "", "0", "false", "no":
	default:
		diags.AddError("Invalid Provider Environment", fmt.Sprintf("%s is %q; it takes 1, true or yes to turn "+
			"every plan-time check off, or 0, false or no (or unset) to leave them to the configuration. Fix or "+
			"unset the variable.", envDisablePlanChecks, truncate(v, 20)))
		return sw, diags
	}
	switch {
	case disable.IsUnknown():
		sw.off = "disable_plan_checks (known only at apply)"
	case disable.ValueBool():
		sw.off = "disable_plan_checks = true"
	}
	return sw, diags
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// resolveCheckMode is a run's check mode: its plan_check; else, when the
// provider lets group defaults apply, its group's default_plan_check, which
// groupDefault reads ("" when known only at apply); else off. A switch that
// turns checks off makes it off, and disabled says that the run would have
// checked.
func resolveCheckMode(own types.String, sw checkSwitches, groupDefault func() string) (mode string, disabled bool) {
	switch {
	case own.IsUnknown():
		mode = ""
	case !own.IsNull():
		mode = own.ValueString()
	case !sw.groupDefaults:
		mode = planCheckOff
	default:
		mode = groupDefault()
	}
	if sw.off != "" && mode != planCheckOff {
		return planCheckOff, true
	}
	return mode, false
}

// warnChecksOff says once per provider process that a switch turned the
// checks off.
func (d *providerData) warnChecksOff(diags *diag.Diagnostics) {
	if !d.warnedOff.CompareAndSwap(false, true) {
		return
	}
	diags.AddWarning("Plan-Time Checks Disabled", fmt.Sprintf("%s: kubeplay runs no "+
		"plan-time check in this plan (plan_check, drift checks, group defaults), so no playbook runs and "+
		"planned_changes is null. This is meant for plans of untrusted code; to check, plan in a job without it.",
		d.checks.off))
}

// skipCheck reports whether the Terraform command that started the provider
// rules out a check: a destroy's plan, -refresh=false, refresh-only, or a
// command kubeplay cannot read, which might be any of those; the last is
// warned about once per provider process.
func (d *providerData) skipCheck(ctx context.Context, diags *diag.Diagnostics) bool {
	inv := d.invocation
	why := skipReason(inv)
	switch {
	case why == "":
		return false
	case inv.Known:
		tflog.Info(ctx, "no plan-time check", map[string]any{"reason": why})
	case d.warnedUnknown.CompareAndSwap(false, true):
		diags.AddWarning("Playbook Checks Not Run", fmt.Sprintf("kubeplay cannot tell which Terraform command "+
			"started it (%s), so it cannot rule out that this plan is a destroy's or has -refresh=false, and runs "+
			"no plan-time check (plan_check) in it: runs to be created have planned_changes unknown, and applied "+
			"runs are not checked for drift. To check at plan, run terraform or tofu itself, not a renamed binary "+
			"or a debugger.", strings.TrimSuffix(why, ".")))
	}
	return true
}

// skipReason says why this Terraform command runs no check; "" when it may.
func skipReason(inv tfinvocation.Invocation) string {
	switch {
	case !inv.Known && inv.Unknown != "":
		return inv.Unknown
	case !inv.Known:
		return "the command that started the provider could not be read"
	case inv.Destroy:
		return "the plan is a destroy's"
	case inv.NoRefresh:
		return "the plan has -refresh=false"
	case inv.RefreshOnly:
		return "the plan is refresh-only"
	case inv.Command != "plan" && inv.Command != "apply" && inv.Command != "test":
		return "terraform " + inv.Command + " runs no check"
	}
	return ""
}
