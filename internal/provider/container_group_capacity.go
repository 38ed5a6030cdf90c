// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/nodefit"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
)

// nodeCapacityDescription is the paragraph of the group's description on
// the plan-time capacity check.
const nodeCapacityDescription = "When a plan creates the group or changes what it runs, kubeplay reads the nodes the group's pod can " +
	"land on (selector, affinity, taints, cordon) and warns when their allocatable could never hold " +
	"`max_concurrent_runs` plus `warm_pods` such pods, or when no node can take the pod. It counts the " +
	"nodes there are now; a credential that may not list nodes is not checked. None of this fails a plan."

// capacityChanged reports whether the plan creates the group or changes
// what the capacity check reads, so that a plan that changes none of it
// asks the cluster nothing.
func capacityChanged(creating bool, state, plan containerGroupModel, rendered string) bool {
	return creating || !plan.Credential.Equal(state.Credential) || !plan.MaxConcurrentRuns.Equal(state.MaxConcurrentRuns) ||
		!plan.WarmPods.Equal(state.WarmPods) || rendered != state.RenderedPod.ValueString()
}

// warnCapacity warns when the nodes that the group's run pods can land on
// cannot hold what the group lets run at once. It says nothing when the
// credential cannot be used at plan, as when it is created in the same
// apply, and never fails the plan.
func (r *containerGroupResource) warnCapacity(ctx context.Context, g catalog.Group, diags *diag.Diagnostics) {
	if r.data == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, groupPlanCheckTimeout)
	defer cancel()
	gc, err := r.data.credentialClients(ctx, g.Credential)
	if err != nil {
		tflog.Debug(ctx, "skipping the node capacity check", map[string]any{"error": err.Error()})
		return
	}
	pod, err := podspec.RenderGroup(g.PodGroup())
	if err != nil {
		return // the plan reports it at pod_spec_override
	}
	rep, err := nodefit.Read(ctx, gc.Kube, pod)
	if err != nil {
		if _, at := capacityDemand(g); at != nil {
			diags.AddAttributeWarning(*at, "Node Capacity Not Checked",
				fmt.Sprintf("Container group %q: could not list nodes on %s: %v; the capacity check was skipped. It "+
					"compares what the group lets run at once with what the nodes its pods can land on hold, and needs "+
					"the group's credential to list nodes, which a namespaced Role does not grant. Grant list on nodes "+
					"(a ClusterRole), or ignore this warning: runs beyond the nodes' room wait for it up to "+
					"pod_pending_timeout.", g.Name, gc.Config.Host, err))
		}
		return
	}
	if d := capacityWarning(g, gc.Config.Host, rep); d != nil {
		diags.Append(d)
	}
}

// capacityDemand is how many pods of the group's own pod may exist at once,
// worded, and the attribute that sets it; nil when nothing bounds them.
// Warm pods add to max_concurrent_runs, as in the group's quota.
func capacityDemand(g catalog.Group) (demand, *path.Path) {
	runs, warm := int64(0), g.WarmPods
	if g.MaxConcurrentRuns != nil {
		runs = *g.MaxConcurrentRuns
	}
	at := path.Root("max_concurrent_runs")
	switch {
	case runs > 0 && warm > 0:
		return demand{runs + warm, fmt.Sprintf("max_concurrent_runs = %d run pods and warm_pods = %d warm pods, %d pods",
			runs, warm, runs+warm)}, &at
	case runs > 0:
		return demand{runs, fmt.Sprintf("max_concurrent_runs = %d run pods", runs)}, &at
	case warm > 0:
		at = path.Root("warm_pods")
		return demand{warm, fmt.Sprintf("warm_pods = %d warm pods", warm)}, &at
	}
	return demand{}, nil
}

type demand struct {
	pods  int64
	words string
}

// capacityWarning is the warning for what rep found, or nil: no node the
// pod can land on, a pod larger than all of them, or more pods than they
// hold.
func capacityWarning(g catalog.Group, host string, rep nodefit.Report) diag.Diagnostic {
	now := "This counts the nodes there are now: a cluster autoscaler or Karpenter may add "
	switch {
	case len(rep.Nodes) == 0 && len(rep.Left) == 0:
		return diag.NewAttributeWarningDiagnostic(path.Root("pod_spec_override"), "No Node Can Take Run Pods",
			fmt.Sprintf("The cluster at %s has no node, so no run pod of container group %q can be scheduled. Runs wait "+
				"for a node up to pod_pending_timeout (%s), then fail. %sone. Add a node.", host, g.Name, g.PodPendingTimeout, now))
	case len(rep.Nodes) == 0:
		return diag.NewAttributeWarningDiagnostic(path.Root("pod_spec_override"), "No Node Can Take Run Pods",
			fmt.Sprintf("No node of %s (%d in all) can take the run pods of container group %q: %s. Runs wait for a "+
				"node up to pod_pending_timeout (%s), then fail. %sone that matches. Change the pod's nodeSelector, "+
				"affinity or tolerations in pod_spec_override, or label, untaint or uncordon a node.",
				host, len(rep.Left), g.Name, rep.WhyLeft(), g.PodPendingTimeout, now))
	case len(rep.Short) > 0:
		return diag.NewAttributeWarningDiagnostic(path.Root("pod_spec_override"), "Run Pod Larger Than Any Node",
			fmt.Sprintf("The run pod of container group %q requests %s, so no node it can land on (%s) can ever "+
				"hold it, and its runs fail at apply. %sa larger one. Lower the pod's requests in pod_spec_override, or "+
				"add a node that large.", g.Name, strings.Join(rep.Short, ", "), nodes(len(rep.Nodes)), now))
	}
	d, at := capacityDemand(g)
	if at == nil || d.pods <= rep.Total {
		return nil
	}
	hold := "hold"
	if len(rep.Nodes) == 1 {
		hold = "holds"
	}
	return diag.NewAttributeWarningDiagnostic(*at, "Run Pods Exceed Node Capacity",
		fmt.Sprintf("%s each requesting %s; the %s of %s they can land on (%s) %s at most %d at once, ignoring what else "+
			"runs there. Pods beyond that wait for room: a run up to pod_pending_timeout (%s), then it fails. %snodes "+
			"as pods wait. Lower %s, lower the pod's requests, or add nodes.",
			d.words, nodefit.Quantities(rep.Requests), nodes(len(rep.Nodes)), host, rep.NodeList(5), hold, rep.Total,
			g.PodPendingTimeout, now, at.String()))
}

func nodes(n int) string {
	if n == 1 {
		return "1 node"
	}
	return fmt.Sprintf("%d nodes", n)
}
