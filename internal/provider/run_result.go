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
		MarkdownDescription: fmt.Sprintf("The tasks that failed, in the order they failed: for each, `host`, `task` (its "+
			"name), `message` (the result's `msg`, else its `reason`, `stderr` or `exception`; cut to %d characters, "+
			"ending with `...`) and `unreachable` (the task could not reach its host, rather than failed on it). "+
			"Failures under `ignore_errors`, and unreachable hosts under `ignore_unreachable`, are left out (the play "+
			"recap counts them as `ignored`). At most the first %d are kept; "+
			"`failed_task_count` counts them all. Values of `extra_vars_wo` and `env_wo` are redacted as in `output`. "+
			"Read, like `host_stats`, from a callback plugin, on a channel of its own rather than from the output. "+
			"Empty in command mode.", bundle.MaxTaskMessage, bundle.MaxFailedTasks),
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
		MarkdownDescription: "The data the playbook set with `set_stats` for the whole run, as a JSON object: AWX's " +
			"job artifacts. As in Ansible, `aggregate: true` (the default) merges a key's new value into the old, " +
			"`aggregate: false` replaces it; data set with `per_host: true` belong to each host, not to the run, and are " +
			"left out, as AWX leaves them out of a job's artifacts. `{}` when the playbook set none, and in command " +
			"mode. Read with `jsondecode`. Values of `extra_vars_wo` and `env_wo` are redacted as in `output` (a secret " +
			fmt.Sprintf("number becomes the string `\"(sensitive value)\"`). Artifacts over %d MiB, or a result "+
				"document over %d MiB, end the run as `error`.", bundle.MaxArtifacts>>20, bundle.MaxResultSize>>20),
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
