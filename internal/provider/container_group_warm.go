// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runengine"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/warmpool"
)

// warmTemplates renders the group's warm pools: its own pod's, then each
// node label's, by name. A label that is missing or of type namespace is
// an error at warm_labels.
func (r *containerGroupResource) warmTemplates(ctx context.Context, g catalog.Group, diags *diag.Diagnostics) []warmPool {
	eg := engineGroup(&g)
	var pools []warmPool
	if g.WarmPods > 0 {
		t, err := runengine.WarmTemplate(eg, nil)
		if err != nil {
			diags.AddAttributeError(path.Root("warm_pods"), "Warm Pod Not Renderable",
				fmt.Sprintf("The run pod of container group %q cannot be rendered: %v.", g.Name, err))
			return nil
		}
		pools = append(pools, warmPool{t, int(g.WarmPods)})
	}
	for _, name := range slices.Sorted(maps.Keys(g.WarmLabels)) {
		n := g.WarmLabels[name]
		at := path.Root("warm_labels").AtMapKey(name)
		l, err := readDefinition(ctx, r.data, (*catalog.Store).GetLabel, name)
		switch {
		case err != nil:
			diags.AddAttributeError(at, "Node Label Unreadable", fmt.Sprintf("Reading node label %q from the catalog: %v.", name, err))
			continue
		case l == nil:
			diags.AddAttributeError(at, "Node Label Not Found",
				fmt.Sprintf("Node label %q does not exist in catalog namespace %q, so the group cannot keep warm pods of it. "+
					"Create it with a kubeplay_node_label resource and make the group depend on it, or remove it from "+
					"warm_labels.", name, r.data.catalogNamespace))
			continue
		case l.Type == podspec.TypeNamespace:
			diags.AddAttributeError(at, "Namespace Label Cannot Be Warm",
				fmt.Sprintf("Node label %q is of type namespace: each of its runs gets a namespace made for it, so no pod "+
					"can be started ahead of the run. Remove it from warm_labels.", name))
			continue
		}
		if n == 0 {
			continue
		}
		t, err := runengine.WarmTemplate(eg, l)
		if err != nil {
			diags.AddAttributeError(at, "Warm Pod Not Renderable",
				fmt.Sprintf("The run pod of container group %q with node label %q cannot be rendered: %v.", g.Name, name, err))
			continue
		}
		pools = append(pools, warmPool{t, int(n)})
	}
	return pools
}

type warmPool struct {
	t warmpool.Template
	n int
}

// fillWarm tops the group's pools up and drains the pools it no longer
// keeps. Failures are warnings: runs take the cold path without warm pods.
func fillWarm(ctx context.Context, kube kubernetes.Interface, g catalog.Group, pools []warmPool, diags *diag.Diagnostics) {
	keep := make([]string, 0, len(pools))
	for _, p := range pools {
		keep = append(keep, p.t.Label)
		created, err := warmpool.Fill(ctx, kube, p.t, p.n)
		tflog.Debug(ctx, "filled a warm pool", map[string]any{"group": g.Name, "label": p.t.Label, "size": p.n, "created": created})
		if err != nil {
			diags.AddWarning("Warm Pods Not Started", fmt.Sprintf("Container group %q: %v. Runs start pods of their own "+
				"until the pool is filled, by the next run or apply.", g.Name, err))
		}
	}
	if err := warmpool.Retain(ctx, kube, g.Namespace, g.Name, keep); err != nil {
		diags.AddWarning("Warm Pods Not Removed", fmt.Sprintf("Container group %q: removing warm pods it no longer "+
			"keeps: %v. They end within 24 hours by their deadline.", g.Name, err))
	}
}

// warmCounts counts the group's warm pods; zeros when it keeps none or they
// cannot be listed.
func warmCounts(ctx context.Context, kube kubernetes.Interface, g catalog.Group) (types.Int64, types.Int64) {
	if g.WarmTotal() == 0 {
		return types.Int64Value(0), types.Int64Value(0)
	}
	c, err := warmpool.Count(ctx, kube, g.Namespace, g.Name)
	if err != nil {
		tflog.Debug(ctx, "counting warm pods failed", map[string]any{"group": g.Name, "error": err.Error()})
	}
	return types.Int64Value(int64(c.Ready)), types.Int64Value(int64(c.Starting))
}

// warmRevision hashes the revisions of the group's pools in order: its own
// pod's, then each label's. Planning, a label takes its value from this
// plan when the plan changes it. Unknown while a label is known only at
// apply; "" without warm pods.
func (r *containerGroupResource) warmRevision(ctx context.Context, g catalog.Group, planning bool) types.String {
	return warmRevision(ctx, r.data, g, planning)
}

func warmRevision(ctx context.Context, d *providerData, g catalog.Group, planning bool) types.String {
	eg := engineGroup(&g)
	var revs []string
	if g.WarmPods > 0 {
		t, err := runengine.WarmTemplate(eg, nil)
		if err != nil {
			return types.StringValue("")
		}
		revs = append(revs, "="+warmpool.Revision(t.Pod))
	}
	for _, name := range slices.Sorted(maps.Keys(g.WarmLabels)) {
		if g.WarmLabels[name] == 0 {
			continue
		}
		if d == nil {
			return types.StringUnknown() // not configured yet
		}
		var l *podspec.Label
		if p, ok := d.plannedLabels.get(name); ok && planning {
			if p.value == nil {
				return types.StringUnknown()
			}
			l = p.value
		} else {
			l, _ = readDefinition(ctx, d, (*catalog.Store).GetLabel, name)
		}
		if l == nil {
			return types.StringUnknown() // created in this apply, or missing: the apply says which
		}
		t, err := runengine.WarmTemplate(eg, l)
		if err != nil {
			return types.StringUnknown()
		}
		revs = append(revs, name+"="+warmpool.Revision(t.Pod))
	}
	if len(revs) == 0 {
		return types.StringValue("")
	}
	if len(revs) == 1 && g.WarmPods > 0 {
		return types.StringValue(revs[0][1:])
	}
	sum := sha256.Sum256([]byte(strings.Join(revs, "\n")))
	return types.StringValue(hex.EncodeToString(sum[:8]))
}

// drainWarm deletes the group's warm pods when it keeps any: a group without
// them asks its cluster nothing, so that its destroy does not need a
// credential that still works.
func drainWarm(ctx context.Context, kube kubernetes.Interface, g catalog.Group) error {
	if g.WarmTotal() == 0 {
		return nil
	}
	return warmpool.Drain(ctx, kube, g.Namespace, g.Name)
}
