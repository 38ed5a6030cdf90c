// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"strings"

	aschema "github.com/hashicorp/terraform-plugin-framework/action/schema"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/defaults"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// The kubeplay_run action's inputs are the run resource's: its schema is
// the one definition, and actionAttribute derives the action's attributes
// from it, with the same validators and write-only flag and a description
// of the action's own (runActionDescriptions). Plan
// modifiers and defaults have no place in an action schema; asRunConfig
// applies the defaults when the action runs.

// The sentence on re-running that ends the description of each write-only
// input of the run resource, for one value or several. The action leaves it
// out: it has neither a plan of its own nor triggers.
const (
	runWOChangeOne  = " A change of it alone plans nothing (see [Running Again](#running-again))."
	runWOChangeMany = " A change of them alone plans nothing (see [Running Again](#running-again))."
)

// actionDescription is a run resource input's description as the action's.
func actionDescription(d string) string {
	return strings.NewReplacer(runWOChangeOne, "", runWOChangeMany, "").Replace(d)
}

// actionAttribute converts one input attribute of the run resource, with
// the description desc; false for a kind the run resource does not use.
func actionAttribute(a schema.Attribute, desc string) (aschema.Attribute, bool) {
	switch a := a.(type) {
	case schema.StringAttribute:
		return aschema.StringAttribute{MarkdownDescription: desc, Required: a.Required,
			Optional: a.Optional, WriteOnly: a.WriteOnly, Validators: a.Validators}, true
	case schema.BoolAttribute:
		return aschema.BoolAttribute{MarkdownDescription: desc, Required: a.Required,
			Optional: a.Optional, WriteOnly: a.WriteOnly, Validators: a.Validators}, true
	case schema.Int64Attribute:
		return aschema.Int64Attribute{MarkdownDescription: desc, Required: a.Required,
			Optional: a.Optional, WriteOnly: a.WriteOnly, Validators: a.Validators}, true
	case schema.ListAttribute:
		return aschema.ListAttribute{MarkdownDescription: desc, Required: a.Required,
			Optional: a.Optional, WriteOnly: a.WriteOnly, Validators: a.Validators,
			ElementType: a.ElementType}, true
	case schema.MapAttribute:
		return aschema.MapAttribute{MarkdownDescription: desc, Required: a.Required,
			Optional: a.Optional, WriteOnly: a.WriteOnly, Validators: a.Validators,
			ElementType: a.ElementType}, true
	case schema.DynamicAttribute:
		return aschema.DynamicAttribute{MarkdownDescription: desc, Required: a.Required,
			Optional: a.Optional, WriteOnly: a.WriteOnly, Validators: a.Validators}, true
	case schema.SingleNestedAttribute:
		nested := make(map[string]aschema.Attribute, len(a.Attributes))
		for name, na := range a.Attributes {
			v, ok := actionAttribute(na, na.GetMarkdownDescription())
			if !ok {
				return nil, false
			}
			nested[name] = v
		}
		return aschema.SingleNestedAttribute{MarkdownDescription: desc, Required: a.Required,
			Optional: a.Optional, WriteOnly: a.WriteOnly, Validators: a.Validators, Attributes: nested}, true
	}
	return nil, false
}

// asRunConfig is the action's config as the run resource's: the resource's
// attributes the action lacks are null, those the action leaves null take
// the resource's defaults.
func asRunConfig(ctx context.Context, config tfsdk.Config, diags *diag.Diagnostics) tfsdk.Config {
	var rs resource.SchemaResponse
	(&runResource{}).Schema(ctx, resource.SchemaRequest{}, &rs)
	typ, ok := rs.Schema.Type().TerraformType(ctx).(tftypes.Object)
	if !ok {
		diags.AddError("Internal Error", "The run resource's schema is not an object. This is a bug in the provider; please report it.")
		return tfsdk.Config{}
	}
	given := map[string]tftypes.Value{}
	if !config.Raw.IsNull() && config.Raw.IsKnown() {
		if err := config.Raw.As(&given); err != nil {
			diags.AddError("Internal Error", "Reading the action's configuration failed: "+err.Error()+"."+
				" This is a bug in the provider; please report it.")
			return tfsdk.Config{}
		}
	}
	vals := make(map[string]tftypes.Value, len(typ.AttributeTypes))
	for name, t := range typ.AttributeTypes {
		v, ok := given[name]
		if _, block := rs.Schema.Blocks[name]; block {
			ok = false // the resource's timeouts: the action's own are read apart
		}
		if !ok || v.IsNull() {
			v = runDefault(ctx, rs.Schema.Attributes[name], t, diags)
		}
		vals[name] = v
	}
	return tfsdk.Config{Schema: rs.Schema, Raw: tftypes.NewValue(typ, vals)}
}

// runDefault is a resource attribute's default as a Terraform value, null
// when it has none.
func runDefault(ctx context.Context, a schema.Attribute, t tftypes.Type, diags *diag.Diagnostics) tftypes.Value {
	var v attr.Value
	switch a := a.(type) {
	case schema.StringAttribute:
		if a.Default != nil {
			var r defaults.StringResponse
			a.Default.DefaultString(ctx, defaults.StringRequest{}, &r)
			v = r.PlanValue
		}
	case schema.BoolAttribute:
		if a.Default != nil {
			var r defaults.BoolResponse
			a.Default.DefaultBool(ctx, defaults.BoolRequest{}, &r)
			v = r.PlanValue
		}
	case schema.Int64Attribute:
		if a.Default != nil {
			var r defaults.Int64Response
			a.Default.DefaultInt64(ctx, defaults.Int64Request{}, &r)
			v = r.PlanValue
		}
	}
	if v == nil {
		return tftypes.NewValue(t, nil)
	}
	tv, err := v.ToTerraformValue(ctx)
	if err != nil {
		diags.AddError("Internal Error", "Converting a default of the run resource failed: "+err.Error()+"."+
			" This is a bug in the provider; please report it.")
		return tftypes.NewValue(t, nil)
	}
	return tv
}
