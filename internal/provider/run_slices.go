// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/objectvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runengine"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
)

// maxSlices bounds slices: each is a pod, a claim and an exec stream of
// this provider process.
const maxSlices = 100

var sliceResultType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"slice": types.Int64Type, "id": types.StringType, "container_group": types.StringType,
	"status": types.StringType, "status_reason": types.StringType, "exit_code": types.Int64Type,
	"host_count": types.Int64Type, "pod_name": types.StringType, "node_name": types.StringType,
	"launch_attempts": types.Int64Type, "timeline": types.ListType{ElemType: timelineStepType},
}}

func sliceAttributes() map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"slices": schema.Int64Attribute{
			MarkdownDescription: fmt.Sprintf("Into how many slices, a pod each, the run's hosts are split, as AWX's job slicing does (see [Sliced "+
				"Runs](#sliced-runs)). Between 1 and %d; defaults to `1`.", maxSlices),
			Optional: true, Computed: true, Default: int64default.StaticInt64(1),
			Validators:    []validator.Int64{int64validator.Between(1, maxSlices)},
			PlanModifiers: []planmodifier.Int64{int64planmodifier.RequiresReplace()},
		},
		"ad_hoc": schema.SingleNestedAttribute{
			MarkdownDescription: "An ad hoc command instead of a playbook: `ansible <pattern> -m <module> -a <args>`. Exactly one of " +
				"`playbook`, `playbook_path`, `command` and `ad_hoc` is required.",
			Optional: true,
			Attributes: map[string]schema.Attribute{
				"module": schema.StringAttribute{
					MarkdownDescription: "The module, by its short or fully qualified name, such as `ansible.builtin.ping`.",
					Required:            true, Validators: []validator.String{moduleName()},
				},
				"args": schema.StringAttribute{
					MarkdownDescription: "The module's arguments, as `-a` takes them.",
					Optional:            true,
				},
				"pattern": schema.StringAttribute{
					MarkdownDescription: "The host pattern to run against, such as `all`, `webservers` or `web*:!web3`.",
					Required:            true, Validators: []validator.String{hostPattern()},
				},
			},
			PlanModifiers: []planmodifier.Object{objectplanmodifier.RequiresReplace()},
			Validators: []validator.Object{objectvalidator.ConflictsWith(path.MatchRoot("playbook"),
				path.MatchRoot("playbook_path"), path.MatchRoot("command"))},
		},
		"slice_results": schema.ListNestedAttribute{
			MarkdownDescription: "With `slices` above 1, each slice's end, in slice order; null for an unsliced run.",
			Computed:            true,
			NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
				"slice":           schema.Int64Attribute{MarkdownDescription: "The slice's number, from 1.", Computed: true},
				"id":              schema.StringAttribute{MarkdownDescription: "The slice's run id.", Computed: true},
				"container_group": schema.StringAttribute{MarkdownDescription: "The group the slice ran in.", Computed: true},
				"status":          schema.StringAttribute{MarkdownDescription: "The slice's status, as `status`.", Computed: true},
				"status_reason":   schema.StringAttribute{MarkdownDescription: "The slice's reason, as `status_reason`; null when it succeeded.", Computed: true},
				"exit_code":       schema.Int64Attribute{MarkdownDescription: "The slice's exit code; `-1` when its playbook never ran.", Computed: true},
				"host_count":      schema.Int64Attribute{MarkdownDescription: "How many hosts the slice's play recap holds.", Computed: true},
				"pod_name":        schema.StringAttribute{MarkdownDescription: "The slice's pod.", Computed: true},
				"node_name":       schema.StringAttribute{MarkdownDescription: "The node of the slice's pod.", Computed: true},
				"launch_attempts": schema.Int64Attribute{MarkdownDescription: "How many pods the slice launched.", Computed: true},
				"timeline": schema.ListAttribute{MarkdownDescription: "The slice's timeline, as `timeline`.", Computed: true,
					ElementType: timelineStepType},
			}},
		},
	}
}

// sliceOutcome is one slice's end and the group it ran in.
type sliceOutcome struct {
	runengine.Slice
	group string
}

// sliceResultsValue is outs as slice_results; null for one slice.
func sliceResultsValue(outs []sliceOutcome, diags *diag.Diagnostics) types.List {
	if len(outs) <= 1 {
		return types.ListNull(sliceResultType)
	}
	elems := make([]attr.Value, 0, len(outs))
	for _, s := range outs {
		r := s.Result()
		obj, d := types.ObjectValue(sliceResultType.AttrTypes, map[string]attr.Value{
			"slice": types.Int64Value(int64(s.Index)), "id": types.StringValue(s.ID), "container_group": types.StringValue(s.group),
			"status": types.StringValue(r.Status), "status_reason": stringOrNull(string(r.Reason)), "exit_code": types.Int64Value(int64(r.ExitCode)),
			"host_count": types.Int64Value(max(r.HostCount, int64(len(r.Hosts)))), "pod_name": types.StringValue(r.PodName),
			"node_name": types.StringValue(r.NodeName), "launch_attempts": types.Int64Value(int64(r.LaunchAttempts)),
			"timeline": timelineValue(r.Timeline, diags),
		})
		diags.Append(d...)
		elems = append(elems, obj)
	}
	l, d := types.ListValue(sliceResultType, elems)
	diags.Append(d...)
	return l
}

// adHocBundle is the run's ad_hoc as the bundle's; nil without one.
func adHocBundle(ctx context.Context, m runModel, diags *diag.Diagnostics) *bundle.AdHoc {
	if m.AdHoc.IsNull() || m.AdHoc.IsUnknown() {
		return nil
	}
	var a struct {
		Module  types.String `tfsdk:"module"`
		Args    types.String `tfsdk:"args"`
		Pattern types.String `tfsdk:"pattern"`
	}
	diags.Append(m.AdHoc.As(ctx, &a, basetypes.ObjectAsOptions{})...)
	return &bundle.AdHoc{Module: a.Module.ValueString(), Args: a.Args.ValueString(), Pattern: a.Pattern.ValueString()}
}

// logSlices writes each slice's end to Terraform's log.
func logSlices(ctx context.Context, id string, outs []sliceOutcome) {
	for _, s := range outs {
		fields := map[string]any{"run": id, "slice": s.Index, "slice_run": s.ID, "group": s.group, "status": s.Result().Status}
		if s.Err != nil {
			fields["error"] = s.Err.Error()
		}
		tflog.Info(ctx, "slice ended", fields)
	}
}

// sliceLine is a slice's end as the action's progress shows it.
func sliceLine(s sliceOutcome, of int) string {
	if s.Err != nil {
		return fmt.Sprintf("slice %d/%d did not start: %v", s.Index, of, s.Err)
	}
	return runner.SliceHeader(s.Index, of, s.Outcome.Result)
}
