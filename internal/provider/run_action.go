// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	atimeouts "github.com/hashicorp/terraform-plugin-framework-timeouts/action/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/action"
	aschema "github.com/hashicorp/terraform-plugin-framework/action/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/outputtail"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runengine"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
)

var (
	_ action.Action                   = (*runAction)(nil)
	_ action.ActionWithConfigure      = (*runAction)(nil)
	_ action.ActionWithValidateConfig = (*runAction)(nil)
)

// progressDelay is how far behind the output the action's progress may be.
const progressDelay = 250 * time.Millisecond

// runAction runs a playbook as kubeplay_run does, with the run resource's
// inputs, and streams its progress to Terraform instead of recording it.
type runAction struct {
	run runResource
}

func newRunAction() action.Action { return &runAction{} }

func (a *runAction) Metadata(_ context.Context, req action.MetadataRequest, resp *action.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_run"
}

const runActionDescription = "Runs one Ansible playbook (or a plain command) in an ephemeral pod of a `kubeplay_container_group`, " +
	"exactly as the `kubeplay_run` resource does, but records nothing: an action runs when invoked, with " +
	"`terraform apply -invoke=action.kubeplay_run.NAME` (Terraform 1.14 or later), or from an " +
	"`action_trigger` in a resource's `lifecycle`. Terraform shows its progress: the pod's start, each " +
	"output line, the play recap and the final status. The pod is deleted whatever happens, unless " +
	"`keep_pod_on_failure` keeps it." + "\n\n" +
	"A run that is not `successful` is an error quoting the output's last lines and the pod's warning " +
	"events (a warning with `ignore_failure`). In an `action_trigger`, `on_failure` decides what it does: " +
	"`halt` (the default) fails the apply and stops further actions; `taint` also taints a resource just " +
	"created; `continue` makes it a warning." + "\n\n" +
	"An action has no plan of its pod (`rendered_pod`, `planned_targets`): it uses its group and node " +
	"label as the catalog holds them when it runs, refusing any changed outside kubeplay. Use the " +
	"resource when the pod that runs must be the one a reviewed plan showed." + "\n\n" +
	"The inputs are the resource's, with its names, defaults and validation, but for `triggers`, " +
	"`destroy_playbook`, `plan_check`, `plan_check_diffs` and `rerun_failed_hosts`, which have no meaning " +
	"for an action, and its `timeouts` block, whose `create` is the action's `timeouts.invoke`."

// runActionOnly are the resource's inputs that an action has no use for.
var runActionOnly = []string{"triggers", "destroy_playbook", "plan_check", "plan_check_diffs", "rerun_failed_hosts"}

func (a *runAction) Schema(ctx context.Context, _ action.SchemaRequest, resp *action.SchemaResponse) {
	var rs resource.SchemaResponse
	(&runResource{}).Schema(ctx, resource.SchemaRequest{}, &rs)
	attrs := map[string]aschema.Attribute{}
	for name, attr := range rs.Schema.Attributes {
		if slices.Contains(runActionOnly, name) || (!attr.IsOptional() && !attr.IsRequired()) {
			continue
		}
		if v, ok := actionAttribute(attr, runActionAttributeDescription(name, attr)); ok {
			attrs[name] = v
		}
	}
	resp.Schema = aschema.Schema{MarkdownDescription: runActionDescription, Attributes: attrs,
		Blocks: map[string]aschema.Block{
			"timeouts": actionTimeoutsBlock(ctx, atimeouts.Opts{
				InvokeDescription: "How long the run may take, from claiming capacity until its pod is gone, as a duration; its pod's " +
					"`activeDeadlineSeconds` is this plus 2 seconds. A run past it ends `error`. Defaults to `30m`.",
			}),
		}}
}

func (a *runAction) Configure(_ context.Context, req action.ConfigureRequest, resp *action.ConfigureResponse) {
	a.run.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (a *runAction) ValidateConfig(ctx context.Context, req action.ValidateConfigRequest, resp *action.ValidateConfigResponse) {
	cfg := asRunConfig(ctx, req.Config, &resp.Diagnostics)
	if !resp.Diagnostics.HasError() {
		validateRunConfig(ctx, cfg, &resp.Diagnostics)
	}
}

func (a *runAction) Invoke(ctx context.Context, req action.InvokeRequest, resp *action.InvokeResponse) {
	m, timeout := a.model(ctx, req.Config, &resp.Diagnostics)
	if resp.Diagnostics.HasError() || a.run.data == nil {
		return
	}
	// The action has no plan to match: take the project as it is now.
	m.ID, m.ProjectHash = types.StringValue(runengine.NewID()), types.StringUnknown()
	if !resolveProject(ctx, &m, false, &resp.Diagnostics) {
		return
	}
	p := &progress{send: resp.SendProgress}
	p.event(fmt.Sprintf("run %s starting", m.ID.ValueString()))
	out, ok := a.run.execute(ctx, m, m, runengine.OperationCreate, m.Playbook.ValueString(), timeout,
		runHooks{onLine: p.line, onEvent: p.event}, &resp.Diagnostics)
	if ok {
		p.event(fmt.Sprintf("run %s ran in container group %q", m.ID.ValueString(), out.group))
		for _, s := range out.slices {
			p.event(sliceLine(s, len(out.slices)))
		}
		p.finish(out.Result, m.RecordAllHosts.ValueBool())
	}
	p.close()
	if ok {
		a.run.report(m, out.Result, "Run", "timeouts.invoke", &resp.Diagnostics)
	}
}

// model reads the action's config as the resource's model, with the
// resource's defaults, and the run's timeout.
func (a *runAction) model(ctx context.Context, config tfsdk.Config, diags *diag.Diagnostics) (runModel, time.Duration) {
	var m runModel
	cfg := asRunConfig(ctx, config, diags)
	if diags.HasError() {
		return m, 0
	}
	diags.Append(cfg.Get(ctx, &m)...)
	var t atimeouts.Value
	diags.Append(config.GetAttribute(ctx, path.Root("timeouts"), &t)...)
	d, ds := t.Invoke(ctx, defaultRunTimeout)
	diags.Append(ds...)
	if d <= 0 { // validation refuses it; never a deadline already past
		d = defaultRunTimeout
	}
	return m, d
}

// progress sends a run's progress to Terraform: output lines in batches at
// most progressDelay behind, events at once and in order with the lines.
type progress struct {
	mu     sync.Mutex
	send   func(action.InvokeProgressEvent)
	lines  []string
	timer  *time.Timer
	closed bool
}

func (p *progress) line(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lines = append(p.lines, s)
	if p.timer == nil && !p.closed {
		p.timer = time.AfterFunc(progressDelay, p.tick)
	}
}

func (p *progress) tick() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.timer = nil
	p.flush()
}

// flush sends the batched lines; p.mu is held.
func (p *progress) flush() {
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	if len(p.lines) > 0 && !p.closed && p.send != nil {
		p.send(action.InvokeProgressEvent{Message: outputtail.Sanitize(strings.Join(p.lines, "\n"))})
	}
	p.lines = nil
}

func (p *progress) event(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.flush()
	if !p.closed && p.send != nil {
		p.send(action.InvokeProgressEvent{Message: outputtail.Sanitize(s)}) // a status quotes pod output
	}
}

// close sends what is left; nothing is sent after it, since Terraform's
// stream ends with Invoke.
func (p *progress) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.flush()
	p.closed = true
}

// finish sends the play recap, the run's status and its timeline.
func (p *progress) finish(res runner.Result, allHosts bool) {
	if r := recap(res, allHosts); r != "" {
		p.event(r)
	}
	status := fmt.Sprintf("status: %s (exit code %d)", res.Status, res.ExitCode)
	if res.Reason != "" {
		status = fmt.Sprintf("status: %s, %s (exit code %d)", res.Status, res.Reason, res.ExitCode)
	}
	if res.PodName != "" {
		status += fmt.Sprintf(", pod %s", res.PodName)
	}
	if res.NodeName != "" {
		status += " on node " + res.NodeName
	}
	if res.Message != "" {
		status += ": " + res.Message
	}
	p.event(status)
	if len(res.Timeline) > 0 {
		p.event("timeline: " + runner.Summary(res.Timeline))
	}
}

// recap is the play recap as the action shows it, as the resource keeps it:
// the hosts counted by how they ended, then the hosts that failed or were
// unreachable, or every host with allHosts; "" without a recap (a command).
func recap(res runner.Result, allHosts bool) string {
	if res.HostCount == 0 && len(res.Hosts) == 0 {
		return ""
	}
	c := res.HostCounts
	var b strings.Builder
	fmt.Fprintf(&b, "recap: %d %s: %d ok, %d changed, %d failed, %d unreachable", res.HostCount,
		plural(res.HostCount, "host", "hosts"), c.OK, c.Changed, c.Failed, c.Unreachable)
	if c.Rescued > 0 || c.Ignored > 0 {
		fmt.Fprintf(&b, " (%d with rescued tasks, %d with ignored errors)", c.Rescued, c.Ignored)
	}
	hosts, of, what := res.FailedHosts, c.Failed+c.Unreachable, " that failed or were unreachable"
	if allHosts {
		hosts, of, what = res.Hosts, res.HostCount, ""
	}
	for _, host := range slices.Sorted(maps.Keys(hosts)) {
		s := hosts[host]
		fmt.Fprintf(&b, "\n  %s: ok=%d changed=%d unreachable=%d failed=%d skipped=%d rescued=%d ignored=%d",
			host, s.OK, s.Changed, s.Unreachable, s.Failed, s.Skipped, s.Rescued, s.Ignored)
	}
	if more := of - int64(len(hosts)); more > 0 {
		fmt.Fprintf(&b, "\n  and %d more %s%s", more, plural(more, "host", "hosts"), what)
	}
	return b.String()
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
