// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
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
	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalogkey"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runengine"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/warmpool"
)

// warmTemplates renders the group's warm pools for an apply; a label that
// is missing, unreadable, of type namespace or not renderable is an error
// at its key of warm_labels.
func (r *containerGroupResource) warmTemplates(ctx context.Context, g catalog.Group, diags *diag.Diagnostics) []warmPool {
	pools, errs := warmPools(ctx, r.data, g, false)
	for _, e := range errs {
		diags.AddAttributeError(e.at, e.summary, e.detail)
	}
	return pools
}

// warmPoolError is why a pool cannot be rendered; unknown when its label is
// known only at apply.
type warmPoolError struct {
	at              path.Path
	summary, detail string
	unknown         bool
}

// warmPools renders the group's pools: its own pod's, then each node
// label's, by name. Planning, a label comes from this plan when the plan
// changes it.
func warmPools(ctx context.Context, d *providerData, g catalog.Group, planning bool) ([]warmPool, []warmPoolError) {
	eg := engineGroup(&g)
	var pools []warmPool
	var errs []warmPoolError
	if g.WarmPods > 0 {
		t, err := runengine.WarmTemplate(eg, nil)
		if err != nil {
			return nil, []warmPoolError{{at: path.Root("warm_pods"), summary: "Warm Pod Not Renderable",
				detail: fmt.Sprintf("The run pod of container group %q cannot be rendered: %v. Fix the group's "+
					"pod_spec_override or image.", g.Name, err)}}
		}
		pools = append(pools, warmPool{t, int(g.WarmPods)})
	}
	for _, name := range slices.Sorted(maps.Keys(g.WarmLabels)) {
		at := path.Root("warm_labels").AtMapKey(name)
		fail := func(summary, detail string) {
			errs = append(errs, warmPoolError{at: at, summary: summary, detail: detail})
		}
		if d == nil {
			return nil, []warmPoolError{{at: at, unknown: true}} // not configured yet
		}
		var l *podspec.Label
		var err error
		if p, ok := d.plannedLabels.get(name); ok && planning {
			if p.value == nil {
				errs = append(errs, warmPoolError{at: at, unknown: true})
				continue
			}
			l = p.value
		} else {
			l, err = readDefinition(ctx, d, (*catalog.Store).TrustedLabel, name)
		}
		switch {
		case errors.Is(err, catalog.ErrTampered):
			fail(refusalSummary(err), fmt.Sprintf("%s. The group keeps no warm pods of it until it is repaired: "+
				"whoever changed it could choose the pods that runs' secrets are sent to. %s.", upperFirst(err.Error()), refusalRemedy(err)))
			continue
		case err != nil:
			fail("Node Label Unreadable", fmt.Sprintf("Reading node label %q from the catalog: %v. Check that "+
				"catalog namespace %q is reachable with the provider's connection.", name, err, d.catalogNamespace))
			continue
		case l == nil:
			fail("Node Label Not Found", fmt.Sprintf("Node label %q does not exist in catalog namespace %q, so the "+
				"group cannot keep warm pods of it. Create it with a kubeplay_node_label resource and make the group "+
				"depend on it, or remove it from warm_labels.", name, d.catalogNamespace))
			continue
		case l.Type == podspec.TypeNamespace:
			fail("Namespace Label Cannot Be Warm", fmt.Sprintf("Node label %q is of type namespace: each of its runs "+
				"gets a namespace made for it, so no pod can be started ahead of the run. Remove it from warm_labels.", name))
			continue
		case g.WarmLabels[name] == 0:
			continue
		}
		t, err := runengine.WarmTemplate(eg, l)
		if err != nil {
			fail("Warm Pod Not Renderable", fmt.Sprintf("The run pod of container group %q with node label %q cannot "+
				"be rendered: %v. Fix the label, or remove it from warm_labels.", g.Name, name, err))
			continue
		}
		pools = append(pools, warmPool{t, int(g.WarmLabels[name])})
	}
	return pools, errs
}

type warmPool struct {
	t warmpool.Template
	n int
}

// fillWarm tops the group's pools up and drains the pools it no longer
// keeps. Failures are warnings: runs take the cold path without warm pods.
func fillWarm(ctx context.Context, d *providerData, kube kubernetes.Interface, g catalog.Group, pools []warmPool, diags *diag.Diagnostics) {
	key, err := d.signingKey(ctx)
	if err != nil {
		diags.AddWarning("Warm Pods Not Started", fmt.Sprintf("Container group %q: the catalog key, which signs warm "+
			"pods, is not available: %v. Runs start pods of their own until an apply of the group can read it.", g.Name, err))
		return
	}
	refused := refusedWarning(g, diags)
	keep := make([]string, 0, len(pools))
	for _, p := range pools {
		keep = append(keep, p.t.Label)
		p.t.Key, p.t.OnRefused = key, refused
		created, err := warmpool.Fill(ctx, kube, p.t, p.n)
		tflog.Debug(ctx, "filled a warm pool", map[string]any{"group": g.Name, "label": p.t.Label, "size": p.n, "created": created})
		if err != nil {
			diags.AddWarning("Warm Pods Not Started", fmt.Sprintf("Container group %q: %v. Runs start pods of their own "+
				"until the pool is filled, by the next run or apply.", g.Name, err))
		}
	}
	if err := warmpool.Retain(ctx, kube, key, g.Namespace, g.Name, keep, refused); err != nil {
		diags.AddWarning("Warm Pods Not Removed", fmt.Sprintf("Container group %q: removing warm pods it no longer "+
			"keeps: %v. They end within 24 hours by their deadline.", g.Name, err))
	}
}

// refusedWarning warns, once per pod, of a pod that carries the labels of
// one of g's warm pods but that kubeplay did not make, or that changed.
func refusedWarning(g catalog.Group, diags *diag.Diagnostics) func(*warmpool.RefusedError) {
	seen := map[string]bool{}
	return func(r *warmpool.RefusedError) {
		if seen[r.Name] || r.Ours {
			return // a pod of kubeplay's that changed is deleted: nothing to say
		}
		seen[r.Name] = true
		diags.AddWarning("Foreign Warm Pod Left in Place", fmt.Sprintf("Container group %q: %v. kubeplay never gives "+
			"a run such a pod, and does not delete it. If an earlier kubeplay made it (before warm pods were signed), "+
			"it ends within 24 hours; otherwise find out who creates pods with kubeplay's labels in namespace %q.",
			g.Name, r, g.Namespace))
	}
}

// warmCounts counts the group's warm pods, those that kubeplay made; zeros
// when it keeps none (its cluster is not asked) or they cannot be listed.
func warmCounts(ctx context.Context, d *providerData, g catalog.Group) (types.Int64, types.Int64) {
	if g.WarmTotal() == 0 {
		return types.Int64Value(0), types.Int64Value(0)
	}
	var c warmpool.Counts
	gc, err := d.credentialClients(ctx, g.Credential)
	if err == nil {
		var key *catalogkey.Key
		if key, err = d.signingKey(ctx); err == nil {
			c, err = warmpool.Count(ctx, gc.Kube, key, g.Namespace, g.Name)
		}
	}
	if err != nil {
		tflog.Debug(ctx, "counting warm pods failed", map[string]any{"group": g.Name, "error": err.Error()})
	}
	return types.Int64Value(int64(c.Ready)), types.Int64Value(int64(c.Starting))
}

// warmRevision hashes the revisions of the group's pools. Planning, a
// label takes its value from this plan when the plan changes it. Unknown
// at plan while a pool is known only at apply or cannot be rendered (the
// apply says why); "" without warm pods.
func (r *containerGroupResource) warmRevision(ctx context.Context, g catalog.Group, planning bool) types.String {
	return warmRevision(ctx, r.data, g, planning)
}

func warmRevision(ctx context.Context, d *providerData, g catalog.Group, planning bool) types.String {
	pools, errs := warmPools(ctx, d, g, planning)
	switch {
	case len(errs) > 0 && planning:
		return types.StringUnknown()
	case len(errs) > 0:
		return types.StringValue("") // state holds no unknown: a label went, and the next plan says so
	case len(pools) == 0:
		return types.StringValue("")
	}
	revs := make([]string, len(pools))
	for i, p := range pools {
		revs[i] = p.t.Label + "=" + warmpool.Revision(p.t.Pod)
	}
	sum := sha256.Sum256([]byte(strings.Join(revs, "\n")))
	return types.StringValue(hex.EncodeToString(sum[:8]))
}

// drainWarm deletes the group's warm pods when it keeps any: a group without
// them asks its cluster nothing, so that its destroy does not need a
// credential that still works. Pods that kubeplay did not make are left.
func drainWarm(ctx context.Context, d *providerData, kube kubernetes.Interface, g catalog.Group, diags *diag.Diagnostics) error {
	if g.WarmTotal() == 0 {
		return nil
	}
	key, err := d.signingKey(ctx)
	if err != nil {
		return fmt.Errorf("the catalog key, which tells kubeplay's warm pods from others, is not available: %w", err)
	}
	return warmpool.Drain(ctx, kube, key, g.Namespace, g.Name, refusedWarning(g, diags))
}
