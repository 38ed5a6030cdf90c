// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/action"
	aschema "github.com/hashicorp/terraform-plugin-framework/action/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
)

func runActionSchema(t *testing.T) aschema.Schema {
	t.Helper()
	var resp action.SchemaResponse
	newRunAction().Schema(context.Background(), action.SchemaRequest{}, &resp)
	if resp.Diagnostics.HasError() {
		t.Fatal(resp.Diagnostics)
	}
	if diags := resp.Schema.ValidateImplementation(context.Background()); diags.HasError() {
		t.Fatal(diags)
	}
	return resp.Schema
}

// TestRunActionSchema_matchesResource: every input of the run resource is
// an input of the action, with the same type and flags, so that the two
// cannot drift apart; the action has nothing else but its timeouts block.
func TestRunActionSchema_matchesResource(t *testing.T) {
	as := runActionSchema(t)
	var rs resource.SchemaResponse
	newRunResource().Schema(context.Background(), resource.SchemaRequest{}, &rs)
	inputs := 0
	for name, ra := range rs.Schema.Attributes {
		if !ra.IsOptional() && !ra.IsRequired() {
			if _, ok := as.Attributes[name]; ok {
				t.Errorf("the output attribute %s is in the action", name)
			}
			continue
		}
		aa, ok := as.Attributes[name]
		switch {
		case slices.Contains(runActionOnly, name):
			if ok {
				t.Errorf("%s is resource-only but in the action", name)
			}
			continue
		case !ok:
			t.Errorf("the resource's input %s is not in the action", name)
			continue
		}
		inputs++
		if aa.IsRequired() != ra.IsRequired() ||
			aa.IsOptional() != ra.IsOptional() || aa.IsWriteOnly() != ra.IsWriteOnly() {
			t.Errorf("%s differs between the resource and the action", name)
		}
		if !aa.GetType().Equal(ra.GetType()) {
			t.Errorf("%s: type %s in the action, %s in the resource", name, aa.GetType(), ra.GetType())
		}
	}
	if _, ok := rs.Schema.Blocks["timeouts"]; !ok || as.Blocks["timeouts"] == nil || len(as.Blocks) != 1 {
		t.Error("the resource's timeouts block should be the action's, with invoke for create")
	}
	if len(as.Attributes) != inputs {
		t.Errorf("the action has %d attributes, want the resource's %d inputs", len(as.Attributes), inputs)
	}
	if inputs < 30 {
		t.Errorf("only %d inputs compared", inputs)
	}
}

// resourceOnlyWording is what the resource's descriptions say that is not
// true of an action: what it records, replacement, the resource's own
// attributes, and links to sections of the resource's page.
var resourceOnlyWording = regexp.MustCompile(`[Rr]eplaces|in place|the state|recorded|triggers|destroy_playbook|` +
	"`output`|`pod_name`|`run_namespace`|`rendered_pod`|\\]\\(#")

// TestRunActionSchema_descriptions: each input of the action has a
// description of its own, one sentence that fits an action and a link to
// the resource's, but for those runActionDescriptions leaves to the
// resource; none says what only the resource does.
func TestRunActionSchema_descriptions(t *testing.T) {
	as := runActionSchema(t)
	var rs resource.SchemaResponse
	newRunResource().Schema(context.Background(), resource.SchemaRequest{}, &rs)
	own := 0
	for name, aa := range as.Attributes {
		d := aa.GetMarkdownDescription()
		if m := resourceOnlyWording.FindString(d); m != "" {
			t.Errorf("the action's %s says %q, which is about the resource: %s", name, m, d)
		}
		ra, ok := rs.Schema.Attributes[name]
		if !ok {
			t.Errorf("the action's %s is no input of the resource", name)
			continue
		}
		if _, mapped := runActionDescriptions[name]; !mapped {
			if d != actionDescription(ra.GetMarkdownDescription()) {
				t.Errorf("the action's %s should have the resource's description: %s", name, d)
			}
			continue
		}
		own++
		if d == ra.GetMarkdownDescription() || !strings.Contains(d, "(../resources/run.md#"+name+")") {
			t.Errorf("the action's %s should have its own description and link the resource's: %s", name, d)
		}
	}
	for name := range runActionDescriptions {
		if _, ok := as.Attributes[name]; !ok {
			t.Errorf("runActionDescriptions describes %s, which the action does not have", name)
		}
	}
	if own < 33 {
		t.Errorf("only %d of the action's inputs have descriptions of their own", own)
	}
}

// TestRunAction_model reads an action config as the resource's model: the
// resource's defaults fill what the config leaves null, and the lists
// (tags, skip_tags, limit) reach ansible-playbook's arguments.
func TestRunAction_model(t *testing.T) {
	ctx := context.Background()
	s := runActionSchema(t)
	typ, ok := s.Type().TerraformType(ctx).(tftypes.Object)
	if !ok {
		t.Fatal("the action's schema is not an object")
	}
	vals := map[string]tftypes.Value{}
	for name, at := range typ.AttributeTypes {
		vals[name] = tftypes.NewValue(at, nil)
	}
	vals["container_group"] = tftypes.NewValue(tftypes.String, "g")
	vals["forks"] = tftypes.NewValue(tftypes.Number, 3)
	vals["timeouts"] = tftypes.NewValue(tftypes.Object{AttributeTypes: map[string]tftypes.Type{"invoke": tftypes.String}},
		map[string]tftypes.Value{"invoke": tftypes.NewValue(tftypes.String, "2m")})
	vals["extra_vars"] = tftypes.NewValue(tftypes.Object{AttributeTypes: map[string]tftypes.Type{"a": tftypes.String}},
		map[string]tftypes.Value{"a": tftypes.NewValue(tftypes.String, "b")})
	strs := func(ss ...string) tftypes.Value {
		vs := make([]tftypes.Value, len(ss))
		for i, v := range ss {
			vs[i] = tftypes.NewValue(tftypes.String, v)
		}
		return tftypes.NewValue(tftypes.List{ElementType: tftypes.String}, vs)
	}
	vals["tags"], vals["skip_tags"], vals["limit"] = strs("a", "b c"), strs("slow"), strs("web:!db", "&staging")
	var diags diag.Diagnostics
	m, timeout := (&runAction{}).model(ctx, tfsdk.Config{Schema: s, Raw: tftypes.NewValue(typ, vals)}, &diags)
	if diags.HasError() {
		t.Fatal(diags)
	}
	if m.ContainerGroup.ValueString() != "g" || m.Forks.ValueInt64() != 3 || timeout != 2*time.Minute {
		t.Errorf("got group %s, forks %s, timeout %s", m.ContainerGroup, m.Forks, timeout)
	}
	if m.OutputLimit.ValueInt64() != defaultOutputLimit || m.Verbosity.IsNull() || m.CheckMode.IsNull() || m.KeepPodOnFailure.IsNull() {
		t.Errorf("defaults not applied: output_limit %s, verbosity %s, check_mode %s", m.OutputLimit, m.Verbosity, m.CheckMode)
	}
	if m.ExtraVars.IsNull() || !m.Triggers.IsNull() {
		t.Errorf("extra_vars %s, triggers %s", m.ExtraVars, m.Triggers)
	}
	// The lists reach ansible-playbook joined, one argument each.
	b := (&runResource{}).bundle(ctx, m, m, "- hosts: all\n", &diags)
	if diags.HasError() {
		t.Fatal(diags)
	}
	args := strings.Join(b.Args("inv"), " | ")
	if want := "--limit | web:!db,&staging | --tags | a,b c | --skip-tags | slow"; !strings.Contains(args, want) {
		t.Errorf("ansible-playbook's arguments %q lack %q", args, want)
	}
}

// TestProgress_batches: lines go out within progressDelay, several in one
// message; events flush the lines before them; nothing after close.
func TestProgress_batches(t *testing.T) {
	var mu sync.Mutex
	var got []string
	sent := make(chan struct{}, 10)
	p := &progress{send: func(e action.InvokeProgressEvent) {
		mu.Lock()
		got = append(got, e.Message)
		mu.Unlock()
		sent <- struct{}{}
	}}
	p.line("a")
	p.line("b")
	start := time.Now()
	<-sent
	if d := time.Since(start); d > progressDelay+200*time.Millisecond {
		t.Errorf("the batch came %s after its lines", d)
	}
	p.line("c")
	p.event("ev")
	p.finish(runner.Result{Status: runner.StatusFailed, Reason: runner.ReasonPlaybookFailed, ExitCode: 2, PodName: "p"}, false)
	p.close()
	p.line("late")
	p.event("late")
	time.Sleep(2 * progressDelay)
	mu.Lock()
	defer mu.Unlock()
	want := "a\nb|c|ev|status: failed, playbook_failed (exit code 2), pod p"
	if s := strings.Join(got, "|"); s != want {
		t.Errorf("sent %q, want %q", s, want)
	}
}

// TestRecap: the action's recap counts the hosts by how they ended and
// lists those that failed or were unreachable, or every host with
// record_all_hosts, saying how many it leaves out.
func TestRecap(t *testing.T) {
	res := runner.Result{HostCount: 5, HostCounts: bundle.HostCounts{OK: 2, Changed: 1, Failed: 1, Unreachable: 1, Ignored: 1},
		Hosts:       map[string]bundle.HostStats{"a": {OK: 1}, "b": {OK: 1, Ignored: 1}, "c": {OK: 1, Changed: 1}, "d": {Failed: 1}},
		FailedHosts: map[string]bundle.HostStats{"d": {Failed: 1}, "e": {Unreachable: 1}}}
	line := func(h string, s string) string { return "\n  " + h + ": " + s }
	want := "recap: 5 hosts: 2 ok, 1 changed, 1 failed, 1 unreachable (0 with rescued tasks, 1 with ignored errors)" +
		line("d", "ok=0 changed=0 unreachable=0 failed=1 skipped=0 rescued=0 ignored=0") +
		line("e", "ok=0 changed=0 unreachable=1 failed=0 skipped=0 rescued=0 ignored=0")
	if got := recap(res, false); got != want {
		t.Errorf("recap:\n%s\nwant:\n%s", got, want)
	}
	all := recap(res, true)
	if !strings.Contains(all, line("b", "ok=1 changed=0 unreachable=0 failed=0 skipped=0 rescued=0 ignored=1")) ||
		strings.Contains(all, "\n  e:") || !strings.HasSuffix(all, "\n  and 1 more host") {
		t.Errorf("recap of every host:\n%s", all)
	}
	res.FailedHosts = map[string]bundle.HostStats{"d": {Failed: 1}}
	if got := recap(res, false); !strings.HasSuffix(got, "\n  and 1 more host that failed or were unreachable") {
		t.Errorf("recap:\n%s", got)
	}
	one := runner.Result{HostCount: 1, HostCounts: bundle.HostCounts{OK: 1}, Hosts: map[string]bundle.HostStats{"localhost": {OK: 1}}}
	if got := recap(one, false); got != "recap: 1 host: 1 ok, 0 changed, 0 failed, 0 unreachable" {
		t.Errorf("recap of one host: %q", got)
	}
	if got := recap(runner.Result{}, true); got != "" {
		t.Errorf("recap of a command: %q", got)
	}
}
