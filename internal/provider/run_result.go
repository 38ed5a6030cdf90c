package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
)

var failedTaskType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"host": types.StringType, "task": types.StringType, "message": types.StringType, "unreachable": types.BoolType,
}}

func failedTasksAttribute() schema.Attribute {
	return schema.ListAttribute{
		MarkdownDescription: fmt.Sprintf("The first %d tasks that failed or found their host unreachable, each `message` cut to %d characters.",
			bundle.MaxFailedTasks, bundle.MaxTaskMessage),
		Computed: true, ElementType: failedTaskType,
	}
}

func failedTaskCountAttribute() schema.Attribute {
	return schema.Int64Attribute{
		MarkdownDescription: fmt.Sprintf("How many tasks failed or found their host unreachable, of which `failed_tasks` "+
			"keeps the first %d.", bundle.MaxFailedTasks),
		Computed: true,
	}
}

func hostCountAttribute() schema.Attribute {
	return schema.Int64Attribute{
		MarkdownDescription: "How many hosts the play recap holds; `host_counts` counts them by how they ended.",
		Computed:            true,
	}
}

var hostStatsType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"ok": types.Int64Type, "changed": types.Int64Type, "unreachable": types.Int64Type, "failed": types.Int64Type,
	"skipped": types.Int64Type, "rescued": types.Int64Type, "ignored": types.Int64Type,
}}

// hostStatsBytes is what one host's recap in host_stats adds to the state
// file: with 1,000 hosts named as host-0000.example.com, terraform.tfstate
// grew by 265,011 bytes (TestAccRun_manyHosts with KUBEPLAY_TEST_HOSTS=1000,
// KUBEPLAY_TEST_RECORD_ALL_HOSTS=1 and TF_ACC_PERSIST_WORKING_DIR=1; 108
// bytes a host in terraform show -json, 320 as flat attributes).
const hostStatsBytes = 265

func hostStatsAttribute() schema.Attribute {
	return schema.MapAttribute{
		MarkdownDescription: fmt.Sprintf("The play recap of each host that failed or was unreachable, the first %d by name; with "+
			"`record_all_hosts`, of every host, the first %d.",
			bundle.MaxFailedHosts, bundle.MaxHosts),
		Computed: true, ElementType: hostStatsType,
	}
}

func recordAllHostsAttribute() schema.Attribute {
	return schema.BoolAttribute{
		MarkdownDescription: fmt.Sprintf("Whether `host_stats` keeps the recap of every host (the first %d), not only of those that failed; "+
			"about %d bytes of state per host (%d KB per 1,000). Defaults to `false`.", bundle.MaxHosts, hostStatsBytes, (hostStatsBytes*1000/1024+5)/10*10),
		Optional: true, Computed: true, Default: booldefault.StaticBool(false),
	}
}

var hostCountsType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"ok": types.Int64Type, "changed": types.Int64Type, "failed": types.Int64Type, "unreachable": types.Int64Type,
	"rescued": types.Int64Type, "ignored": types.Int64Type,
}}

func hostCountsAttribute() schema.Attribute {
	count := func(d string) schema.Attribute {
		return schema.Int64Attribute{MarkdownDescription: d, Computed: true}
	}
	return schema.SingleNestedAttribute{
		MarkdownDescription: "How many hosts ended each way; `failed`, `unreachable`, `changed` and `ok` add up to `host_count`.",
		Computed:            true,
		Attributes: map[string]schema.Attribute{
			"ok":          count("Hosts neither failed, unreachable nor changed."),
			"changed":     count("Hosts changed, but not failed or unreachable."),
			"failed":      count("Hosts with a failed task (not rescued or ignored)."),
			"unreachable": count("Hosts unreachable, but not failed."),
			"rescued":     count("Hosts with a failure a `rescue` handled."),
			"ignored":     count("Hosts with a failure `ignore_errors` ignored."),
		},
	}
}

// hostStatsValue is hosts as host_stats.
func hostStatsValue(hosts map[string]bundle.HostStats, diags *diag.Diagnostics) types.Map {
	stats := make(map[string]attr.Value, len(hosts))
	for host, s := range hosts {
		obj, d := types.ObjectValue(hostStatsType.AttrTypes, map[string]attr.Value{
			"ok": types.Int64Value(s.OK), "changed": types.Int64Value(s.Changed), "unreachable": types.Int64Value(s.Unreachable),
			"failed": types.Int64Value(s.Failed), "skipped": types.Int64Value(s.Skipped), "rescued": types.Int64Value(s.Rescued),
			"ignored": types.Int64Value(s.Ignored),
		})
		diags.Append(d...)
		stats[host] = obj
	}
	hs, d := types.MapValue(hostStatsType, stats)
	diags.Append(d...)
	return hs
}

// hostStatsModel is one host's recap as host_stats holds it.
type hostStatsModel struct {
	OK          int64 `tfsdk:"ok"`
	Changed     int64 `tfsdk:"changed"`
	Unreachable int64 `tfsdk:"unreachable"`
	Failed      int64 `tfsdk:"failed"`
	Skipped     int64 `tfsdk:"skipped"`
	Rescued     int64 `tfsdk:"rescued"`
	Ignored     int64 `tfsdk:"ignored"`
}

// keptHostStats is the host_stats a run keeps when record_all_hosts changes
// from was to now in place: turned off (or from a state without it), only the
// hosts that failed or were unreachable; else as it is, since the hosts that
// were left out are known only to a new run. Unknown while now is.
func keptHostStats(ctx context.Context, hs types.Map, was, now types.Bool, diags *diag.Diagnostics) types.Map {
	switch {
	case now.IsUnknown():
		return types.MapUnknown(hostStatsType)
	case now.ValueBool() || was.Equal(types.BoolValue(false)) || hs.IsNull() || hs.IsUnknown():
		return hs
	}
	var all map[string]hostStatsModel
	if diags.Append(hs.ElementsAs(ctx, &all, false)...); diags.HasError() {
		return hs
	}
	hosts := make(map[string]bundle.HostStats, len(all))
	for h, s := range all {
		hosts[h] = bundle.HostStats(s)
	}
	return hostStatsValue(bundle.FailedHosts(hosts), diags)
}

// carriedHostCounts is the host_counts a run keeps on an update in place:
// its own, or for a run recorded before host_counts, the counts of the
// host_stats it recorded then (every host, up to bundle.MaxHosts).
func carriedHostCounts(ctx context.Context, counts types.Object, hs types.Map, diags *diag.Diagnostics) types.Object {
	if !counts.IsNull() || hs.IsNull() || hs.IsUnknown() {
		return counts
	}
	var all map[string]hostStatsModel
	if diags.Append(hs.ElementsAs(ctx, &all, false)...); diags.HasError() {
		return counts
	}
	hosts := make(map[string]bundle.HostStats, len(all))
	for h, s := range all {
		hosts[h] = bundle.HostStats(s)
	}
	return hostCountsValue(bundle.CountHosts(hosts), diags)
}

func hostCountsValue(c bundle.HostCounts, diags *diag.Diagnostics) types.Object {
	obj, d := types.ObjectValue(hostCountsType.AttrTypes, map[string]attr.Value{
		"ok": types.Int64Value(c.OK), "changed": types.Int64Value(c.Changed), "failed": types.Int64Value(c.Failed),
		"unreachable": types.Int64Value(c.Unreachable), "rescued": types.Int64Value(c.Rescued), "ignored": types.Int64Value(c.Ignored),
	})
	diags.Append(d...)
	return obj
}

func artifactsAttribute() schema.Attribute {
	return schema.StringAttribute{
		MarkdownDescription: fmt.Sprintf("What the playbook set with `set_stats`, as a JSON object; over %d MiB (or a result over %d MiB) ends "+
			"the run as `error`.", bundle.MaxArtifacts>>20, bundle.MaxResultSize>>20),
		Computed: true,
	}
}

// recordResult puts the hosts, the failed tasks and the artifacts into the
// model: host_stats per record_all_hosts.
func recordResult(m *runModel, res runner.Result, diags *diag.Diagnostics) {
	hosts := res.FailedHosts
	if m.RecordAllHosts.ValueBool() {
		hosts = res.Hosts
	}
	m.HostStats, m.HostCounts = hostStatsValue(hosts, diags), hostCountsValue(res.HostCounts, diags)
	m.HostCount = types.Int64Value(max(res.HostCount, int64(len(res.Hosts))))
	tasks := make([]attr.Value, 0, len(res.FailedTasks))
	for _, t := range res.FailedTasks {
		obj, d := types.ObjectValue(failedTaskType.AttrTypes, map[string]attr.Value{
			"host": types.StringValue(t.Host), "task": types.StringValue(t.Task),
			"message": types.StringValue(t.Message), "unreachable": types.BoolValue(t.Unreachable),
		})
		diags.Append(d...)
		tasks = append(tasks, obj)
	}
	list, d := types.ListValue(failedTaskType, tasks)
	diags.Append(d...)
	m.FailedTasks, m.FailedTaskCount = list, types.Int64Value(res.FailedTaskCount)
	m.Artifacts = types.StringValue(res.Artifacts)
	if res.Artifacts == "" {
		m.Artifacts = types.StringValue("{}")
	}
}
