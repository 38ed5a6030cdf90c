// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/groupside"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podsecurity"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
)

// groupOwnerKind names container groups in owner annotations and messages.
const groupOwnerKind = "container group"

// unassignedOwnerID stands for the id a group being created gets at apply:
// no object carries it, so at plan every owned object is someone else's.
const unassignedOwnerID = "unassigned"

// assignOwner gives g its owner id and returns what the group provisions,
// owned by it. A new group gets a fresh id (or the one its plan already
// holds, when it replaces a group of its own); an update keeps its id, and
// a group stored before owner ids gets one now and adopts, this once, the
// objects kubeplay made for its name.
func (r *containerGroupResource) assignOwner(ctx context.Context, store *catalog.Store, kube kubernetes.Interface, g *catalog.Group, create bool, diags *diag.Diagnostics) (groupside.Spec, bool) {
	adopt := false
	catalogUID := r.catalogUID(ctx)
	if create {
		// What this catalog's deleted definition of the name left (the
		// catalog does not hold the name: CheckAbsent passed) is the new one's.
		probe := sideSpec(*g)
		probe.Owner.Catalog, probe.Owner.CatalogUID = r.data.catalogNamespace, catalogUID
		if id := r.orphanID(ctx, kube, probe); id != "" {
			g.OwnerID = id
		}
	}
	if !managed.ValidOwnerID(g.OwnerID) {
		if !create {
			if prev, err := store.GetGroup(ctx, g.Name); err == nil && managed.ValidOwnerID(prev.Value.OwnerID) {
				g.OwnerID = prev.Value.OwnerID
			}
		}
		var ok bool
		if adopt, ok = ensureOwnerID(&g.OwnerID, fmt.Sprintf("Container group %q", g.Name), create, diags); !ok {
			return groupside.Spec{}, false
		}
	}
	side := sideSpec(*g)
	side.Owner.Catalog, side.Owner.CatalogUID, side.Adopt = r.data.catalogNamespace, catalogUID, adopt
	return side, true
}

// catalogUID is the UID of the catalog namespace, which owner annotations
// record; "" when it cannot be read.
func (r *containerGroupResource) catalogUID(ctx context.Context) string {
	store, err := r.data.catalog()
	if err != nil {
		return ""
	}
	uid, err := store.NamespaceUID(ctx)
	if err != nil {
		tflog.Debug(ctx, "the catalog namespace's UID is unknown", map[string]any{"error": err.Error()})
		return ""
	}
	return uid
}

// checkOnCluster holds the planned group to what its cluster holds and
// enforces: its run pod to the pod security checks of the API server's own
// version, and a managed namespace to be this definition's (or free). It
// says nothing when the cluster cannot be reached at plan time; apply
// checks again.
func (r *containerGroupResource) checkOnCluster(ctx context.Context, g catalog.Group, creating bool, stateOwner types.String, diags *diag.Diagnostics) {
	if r.data == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, groupPlanCheckTimeout)
	defer cancel()
	gc, err := r.data.credentialClients(ctx, g.Credential)
	if err != nil {
		tflog.Debug(ctx, "skipping the group's cluster checks at plan", map[string]any{"error": err.Error()})
		return
	}
	if v := serverPolicyVersion(ctx, gc); v != "" {
		if pod, err := podspec.RenderGroup(g.PodGroup()); err == nil {
			if err := podsecurity.CheckAt(g.PodSecurityLevel, v, pod); err != nil {
				addServerPodSecurityError(diags, g, gc.Config.Host, v, err)
			}
		}
	}
	side := sideSpec(g)
	side.Owner.Catalog, side.Owner.CatalogUID = r.data.catalogNamespace, r.catalogUID(ctx)
	switch {
	case creating:
		side.Owner.ID = unassignedOwnerID
		if id := r.orphanID(ctx, gc.Kube, side); id != "" {
			side.Owner.ID = id // left by this catalog's deleted definition: taken over at apply
		}
	case stateOwner.IsNull() || stateOwner.IsUnknown():
		side.Owner.ID, side.Adopt = "", true // from before owner ids: adopts at apply
	default:
		side.Owner.ID = stateOwner.ValueString()
	}
	err = groupside.MayManage(ctx, gc.Kube, side)
	var (
		other  *managed.OwnedByOtherError
		exists *groupside.NamespaceExistsError
	)
	switch {
	case errors.As(err, &other):
		addOwnedByOtherError(diags, g, gc.Config.Host, other)
	case errors.As(err, &exists):
		addGroupSideError(diags, g, gc.Config.Host, err)
	case err != nil:
		tflog.Debug(ctx, "skipping the managed namespace check at plan", map[string]any{"error": err.Error()})
	}
}

// addOwnedByOtherError reports an object the group would manage that
// another definition made: at manage_namespace for the namespace, else at
// namespace.
func addOwnedByOtherError(diags *diag.Diagnostics, g catalog.Group, host string, e *managed.OwnedByOtherError) {
	at := path.Root("namespace")
	if e.Kind == "namespace" {
		at = path.Root("manage_namespace")
	}
	remedy := "It is another configuration's: a group of the same name in another catalog_namespace or on another " +
		"catalog cluster. kubeplay would change its labels and, on destroy, delete it with everything in it. Choose " +
		"another namespace for this group, or set manage_namespace = false."
	if e.OtherID == "" {
		remedy = "kubeplay cannot tell whether it is this configuration's or another's, since it was made before owner " +
			"ids. If it is left over from this configuration, delete it (kubectl delete " + kubectlKind(e.Kind) + " " +
			e.Name + namespaceFlag(e.Namespace) + ") and apply again; else choose another namespace, or set manage_namespace = false."
	}
	diags.AddAttributeError(at, "Namespace Owned By Another Container Group",
		fmt.Sprintf("Container group %q on %s: %v. %s", g.Name, host, e, remedy))
}

func kubectlKind(kind string) string {
	switch kind {
	case "ResourceQuota":
		return "resourcequota"
	case "ConfigMap":
		return "configmap"
	}
	return kind
}

func namespaceFlag(ns string) string {
	if ns == "" {
		return ""
	}
	return " -n " + ns
}

// addServerPodSecurityError reports a run pod that passes the newest
// checks but not those of the cluster's own Kubernetes version.
func addServerPodSecurityError(diags *diag.Diagnostics, g catalog.Group, host, version string, err error) {
	var ve *podsecurity.ViolationError
	if !errors.As(err, &ve) {
		diags.AddAttributeError(path.Root("pod_security_level"), "Pod Security Check Failed",
			fmt.Sprintf("Container group %q: %v.", g.Name, err))
		return
	}
	at := path.Root("pod_security_level")
	if g.PodSpecOverride != "" {
		at = path.Root("pod_spec_override")
	}
	diags.AddAttributeError(at, "Run Pod Below Pod Security Level",
		fmt.Sprintf("The run pod of container group %q %s\nThe API server of %s enforces the checks of Kubernetes %s, "+
			"which refuse it; newer versions relax some of them (a pod with hostUsers: false may run as root from "+
			"v1.35 on). Make pod_spec_override meet level %q as that version checks it, or lower pod_security_level.",
			g.Name, violationList(ve), host, version, ve.Level))
}

// ensureOwnerID gives *id a fresh owner id when it holds none (a new
// definition, or one stored before owner ids). adopt: the definition was
// stored before owner ids, so it takes over, this once, the objects made for
// its name. what names the definition for the error.
func ensureOwnerID(id *string, what string, create bool, diags *diag.Diagnostics) (adopt, ok bool) {
	if managed.ValidOwnerID(*id) {
		return false, true
	}
	fresh, err := managed.NewOwnerID()
	if err != nil {
		diags.AddError("Owner Id Not Made", fmt.Sprintf("%s: %v. The system's random source failed; try again.", what, err))
		return false, false
	}
	*id = fresh
	return !create, true
}

// orphanID is the owner id that this catalog's deleted definition of the
// group left on what it provisioned, or "". The annotations it reads live in
// the run namespace, where others may write, so an id that a definition of
// the catalog still holds is never taken: copying it there must not make a
// new group the owner (and destroyer) of another group's objects.
func (r *containerGroupResource) orphanID(ctx context.Context, kube kubernetes.Interface, probe groupside.Spec) string {
	id := groupside.Orphan(ctx, kube, probe)
	if id == "" {
		return ""
	}
	store, err := r.data.catalog()
	if err != nil {
		return ""
	}
	groups, err := store.ListGroups(ctx)
	if err != nil {
		return ""
	}
	for _, g := range groups {
		if g.Value.OwnerID == id {
			tflog.Warn(ctx, "an orphan owner id in the group's namespace belongs to another container group; not taken",
				map[string]any{"group": probe.Name, "holder": g.Value.Name})
			return ""
		}
	}
	return id
}
