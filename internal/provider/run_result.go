package provider

import (
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
)

var failedTaskType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"host": types.StringType, "task": types.StringType, "message": types.StringType, "unreachable": types.BoolType,
}}

func failedTasksAttribute() schema.Attribute {
	return schema.ListAttribute{
		MarkdownDescription: fmt.Sprintf("The tasks that failed or found their host unreachable, in order, but "+
			"for those under `ignore_errors` or `ignore_unreachable`: the first %d (`failed_task_count` counts them "+
			"all), each `message` the result's `msg`, else `reason`, `stderr` or `exception`, cut to %d characters.",
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
		MarkdownDescription: fmt.Sprintf("How many hosts the play recap holds, of which `host_stats` keeps the first %d "+
			"by name.", bundle.MaxHosts),
		Computed: true,
	}
}

func artifactsAttribute() schema.Attribute {
	return schema.StringAttribute{
		MarkdownDescription: fmt.Sprintf("What the playbook set with `set_stats` for the run (AWX's job "+
			"artifacts, without `per_host` data), as a JSON object, `{}` when none. Artifacts over %d MiB, or a "+
			"result over %d MiB, end the run as `error`.", bundle.MaxArtifacts>>20, bundle.MaxResultSize>>20),
		Computed: true,
	}
}

// recordResult puts the failed tasks and the artifacts into the model.
func recordResult(m *runModel, res runner.Result, diags *diag.Diagnostics) {
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
