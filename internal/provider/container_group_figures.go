// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"math"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	dschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/capacity"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runengine"
)

var percentilesType = types.ObjectType{AttrTypes: map[string]attr.Type{"p50": types.Float64Type, "p90": types.Float64Type}}

var startFiguresType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"runs": types.Int64Type, "warm_share": types.Float64Type, "to_start": percentilesType, "queued": percentilesType,
	"scheduling": percentilesType, "image": percentilesType, "start": percentilesType,
}}

func percentilesAttribute(what string) dschema.Attribute {
	return dschema.SingleNestedAttribute{
		MarkdownDescription: "The median (`p50`) and 90th percentile (`p90`) in seconds of " + what + ".",
		Computed:            true,
		Attributes: map[string]dschema.Attribute{
			"p50": dschema.Float64Attribute{MarkdownDescription: "The median, in seconds.", Computed: true},
			"p90": dschema.Float64Attribute{MarkdownDescription: "The 90th percentile, in seconds.", Computed: true},
		},
	}
}

func startFiguresAttribute() dschema.Attribute {
	return dschema.SingleNestedAttribute{
		MarkdownDescription: fmt.Sprintf("How the group's last %d runs got to their playbooks, from its ledgers' records (null without "+
			"`max_concurrent_runs` or `max_forks`): each part sums `timeline` steps, `queued` (queued, namespace, "+
			"claim), `scheduling` (create, schedule), `image` and `start` (sandbox, deliver), and `to_start` all "+
			"of them. See [sizing a "+
			"group](../guides/moving-from-nodepool.md#sizing-warm_pods-and-max_concurrent_runs). The records are "+
			"informative only.", capacity.MaxRecentRuns),
		Computed: true,
		Attributes: map[string]dschema.Attribute{
			"runs":       dschema.Int64Attribute{MarkdownDescription: "How many runs the figures cover.", Computed: true},
			"warm_share": dschema.Float64Attribute{MarkdownDescription: "The share of those runs, from `0` to `1`, that ran in a warm pod.", Computed: true},
			"to_start":   percentilesAttribute("the runs' time from their start to their playbook's"),
			"queued":     percentilesAttribute("the runs' wait for the group's capacity, run namespace and warm pod claim"),
			"scheduling": percentilesAttribute("the runs' pod creation and wait for a node"),
			"image":      percentilesAttribute("the runs' `image` step: the image's pull, as the timeline measures it"),
			"start":      percentilesAttribute("the runs' pod sandbox and delivery of the playbook"),
		},
	}
}

// startFigures reads g's recent runs and sums them up; null when g has no
// ledger, or they cannot be read (logged).
func startFigures(ctx context.Context, d *providerData, g catalog.Group, diags *diag.Diagnostics) types.Object {
	null := types.ObjectNull(startFiguresType.AttrTypes)
	if g.MaxConcurrentRuns == nil && g.MaxForks == nil {
		return null
	}
	c, err := d.credentialClients(ctx, g.Credential)
	var records []runengine.RunRecord
	if err == nil {
		records, err = recentRuns(ctx, c.Kube, &g)
	}
	if err != nil {
		tflog.Warn(ctx, "reading the group's recent runs failed", map[string]any{"group": g.Name, "error": err.Error()})
		return null
	}
	f := runengine.Figures(records)
	pct := func(p runengine.Percentiles) attr.Value {
		v, d := types.ObjectValue(percentilesType.AttrTypes, map[string]attr.Value{"p50": types.Float64Value(ms(p.P50)), "p90": types.Float64Value(ms(p.P90))})
		diags.Append(d...)
		return v
	}
	v, ds := types.ObjectValue(startFiguresType.AttrTypes, map[string]attr.Value{
		"runs": types.Int64Value(int64(f.Runs)), "warm_share": types.Float64Value(ms(f.WarmShare)),
		"to_start": pct(f.ToStart), "queued": pct(f.Queued), "scheduling": pct(f.Scheduling), "image": pct(f.Image), "start": pct(f.Start),
	})
	diags.Append(ds...)
	return v
}

// recentRuns reads g's recent runs, and logs each record it left out.
func recentRuns(ctx context.Context, kube kubernetes.Interface, g *catalog.Group) ([]runengine.RunRecord, error) {
	records, dropped, err := runengine.RecentRuns(ctx, kube, engineGroup(g))
	for _, d := range dropped {
		tflog.Warn(ctx, "left out a recent-runs record that is not one kubeplay writes", map[string]any{"error": d.Error()})
	}
	return records, err
}

// ms rounds seconds to the millisecond, as the timeline records them.
func ms(seconds float64) float64 { return math.Round(seconds*1000) / 1000 }
