// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
)

var timelineStepType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"step": types.StringType, "started_at": types.StringType, "seconds": types.Float64Type, "detail": types.StringType,
}}

// stepMeanings say what each timeline step covers, for the documentation.
var stepMeanings = map[string]string{
	runner.StepQueued:    "rendering the pod and waiting for the group's capacity",
	runner.StepNamespace: "making a namespace label's run namespace",
	runner.StepClaim:     "taking a warm pod or a held node's turn",
	runner.StepCreate:    "creating the pod, with quota waits",
	runner.StepSchedule:  "waiting for a node (`detail` quotes the scheduler)",
	runner.StepSandbox:   "starting the container, but for the image's pull",
	runner.StepImage:     fmt.Sprintf("the image's pull, measured only for a pod that took %s or more to run", runner.PullCheckAfter),
	runner.StepDeliver:   "delivering the playbook, files and project",
	runner.StepPlaybook:  "`ansible-playbook` or the command",
	runner.StepCleanup:   "deleting the pod",
}

func timelineAttribute() schema.Attribute {
	return schema.ListNestedAttribute{
		MarkdownDescription: "Where the run's time went, as [steps](#timeline-steps).",
		Computed:            true,
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"step":       schema.StringAttribute{MarkdownDescription: "The step's name.", Computed: true},
			"started_at": schema.StringAttribute{MarkdownDescription: "When the step began (RFC 3339, with milliseconds).", Computed: true},
			"seconds":    schema.Float64Attribute{MarkdownDescription: "How long the step lasted, in seconds, to the millisecond.", Computed: true},
			"detail":     schema.StringAttribute{MarkdownDescription: "What the step waited for, or which pod it claimed; may be empty.", Computed: true},
		}},
	}
}

// timelineStepsMarkdown is the list of timeline steps that the run's page
// gives under Timeline Steps (TestDocsRunStatusReasons keeps them equal).
func timelineStepsMarkdown() string {
	var b strings.Builder
	for _, s := range runner.Steps {
		fmt.Fprintf(&b, "- `%s`: %s.\n", s, stepMeanings[s])
	}
	return b.String()
}

// statusReasonsMarkdown is the list of runner.Reasons that the run's page
// gives under Status Reasons (TestDocsRunStatusReasons keeps them equal).
func statusReasonsMarkdown() string {
	var b strings.Builder
	for _, r := range runner.Reasons {
		fmt.Fprintf(&b, "- `%s`: %s", r.Reason, r.Meaning)
		if r.Retried {
			b.WriteString(" *Retried.*")
		}
		b.WriteString("\n")
	}
	return b.String()
}

func statusReasonAttribute() schema.Attribute {
	return schema.StringAttribute{
		MarkdownDescription: "Why a run that did not succeed ended as it did, one of the [Status Reasons](#status-reasons); null " +
			"for a successful run.",
		Computed: true,
	}
}

// timelineValue is steps as the timeline attribute.
func timelineValue(steps []runner.Step, diags *diag.Diagnostics) types.List {
	elems := make([]attr.Value, 0, len(steps))
	for _, s := range steps {
		obj, d := types.ObjectValue(timelineStepType.AttrTypes, map[string]attr.Value{
			"step": types.StringValue(s.Name), "started_at": types.StringValue(s.Start.UTC().Format("2006-01-02T15:04:05.000Z07:00")),
			"seconds": types.Float64Value(float64(s.Duration.Milliseconds()) / 1000), "detail": types.StringValue(s.Detail),
		})
		diags.Append(d...)
		elems = append(elems, obj)
	}
	l, d := types.ListValue(timelineStepType, elems)
	diags.Append(d...)
	return l
}

// logTimeline writes the run's timeline to Terraform's log at INFO: one
// line with the summary, and each step as a field.
func logTimeline(ctx context.Context, id string, res runner.Result) {
	fields := map[string]any{"run": id, "status": res.Status, "warm": res.Warm}
	if res.Reason != "" {
		fields["reason"] = string(res.Reason)
	}
	sums := map[string]time.Duration{}
	var total time.Duration
	for _, s := range res.Timeline {
		sums[s.Name] += s.Duration // a repeated step (a launch retry) adds up
		total += s.Duration
	}
	for name, d := range sums {
		fields["seconds_"+name] = d.Seconds()
	}
	fields["seconds_total"] = total.Seconds()
	tflog.Info(ctx, "run timeline: "+runner.Summary(res.Timeline), fields)
}
