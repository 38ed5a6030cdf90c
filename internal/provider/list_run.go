// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/list"
	listschema "github.com/hashicorp/terraform-plugin-framework/list/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runengine"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
)

var _ list.ListResourceWithConfigure = (*runList)(nil)

// runList lists a group's run pods, live and orphaned, as kubeplay_run
// results: what a killed process left behind is found with `terraform
// query`. A run cannot be imported; its results are for finding leaks.
type runList struct {
	data *providerData
}

func newRunList() list.ListResource { return &runList{} }

type runListModel struct {
	ContainerGroup types.String `tfsdk:"container_group"`
}

func (l *runList) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_run"
}

func (l *runList) ListResourceConfigSchema(_ context.Context, _ list.ListResourceSchemaRequest, resp *list.ListResourceSchemaResponse) {
	resp.Schema = listschema.Schema{
		MarkdownDescription: "Lists the run pods of a container group, for `terraform query`: each result is named `run <id> " +
			"(<liveness>, <pod phase>, <age>)`. Liveness is `live` (its process renews its claim in the group's " +
			"ledger), `orphaned` (no process will delete it), `deleting`, or `running` (the group has no ledger " +
			"to tell by). With `include_resource = true` a result carries `id`, `container_group`, `pod_name`, " +
			"`node_name` and `started_at` (the pod's creation).\n\nAfter the pods come the group's last runs that " +
			"ended, newest first, from the records its ledgers keep (a group with `max_concurrent_runs` or " +
			"`max_forks` keeps its last 50): each is named `run <id> (ended <status>[: <status_reason>][, warm], " +
			"<age> ago; to start <s>: queued <s>, scheduling <s>, image <s>, start <s>; playbook <s>)`, the parts " +
			"as in the container group data source's `start_figures`, and with `include_resource = true` carries " +
			"`id`, `container_group`, `status`, `status_reason`, `started_at`, `finished_at` and `timeline` " +
			"(without details). Whoever may write the ledgers may write records: they are informative only.\n\nA " +
			"run cannot be imported: configuration generated from these results is for finding leaked pods, not " +
			"for import.",
		Attributes: map[string]listschema.Attribute{
			"container_group": listschema.StringAttribute{
				MarkdownDescription: "The container group whose run pods to list.",
				Required:            true,
			},
		},
	}
}

func (l *runList) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	l.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (l *runList) List(ctx context.Context, req list.ListRequest, stream *list.ListResultsStream) {
	var cfg runListModel
	diags := req.Config.Get(ctx, &cfg)
	var pods []runengine.RunPod
	var ended []runengine.RunRecord
	if !diags.HasError() {
		pods, ended = l.runs(ctx, cfg.ContainerGroup.ValueString(), &diags)
	}
	if diags.HasError() {
		stream.Results = list.ListResultsStreamDiagnostics(diags)
		return
	}
	now := time.Now()
	group := cfg.ContainerGroup.ValueString()
	stream.Results = func(push func(list.ListResult) bool) {
		n := int64(0)
		more := func() bool { n++; return req.Limit <= 0 || n <= req.Limit }
		live := map[string]bool{}
		for _, p := range pods {
			live[p.RunID] = true
			if !more() || !push(runResult(ctx, req, group, p, now)) {
				return
			}
		}
		for _, r := range ended {
			if live[r.ID] {
				continue
			}
			if !more() || !push(endedResult(ctx, req, group, r, now)) {
				return
			}
		}
	}
}

// runs lists the group's run pods on its cluster, and the records of its
// last runs that its ledgers keep, newest first.
func (l *runList) runs(ctx context.Context, group string, diags *diag.Diagnostics) ([]runengine.RunPod, []runengine.RunRecord) {
	g, err := readDefinition(ctx, l.data, (*catalog.Store).TrustedGroup, group)
	if err == nil && g == nil {
		addNotFound(diags, catalog.KindGroup, group, l.data.catalogNamespace)
		return nil, nil
	}
	if err != nil {
		addCatalogError(diags, err)
		return nil, nil
	}
	c, err := l.data.credentialClients(ctx, g.Credential)
	if err != nil {
		diags.AddAttributeError(path.Root("container_group"), "Cluster Unavailable",
			fmt.Sprintf("Container group %q: %v. Check that the group's credential exists in the catalog and can "+
				"reach its cluster.", group, err))
		return nil, nil
	}
	pods, err := runengine.RunPods(ctx, c.Kube, engineGroup(g), time.Now())
	if err != nil {
		diags.AddError("Listing Run Pods Failed", fmt.Sprintf("Container group %q, namespace %s: %v. Check that the "+
			"group's credential may list pods and read ConfigMaps there.", group, g.Namespace, err))
		return nil, nil
	}
	ended, err := recentRuns(ctx, c.Kube, g)
	if err != nil {
		diags.AddWarning("Recent Runs Not Read", fmt.Sprintf("Container group %q, namespace %s: %v. The results "+
			"list its run pods only.", group, g.Namespace, err))
	}
	return pods, ended
}

// endedResult is a run the group's ledger recorded as a kubeplay_run
// result, named by how it ended and where its time went.
func endedResult(ctx context.Context, req list.ListRequest, group string, r runengine.RunRecord, now time.Time) list.ListResult {
	res := req.NewListResult(ctx)
	how := r.Status
	if r.Reason != "" {
		how += ": " + r.Reason
	}
	if r.Warm {
		how += ", warm"
	}
	res.DisplayName = fmt.Sprintf("run %s (ended %s, %s ago; to start %.1fs: queued %.1fs, scheduling %.1fs, image %.1fs, "+
		"start %.1fs; playbook %.1fs)", r.ID, how, age(now.Sub(r.Ended)), r.Seconds(runengine.PartToStart...),
		r.Seconds(runengine.PartQueued...), r.Seconds(runengine.PartScheduling...), r.Seconds(runengine.PartImage...),
		r.Seconds(runengine.PartStart...), r.Seconds(runner.StepPlaybook))
	res.Diagnostics.Append(res.Identity.SetAttribute(ctx, path.Root("container_group"), group)...)
	res.Diagnostics.Append(res.Identity.SetAttribute(ctx, path.Root("run_id"), r.ID)...)
	if req.IncludeResource {
		steps := r.Timeline()
		started := r.Ended
		if len(steps) > 0 {
			started = steps[0].Start
		}
		reason := types.StringNull()
		if r.Reason != "" {
			reason = types.StringValue(r.Reason)
		}
		for name, v := range map[string]attr.Value{
			"id": types.StringValue(r.ID), "container_group": types.StringValue(group), "status": types.StringValue(r.Status),
			"status_reason": reason, "started_at": types.StringValue(started.UTC().Format(time.RFC3339)),
			"finished_at": types.StringValue(r.Ended.UTC().Format(time.RFC3339)), "timeline": timelineValue(steps, &res.Diagnostics),
		} {
			res.Diagnostics.Append(res.Resource.SetAttribute(ctx, path.Root(name), v)...)
		}
	}
	return res
}

// runResult is one run pod as a kubeplay_run result.
func runResult(ctx context.Context, req list.ListRequest, group string, p runengine.RunPod, now time.Time) list.ListResult {
	res := req.NewListResult(ctx)
	res.DisplayName = fmt.Sprintf("run %s (%s, %s, %s)", p.RunID, p.Liveness, p.Phase, age(now.Sub(p.Created)))
	res.Diagnostics.Append(res.Identity.SetAttribute(ctx, path.Root("container_group"), group)...)
	res.Diagnostics.Append(res.Identity.SetAttribute(ctx, path.Root("run_id"), p.RunID)...)
	if req.IncludeResource {
		for name, v := range map[string]types.String{
			"id": types.StringValue(p.RunID), "container_group": types.StringValue(group), "pod_name": types.StringValue(p.Name),
			"node_name": stringOrNull(p.Node), "started_at": types.StringValue(p.Created.UTC().Format(time.RFC3339)),
		} {
			res.Diagnostics.Append(res.Resource.SetAttribute(ctx, path.Root(name), v)...)
		}
	}
	return res
}

// age is a duration as kubectl shows a pod's age: 45s, 12m, 3h, 2d.
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
