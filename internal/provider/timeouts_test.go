// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/action"
	aschema "github.com/hashicorp/terraform-plugin-framework/action/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	fwresource "github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"
)

// TestTimeoutsBlocks: every operation that waits is bounded by a key of a
// timeouts block, and only those: each key says what it bounds and its
// default, and refuses a duration of zero or less. No attribute of these
// resources is a timeout of its own.
func TestTimeoutsBlocks(t *testing.T) {
	ctx := context.Background()
	want := map[string][]string{
		"kubeplay_run":        {"create", "delete", "plan"},
		"kubeplay_phase":      {"create", "delete", "update"},
		"kubeplay_clusterctl": {"create", "delete"},
	}
	for name, r := range map[string]fwresource.Resource{
		"kubeplay_run": newRunResource(), "kubeplay_phase": newPhaseResource(), "kubeplay_clusterctl": newClusterctlResource(),
	} {
		var resp fwresource.SchemaResponse
		r.Schema(ctx, fwresource.SchemaRequest{}, &resp)
		for attr := range resp.Schema.Attributes {
			if strings.Contains(attr, "timeout") {
				t.Errorf("%s has an attribute %s: operation timeouts belong in the timeouts block", name, attr)
			}
		}
		b, ok := resp.Schema.Blocks["timeouts"].(schema.SingleNestedBlock)
		if !ok {
			t.Errorf("%s has no timeouts block", name)
			continue
		}
		if keys := slices.Sorted(maps.Keys(b.Attributes)); !slices.Equal(keys, want[name]) {
			t.Errorf("%s: timeouts keys %v, want %v", name, keys, want[name])
		}
		for key, a := range b.Attributes {
			s, _ := a.(schema.StringAttribute)
			checkTimeoutKey(t, name+" timeouts."+key, s.Description, s.Validators)
		}
	}
	var aresp action.SchemaResponse
	newRunAction().Schema(ctx, action.SchemaRequest{}, &aresp)
	b, ok := aresp.Schema.Blocks["timeouts"].(aschema.SingleNestedBlock)
	if !ok || len(b.Attributes) != 1 || aresp.Schema.Attributes["timeout"] != nil {
		t.Fatalf("the action's timeouts: %v, attribute timeout %v; want a block with invoke alone", b.Attributes, aresp.Schema.Attributes["timeout"])
	}
	s, _ := b.Attributes["invoke"].(aschema.StringAttribute)
	checkTimeoutKey(t, "the action's timeouts.invoke", s.Description, s.Validators)
}

func checkTimeoutKey(t *testing.T, what, desc string, validators []validator.String) {
	t.Helper()
	if !strings.Contains(desc, "Defaults to `") || !strings.HasSuffix(desc, ".") || strings.Contains(desc, "parsed as a duration") {
		t.Errorf("%s: description %q does not say what it bounds and its default", what, desc)
	}
	for _, bad := range []string{"0s", "-5m"} {
		var resp validator.StringResponse
		for _, v := range validators {
			v.ValidateString(context.Background(), validator.StringRequest{Path: path.Root("timeouts").AtName("x"),
				ConfigValue: types.StringValue(bad)}, &resp)
		}
		if !resp.Diagnostics.HasError() {
			t.Errorf("%s accepts %q", what, bad)
		}
	}
	var resp validator.StringResponse
	for _, v := range validators {
		v.ValidateString(context.Background(), validator.StringRequest{Path: path.Root("timeouts").AtName("x"),
			ConfigValue: types.StringValue("soon")}, &resp)
	}
	if resp.Diagnostics.ErrorsCount() != 1 {
		t.Errorf("%s: %d errors for \"soon\", want the package's one: %v", what, resp.Diagnostics.ErrorsCount(), resp.Diagnostics)
	}
}

// TestPhaseTimeouts_planErrors: a bad duration in any timeouts key fails the
// plan with the key's path, before any cluster is reached.
func TestPhaseTimeouts_planErrors(t *testing.T) {
	phase := func(block string) string {
		return unreachableProvider + "resource \"kubeplay_phase\" \"test\" {\n  name = \"p\"\n  documents = [\"apiVersion: v1\\nkind: ConfigMap\\nmetadata:\\n  name: c\\n\"]\n" +
			"  timeouts {\n    " + block + "\n  }\n}\n"
	}
	steps := []resource.TestStep{}
	for _, c := range []struct{ cfg, want string }{
		{phase(`create = "soon"`), `(?s)Invalid Attribute Value Time Duration.*create = "soon".*"soon" must be a string containing`},
		{phase(`create = "0s"`), `(?s)Invalid Duration.*create = "0s".*timeouts.create must be a positive duration.*got "0s"`},
		{phase(`update = "-1m"`), `(?s)Invalid Duration.*update = "-1m".*timeouts.update must be a positive duration`},
		{phase(`delete = "0s"`), `(?s)Invalid Duration.*delete = "0s".*timeouts.delete must be a positive duration`},
		{phase(`read = "1m"`), `(?s)Unsupported argument.*"read" is not expected here`},
	} {
		steps = append(steps, resource.TestStep{Config: c.cfg, PlanOnly: true, ExpectError: expectError(c.want)})
	}
	resource.UnitTest(t, resource.TestCase{ProtoV6ProviderFactories: testAccProtoV6ProviderFactories, Steps: steps})
}

// TestRunActionTimeouts_planErrors: the action's timeouts.invoke is checked
// when Terraform validates the action, with its path.
func TestRunActionTimeouts_planErrors(t *testing.T) {
	action := func(block string) string {
		return unreachableProvider + "action \"kubeplay_run\" \"x\" {\n  config {\n    container_group = \"g\"\n" +
			"    command = [\"true\"]\n    timeouts {\n      " + block + "\n    }\n  }\n}\n"
	}
	steps := []resource.TestStep{}
	for _, c := range []struct{ cfg, want string }{
		{action(`invoke = "soon"`), `(?s)Invalid Attribute Value Time Duration.*invoke = "soon".*"soon" must be a string containing`},
		{action(`invoke = "0s"`), `(?s)Invalid Duration.*invoke = "0s".*timeouts.invoke must be a positive duration.*got "0s"`},
		{action(`invoke = "-30m"`), `(?s)Invalid Duration.*invoke = "-30m".*timeouts.invoke must be a positive duration`},
		{action(`create = "1m"`), `(?s)Unsupported argument.*"create" is not expected here`},
		{unreachableProvider + "action \"kubeplay_run\" \"x\" {\n  config {\n    container_group = \"g\"\n    command = [\"true\"]\n" +
			"    timeout = \"10m\"\n  }\n}\n", `(?s)Unsupported argument.*"timeout" is not expected here`},
	} {
		steps = append(steps, resource.TestStep{Config: c.cfg, PlanOnly: true, ExpectError: expectError(c.want)})
	}
	resource.UnitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_14_0)},
		Steps:                    steps,
	})
}

// TestPhaseValidate_conditionsWithoutWait: wait_conditions with wait =
// false would do nothing, which the plan warns about on wait_conditions.
func TestPhaseValidate_conditionsWithoutWait(t *testing.T) {
	ctx := context.Background()
	r := &phaseResource{}
	var sr fwresource.SchemaResponse
	r.Schema(ctx, fwresource.SchemaRequest{}, &sr)
	typ, ok := sr.Schema.Type().TerraformType(ctx).(tftypes.Object)
	if !ok {
		t.Fatal("the phase's schema is not an object")
	}
	condType, _ := typ.AttributeTypes["wait_conditions"].(tftypes.List)
	cond, _ := condType.ElementType.(tftypes.Object)
	config := func(wait bool) tfsdk.Config {
		vals := map[string]tftypes.Value{}
		for name, at := range typ.AttributeTypes {
			vals[name] = tftypes.NewValue(at, nil)
		}
		vals["name"] = tftypes.NewValue(tftypes.String, "p")
		vals["documents"] = tftypes.NewValue(tftypes.List{ElementType: tftypes.String},
			[]tftypes.Value{tftypes.NewValue(tftypes.String, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n")})
		vals["wait"] = tftypes.NewValue(tftypes.Bool, wait)
		vals["wait_conditions"] = tftypes.NewValue(condType, []tftypes.Value{tftypes.NewValue(cond, map[string]tftypes.Value{
			"api_version": tftypes.NewValue(tftypes.String, "batch/v1"), "kind": tftypes.NewValue(tftypes.String, "Job"),
			"jsonpath": tftypes.NewValue(tftypes.String, "{.status.succeeded}"), "value": tftypes.NewValue(tftypes.String, "1"),
		})})
		return tfsdk.Config{Schema: sr.Schema, Raw: tftypes.NewValue(typ, vals)}
	}
	for _, wait := range []bool{true, false} {
		var resp fwresource.ValidateConfigResponse
		r.ValidateConfig(ctx, fwresource.ValidateConfigRequest{Config: config(wait)}, &resp)
		if resp.Diagnostics.HasError() {
			t.Fatalf("wait = %t: %v", wait, resp.Diagnostics)
		}
		warned := resp.Diagnostics.WarningsCount() == 1 && resp.Diagnostics[0].Summary() == "Wait Conditions Not Used"
		if warned == wait {
			t.Errorf("wait = %t: warnings %v", wait, resp.Diagnostics)
		}
	}
}
