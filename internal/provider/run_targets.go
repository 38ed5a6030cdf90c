// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/runengine"
)

// plannedTargetType is an element of a run's planned_targets.
var plannedTargetType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"container_group": types.StringType, "server": types.StringType, "ca_sha256": types.StringType, "pod_sha256": types.StringType,
}}

func plannedTargetsAttribute() schema.ListNestedAttribute {
	return schema.ListNestedAttribute{
		MarkdownDescription: "Where the run goes, per candidate group, which apply checks ([Security " +
			"model](../guides/security-model.md#what-the-plan-shows-and-what-apply-checks)).",
		Computed: true,
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"container_group": schema.StringAttribute{MarkdownDescription: "The group's name.", Computed: true},
			"server":          schema.StringAttribute{MarkdownDescription: "The API server URL of the group's credential.", Computed: true},
			"ca_sha256":       schema.StringAttribute{MarkdownDescription: "The SHA-256 of the credential's CA bundle; `system` or `insecure`.", Computed: true},
			"pod_sha256":      schema.StringAttribute{MarkdownDescription: "The SHA-256 of `rendered_pod`.", Computed: true},
		}},
	}
}

// plannedTarget is the planned_targets element of group name as planPod
// found it: t nil (the group is not known yet) leaves all but the name
// unknown, and so do clients not usable yet or a credential this apply
// changes for the cluster, and pod "" for the pod.
func plannedTarget(name string, t *runTarget, pod string) attr.Value {
	unknown := types.StringUnknown()
	server, ca, podSHA := unknown, unknown, unknown
	if t != nil && t.clients != nil && !t.credChanging {
		s, c := runengine.ClusterOf(t.clients.Config)
		server, ca = stringOrUnknown(s), stringOrUnknown(c)
	}
	if t != nil && pod != "" {
		podSHA = types.StringValue(runengine.PodSHA256(pod))
	}
	return types.ObjectValueMust(plannedTargetType.AttrTypes, map[string]attr.Value{
		"container_group": types.StringValue(name), "server": server, "ca_sha256": ca, "pod_sha256": podSHA,
	})
}

func stringOrUnknown(s string) types.String {
	if s == "" {
		return types.StringUnknown()
	}
	return types.StringValue(s)
}

// plannedTargets are the targets a run's plan showed, by group, for the
// engine to hold each candidate to: planned_targets, with rendered_pod's
// YAML for a diff when the plan knew it. Unknown values are "", which the
// engine does not compare; nil when the plan knew nothing.
func plannedTargets(plan runModel) map[string]*runengine.Target {
	pod := ""
	if !plan.RenderedPod.IsUnknown() && !plan.RenderedPod.IsNull() {
		pod = plan.RenderedPod.ValueString()
	}
	out := map[string]*runengine.Target{}
	if !plan.PlannedTargets.IsUnknown() && !plan.PlannedTargets.IsNull() {
		for _, v := range plan.PlannedTargets.Elements() {
			o, ok := v.(types.Object)
			if !ok || o.IsUnknown() || o.IsNull() {
				continue
			}
			a := o.Attributes()
			str := func(k string) string {
				s, _ := a[k].(types.String)
				return s.ValueString() // "" when unknown
			}
			out[str("container_group")] = &runengine.Target{Group: str("container_group"), Server: str("server"),
				CASHA256: str("ca_sha256"), PodSHA256: str("pod_sha256"), Pod: pod}
		}
	}
	if pod != "" {
		// A plan from before planned_targets: the pod, in every group.
		names, _ := groupNames(plan, runengine.OperationCreate)
		for _, n := range names {
			if out[n] == nil {
				out[n] = &runengine.Target{Group: n, Pod: pod}
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// targetsValue is planned_targets as apply found the targets.
func targetsValue(targets []runengine.Target, diags *diag.Diagnostics) types.List {
	elems := make([]attr.Value, 0, len(targets))
	for _, t := range targets {
		elems = append(elems, types.ObjectValueMust(plannedTargetType.AttrTypes, map[string]attr.Value{
			"container_group": types.StringValue(t.Group), "server": types.StringValue(t.Server),
			"ca_sha256": types.StringValue(t.CASHA256), "pod_sha256": types.StringValue(t.PodSHA256),
		}))
	}
	l, d := types.ListValue(plannedTargetType, elems)
	diags.Append(d...)
	return l
}

// withPlanned holds each candidate to its group's planned target.
func withPlanned(cands []runengine.Candidate, planned map[string]*runengine.Target) []runengine.Candidate {
	for i := range cands {
		cands[i].Planned = planned[cands[i].Group.Name]
	}
	return cands
}
