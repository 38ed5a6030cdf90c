// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/tfinvocation"
)

// TestResolveCheckMode: the run's own plan_check x its group's default x
// group_default_plan_checks x disable_plan_checks x KUBEPLAY_DISABLE_PLAN_CHECKS.
// A group's default applies only when the provider says so, and either
// switch turns every check off; the variable wins over the configuration.
func TestResolveCheckMode(t *testing.T) {
	unset, unknown := types.StringNull(), types.StringUnknown()
	own := map[string]types.String{"unset": unset, "unknown": unknown, "off": types.StringValue(planCheckOff),
		"changes": types.StringValue(planCheckChanges), "drift": types.StringValue(planCheckDrift)}
	for _, c := range []struct {
		own, group    string // group: the group's default_plan_check; "?" known at apply
		groupDefaults bool
		disable       types.Bool
		env           string
		want          string
		disabled      bool
		off           string // the switch the warning names
	}{
		// Group defaults off (the default): a group never turns checks on.
		{own: "unset", group: planCheckChanges, want: planCheckOff},
		{own: "unset", group: planCheckDrift, want: planCheckOff},
		{own: "unset", group: "?", want: planCheckOff},
		{own: "changes", group: planCheckOff, want: planCheckChanges},
		{own: "drift", group: planCheckChanges, want: planCheckDrift},
		{own: "off", group: planCheckDrift, groupDefaults: true, want: planCheckOff},
		{own: "unknown", group: planCheckOff, want: ""},
		// Group defaults on: the group's default for runs that set none.
		{own: "unset", group: planCheckChanges, groupDefaults: true, want: planCheckChanges},
		{own: "unset", group: "?", groupDefaults: true, want: ""},
		{own: "unset", group: planCheckOff, groupDefaults: true, want: planCheckOff},
		// disable_plan_checks: every check off.
		{own: "changes", disable: types.BoolValue(true), want: planCheckOff, disabled: true, off: "disable_plan_checks = true"},
		{own: "unset", group: planCheckDrift, groupDefaults: true, disable: types.BoolValue(true), want: planCheckOff,
			disabled: true, off: "disable_plan_checks"},
		{own: "unknown", disable: types.BoolValue(true), want: planCheckOff, disabled: true, off: "disable_plan_checks"},
		{own: "changes", disable: types.BoolUnknown(), want: planCheckOff, disabled: true, off: "known only at apply"},
		{own: "off", disable: types.BoolValue(true), want: planCheckOff},
		{own: "unset", group: planCheckChanges, disable: types.BoolValue(true), want: planCheckOff},
		{own: "changes", disable: types.BoolValue(false), want: planCheckChanges},
		// The variable, which the configuration cannot turn checks back on against.
		{own: "changes", env: "1", want: planCheckOff, disabled: true, off: envDisablePlanChecks},
		{own: "drift", env: "TRUE", disable: types.BoolValue(false), want: planCheckOff, disabled: true, off: envDisablePlanChecks},
		{own: "unset", group: planCheckChanges, groupDefaults: true, env: "yes", want: planCheckOff, disabled: true,
			off: envDisablePlanChecks},
		{own: "changes", env: "Yes", disable: types.BoolValue(true), want: planCheckOff, disabled: true, off: envDisablePlanChecks},
		{own: "changes", env: "0", want: planCheckChanges},
		{own: "changes", env: "no", disable: types.BoolValue(true), want: planCheckOff, disabled: true, off: "disable_plan_checks"},
		{own: "changes", env: "false", want: planCheckChanges},
	} {
		env := map[string]string{envDisablePlanChecks: c.env}
		sw, diags := checkSwitchesFrom(types.BoolValue(c.groupDefaults), c.disable, func(k string) string { return env[k] })
		if diags.HasError() {
			t.Fatalf("%+v: %v", c, diags)
		}
		read := false
		mode, disabled := resolveCheckMode(own[c.own], sw, func() string {
			read = true
			if c.group == "?" {
				return ""
			}
			return c.group
		})
		if mode != c.want || disabled != c.disabled || (c.off != "" && !strings.Contains(sw.off, c.off)) {
			t.Errorf("%+v: mode %q disabled %v off %q, want %q %v %q", c, mode, disabled, sw.off, c.want, c.disabled, c.off)
		}
		if read && (!c.groupDefaults || c.own != "unset") {
			t.Errorf("%+v: the group's default was read", c)
		}
	}
}

// TestCheckSwitchesEnvInvalid: a value of KUBEPLAY_DISABLE_PLAN_CHECKS that
// is neither on nor off is an error, not a guess.
func TestCheckSwitchesEnvInvalid(t *testing.T) {
	_, diags := checkSwitchesFrom(types.BoolNull(), types.BoolNull(), func(string) string { return "on" })
	if !diags.HasError() || diags[0].Summary() != "Invalid Provider Environment" ||
		!strings.Contains(diags[0].Detail(), envDisablePlanChecks) {
		t.Errorf("diags = %v, want Invalid Provider Environment naming %s", diags, envDisablePlanChecks)
	}
}

// TestSkipCheckWarnsOnce: an unreadable invocation runs no check and warns
// once per provider process; a known destroy runs none without a warning.
func TestSkipCheckWarnsOnce(t *testing.T) {
	ctx := context.Background()
	d := &providerData{invocation: tfinvocation.Invocation{Unknown: "the command that started the provider could not be read: EPERM"}}
	var diags diag.Diagnostics
	for range 3 {
		if !d.skipCheck(ctx, &diags) {
			t.Fatal("an unknown invocation may check")
		}
	}
	if len(diags) != 1 || diags[0].Summary() != "Playbook Checks Not Run" || !strings.Contains(diags[0].Detail(), "could not be read: EPERM") {
		t.Errorf("diags = %v, want one Playbook Checks Not Run saying why", diags)
	}
	d = &providerData{invocation: tfinvocation.Invocation{Known: true, Command: "destroy", Destroy: true}}
	diags = nil
	if !d.skipCheck(ctx, &diags) || len(diags) != 0 {
		t.Errorf("destroy: checked, or warned %v", diags)
	}
	for _, inv := range []tfinvocation.Invocation{{Known: true, Command: "plan"}, {Known: true, Command: "apply"},
		{Known: true, Command: "test"}, testInvocation()} {
		d = &providerData{invocation: inv}
		if d.skipCheck(ctx, &diags) || len(diags) != 0 {
			t.Errorf("%+v: no check, or warned %v", inv, diags)
		}
	}
}

// TestChecksOffWarnsOnce: the switch's warning names it, once.
func TestChecksOffWarnsOnce(t *testing.T) {
	d := &providerData{checks: checkSwitches{off: envDisablePlanChecks}}
	var diags diag.Diagnostics
	d.warnChecksOff(&diags)
	d.warnChecksOff(&diags)
	if len(diags) != 1 || diags[0].Summary() != "Plan-Time Checks Disabled" || !strings.HasPrefix(diags[0].Detail(), envDisablePlanChecks) {
		t.Errorf("diags = %v, want one Plan-Time Checks Disabled naming the variable", diags)
	}
}
