// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/capacity"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podsecurity"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runengine"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
)

// oneDiag returns the only diagnostic as "severity|path|summary" and its detail.
func oneDiag(t *testing.T, diags diag.Diagnostics) (string, string) {
	t.Helper()
	if len(diags) != 1 {
		t.Fatalf("%d diagnostics, want 1: %v", len(diags), diags)
	}
	d := diags[0]
	p := ""
	if dp, ok := d.(diag.DiagnosticWithPath); ok {
		p = dp.Path().String()
	}
	return fmt.Sprintf("%s|%s|%s", d.Severity(), p, d.Summary()), d.Detail()
}

func TestNotStarted(t *testing.T) {
	boom := errors.New("boom")
	violation := &podsecurity.ViolationError{Level: podsecurity.Baseline, Violations: []podsecurity.Violation{
		{Reason: "hostPath volumes", Detail: `volume "root"`}}}
	for _, c := range []struct {
		err      error
		head     string
		inDetail string
	}{
		{&runengine.CapacityError{Kind: capacity.Runs, Group: "g", N: 1, Limit: 1, Waited: time.Minute, Err: boom},
			"Error|container_group|Container Group Capacity Unavailable",
			`container group "g" had no room for 1 more runs within its pod_pending_timeout of 1m0s.`},
		{&runengine.CapacityError{Kind: capacity.Forks, Group: "g", N: 3, Limit: 2, Err: boom},
			"Error|forks|Container Group Capacity Unavailable", `claiming 3 forks in container group "g": boom.`},
		{&runengine.NamespaceError{Label: "sandbox", Group: "g", Namespace: "sandbox-1", Err: boom},
			"Error|node_label|Run Namespace Not Created", `Node label "sandbox" gives each run a namespace, and making sandbox-1 failed: boom.`},
		{&runengine.PodSecurityError{Group: "g", Err: violation},
			"Error|container_group|Run Pod Below Pod Security Level",
			"The run pod of container group \"g\" violates PodSecurity \"baseline:latest\". Failed checks:\n  - hostPath volumes: volume \"root\"\nFix"},
		{&runengine.PodSecurityError{Group: "g", Label: "host", Err: violation},
			"Error|node_label|Run Pod Below Pod Security Level",
			"with node label \"host\" the run pod violates PodSecurity \"baseline:latest\". Failed checks:\n  - hostPath volumes: volume \"root\"\n"},
		{&runengine.PlacementError{Groups: []string{"a", "b"}, Waited: time.Minute, Err: boom},
			"Error|container_group|Container Group Capacity Unavailable",
			`none of container groups "a", "b" had room for the run within 1m0s, the longest of their pending timeouts. Raise`},
		{fmt.Errorf("container group %q: %w", "g", runengine.ErrGroupUnavailable),
			"Error|container_group|Container Group Unavailable", `container group "g": the run's container group is unavailable.`},
	} {
		var diags diag.Diagnostics
		notStarted(c.err, path.Root("container_group"), &diags)
		head, detail := oneDiag(t, diags)
		if head != c.head || !strings.Contains(detail, c.inDetail) {
			t.Errorf("%T: %s: %s", c.err, head, detail)
		}
	}
}

func TestCleanupWarnings(t *testing.T) {
	boom := errors.New("boom")
	var diags diag.Diagnostics
	cleanupWarnings([]error{
		&runengine.ReleaseError{Kind: capacity.Forks, Group: "g", Err: boom},
		&runengine.NamespaceError{Deleting: true, Group: "g", Namespace: "sandbox-1", Err: boom},
	}, &diags)
	if len(diags) != 2 || diags.HasError() || diags[0].Summary() != "Releasing Capacity Failed" ||
		diags[1].Summary() != "Run Namespace Not Deleted" || !strings.Contains(diags[1].Detail(), "Deleting namespace sandbox-1 of the run failed: boom.") {
		t.Errorf("diagnostics %v", diags)
	}
}

func TestRefused(t *testing.T) {
	boom := errors.New("boom")
	target := func(changing bool) *runTarget {
		return &runTarget{group: runengine.Group{Name: "g", Namespace: "runs", Credential: "c"}, changing: changing}
	}
	refusal := func(r runengine.Refusal) error {
		return &runengine.RefusedError{Reason: r, Namespace: "runs", Host: "https://h", Cause: boom, Err: boom}
	}
	for _, c := range []struct {
		err      error
		changing bool
		head     string
		inDetail string
	}{
		{refusal(runengine.RefusedQuota), false, "Warning|container_group|Container Group Is Full Now", `quota of group "g": boom`},
		{refusal(runengine.RefusedQuota), true, "Warning|container_group|Container Group Is Full Now", ""},
		{refusal(runengine.RefusedOther), true, "Warning|container_group|Run Pod Refused By The Cluster As It Is Now", `namespace "runs" was refused: boom`},
		{refusal(runengine.RefusedUnauthorized), false, "Warning|container_group|Run Credential Rejected", "https://h answered 401 Unauthorized to credential c"},
		{refusal(runengine.RefusedTLS), false, "Warning|container_group|Run Cluster TLS Verification Failed", "failed TLS verification: boom"},
		{refusal(runengine.RefusedUnreachable), false, "Warning|container_group|Run Cluster Unreachable", "could not connect to https://h: boom"},
		{refusal(runengine.RefusedNotFound), false, "Warning|container_group|Run Pod Would Be Refused", `namespace "runs" was refused: boom`},
		{boom, false, "Warning|container_group|Run Pod Would Be Refused", `namespace "runs" was refused: boom`},
	} {
		var diags diag.Diagnostics
		refused(context.Background(), target(c.changing), c.err, &diags)
		head, detail := oneDiag(t, diags)
		if head != c.head || !strings.Contains(detail, c.inDetail) {
			t.Errorf("%v (changing %v): %s: %s", c.err, c.changing, head, detail)
		}
	}
	var diags diag.Diagnostics
	refused(context.Background(), target(true), refusal(runengine.RefusedNotFound), &diags)
	if len(diags) != 0 {
		t.Errorf("a namespace this apply makes: %v", diags)
	}
}

func TestReportSaysEachThingOnce(t *testing.T) {
	// A canceled run names Terraform's stop as the cause, not the run's own
	// timeout, which ends a run as an error.
	const canceledCause = "Terraform stopped the provider during the run: it was interrupted (Ctrl-C, or the SIGINT or " +
		"SIGTERM that a CI job's cancel or time limit sends), or it exited. A run that passes its own timeout (timeouts " +
		"create, or delete for a destroy playbook) is not canceled but ends with status error. The run is not recorded " +
		"as done, so the next apply (or destroy) runs it again; if nobody interrupted Terraform, give the job that runs " +
		"it more time than its runs' timeouts."
	m := runModel{IgnoreFailure: types.BoolValue(false), RunNamespace: types.StringValue("sandbox-1")}
	for _, c := range []struct {
		res     runner.Result
		summary string
		detail  string
	}{
		{runner.Result{Status: runner.StatusCanceled, Message: "context canceled"}, "Run Canceled", "The run was canceled. " + canceledCause},
		{runner.Result{Status: runner.StatusCanceled, Message: "provider stopping"}, "Run Canceled", "The run was canceled: provider stopping. " + canceledCause},
		{runner.Result{Status: runner.StatusFailed, PodName: "p", ExitCode: 2, PodKept: true, Output: "a\nb\n"}, "Run Failed",
			"The playbook in pod p exited with code 2. The pod p was kept (keep_pod_on_failure); delete it when done. " +
				"So was the run's namespace sandbox-1.\n\nThe output's last lines:\na\nb"},
		{runner.Result{Status: runner.StatusError, Message: "pod p cannot be scheduled", Events: []string{"FailedScheduling: no"}}, "Run Error",
			"The run could not complete: pod p cannot be scheduled.\n\nThe pod's last warning events:\n  FailedScheduling: no"},
		{runner.Result{Status: runner.StatusError, Reason: runner.ReasonUnschedulable, Message: "pod p cannot be scheduled"}, "Run Error",
			"The run could not complete: pod p cannot be scheduled (status_reason unschedulable)."},
		{runner.Result{Status: runner.StatusError, Reason: runner.ReasonTimeout, Message: "the run did not finish within its timeout"}, "Run Error",
			"The run could not complete: the run did not finish within its timeout (status_reason timeout). Raise " +
				"timeouts.create, or find where the time went in the run's timeline: a pod that waited for room on a node " +
				"or for its image shows it in its warning events."},
		{runner.Result{Status: runner.StatusFailed, Reason: runner.ReasonOOMKilled, PodName: "p", ExitCode: 2}, "Run Failed",
			"The playbook in pod p exited with code 2 (status_reason oom_killed). The kernel killed a process of the run at " +
				"the container's memory limit: give the pod more memory (the group's or node label's memory), or make the task use less."},
	} {
		var diags diag.Diagnostics
		(&runResource{}).report(m, c.res, "Run", "timeouts.create", &diags)
		head, detail := oneDiag(t, diags)
		if head != "Error||"+c.summary || detail != c.detail {
			t.Errorf("%s: %q", head, detail)
		}
	}
	var diags diag.Diagnostics
	m.IgnoreFailure = types.BoolValue(true)
	(&runResource{}).report(m, runner.Result{Status: runner.StatusFailed}, "Destroy Playbook", "timeouts.delete", &diags)
	if head, detail := oneDiag(t, diags); head != "Warning||Destroy Playbook Failed" || !strings.HasSuffix(detail, "ignore_failure is set: the apply goes on.") {
		t.Errorf("%s: %q", head, detail)
	}
	diags = nil
	(&runResource{}).report(m, runner.Result{Status: runner.StatusSuccessful}, "Run", "timeouts.create", &diags)
	if len(diags) != 0 {
		t.Errorf("a successful run: %v", diags)
	}
}

// TestRecord: by default host_stats keeps only the hosts that failed or
// were unreachable, and host_counts counts them all; with record_all_hosts,
// host_stats keeps every host.
func TestRecord(t *testing.T) {
	start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	res := runner.Result{Status: runner.StatusSuccessful, ExitCode: 0, Output: "ok", PodName: "p", NodeName: "n",
		StartedAt: start, FinishedAt: start.Add(time.Minute), Hosts: map[string]bundle.HostStats{"h": {OK: 2, Changed: 1}},
		HostCount: 1, HostCounts: bundle.HostCounts{Changed: 1}, FailedHosts: map[string]bundle.HostStats{}}
	var m runModel
	var diags diag.Diagnostics
	(&runResource{}).record(&m, res, &diags)
	if diags.HasError() || m.Status.ValueString() != "successful" || m.PodName.ValueString() != "p" ||
		m.FinishedAt.ValueString() != "2025-01-02T03:05:05Z" || len(m.HostStats.Elements()) != 0 || m.HostCount.ValueInt64() != 1 {
		t.Errorf("model %+v %v", m, diags)
	}
	if s := m.HostCounts.String(); s != `{"changed":1,"failed":0,"ignored":0,"ok":0,"rescued":0,"unreachable":0}` {
		t.Errorf("host counts %s", s)
	}
	m.RecordAllHosts = types.BoolValue(true)
	(&runResource{}).record(&m, res, &diags)
	if diags.HasError() || len(m.HostStats.Elements()) != 1 {
		t.Errorf("host stats %s %v", m.HostStats, diags)
	}
	if s := m.HostStats.Elements()["h"].String(); !strings.Contains(s, `"changed":1`) || !strings.Contains(s, `"ok":2`) {
		t.Errorf("host stats %s", s)
	}
}

// TestKeptHostStats: record_all_hosts turned off in place drops the hosts
// that ended ok or changed; turned on, or left as it was, host_stats stays.
func TestKeptHostStats(t *testing.T) {
	ctx := context.Background()
	var diags diag.Diagnostics
	all := hostStatsValue(map[string]bundle.HostStats{"a": {OK: 1}, "b": {Changed: 1}, "c": {OK: 1, Failed: 1},
		"d": {Unreachable: 1, Rescued: 1}}, &diags)
	on, off := types.BoolValue(true), types.BoolValue(false)
	got := keptHostStats(ctx, all, on, off, &diags)
	want := hostStatsValue(map[string]bundle.HostStats{"c": {OK: 1, Failed: 1}, "d": {Unreachable: 1, Rescued: 1}}, &diags)
	if diags.HasError() || !got.Equal(want) {
		t.Errorf("turned off: %s, want %s; %v", got, want, diags)
	}
	if got := keptHostStats(ctx, all, types.BoolNull(), off, &diags); !got.Equal(want) {
		t.Errorf("from a state without record_all_hosts: %s, want %s", got, want)
	}
	for _, c := range [][2]types.Bool{{on, on}, {off, on}, {off, off}} {
		if got := keptHostStats(ctx, all, c[0], c[1], &diags); !got.Equal(all) {
			t.Errorf("%s to %s: %s, want it as it was", c[0], c[1], got)
		}
	}
	if got := keptHostStats(ctx, all, on, types.BoolUnknown(), &diags); !got.IsUnknown() {
		t.Errorf("to unknown: %s", got)
	}
}

// TestCarriedHostCounts: a run recorded before host_counts gets the counts
// of the host_stats it recorded (then every host) on its next update in
// place; a run that has counts keeps them.
func TestCarriedHostCounts(t *testing.T) {
	ctx := context.Background()
	var diags diag.Diagnostics
	all := hostStatsValue(map[string]bundle.HostStats{"a": {OK: 1}, "b": {Changed: 1}, "c": {OK: 1, Failed: 1},
		"d": {Unreachable: 1, Rescued: 1}}, &diags)
	want := hostCountsValue(bundle.HostCounts{OK: 1, Changed: 1, Failed: 1, Unreachable: 1, Rescued: 1}, &diags)
	if got := carriedHostCounts(ctx, types.ObjectNull(hostCountsType.AttrTypes), all, &diags); diags.HasError() || !got.Equal(want) {
		t.Errorf("from a state without host_counts: %s, want %s; %v", got, want, diags)
	}
	own := hostCountsValue(bundle.HostCounts{OK: 7}, &diags)
	if got := carriedHostCounts(ctx, own, all, &diags); !got.Equal(own) {
		t.Errorf("a run with counts: %s, want its own %s", got, own)
	}
	none := types.ObjectNull(hostCountsType.AttrTypes)
	if got := carriedHostCounts(ctx, none, types.MapNull(hostStatsType), &diags); !got.IsNull() {
		t.Errorf("no host_stats either: %s, want null", got)
	}
}

func TestEngineGroup(t *testing.T) {
	forks := int64(4)
	g := engineGroup(&catalog.Group{Name: "g", Namespace: "runs", Credential: "c", Image: "img", PodSpecOverride: "spec: {}",
		MaxForks: &forks, PodPendingTimeout: "90s", Labels: map[string]string{"a": "b"}, DefaultLabel: podspec.Resources{CPU: "1"},
		PodSecurityLevel: podsecurity.Restricted})
	if g.Name != "g" || g.Namespace != "runs" || g.Credential != "c" || g.MaxForks != &forks || g.MaxConcurrentRuns != nil ||
		g.PendingTimeout != 90*time.Second || g.Pod.Image != "img" || g.Pod.Override != "spec: {}" || g.Pod.Labels["a"] != "b" ||
		g.Pod.Name != "g" || g.DefaultLabel.CPU != "1" || g.PodSecurityLevel != podsecurity.Restricted {
		t.Errorf("group %+v", g)
	}
	if g := engineGroup(&catalog.Group{PodPendingTimeout: "soon"}); g.PendingTimeout != 0 {
		t.Errorf("an unparsable timeout: %s, want 0 (the engine's default)", g.PendingTimeout)
	}
}
