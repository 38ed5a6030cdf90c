// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/list"
	listschema "github.com/hashicorp/terraform-plugin-framework/list/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/phase"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
)

var _ list.ListResourceWithConfigure = (*catalogList)(nil)

// catalogList lists one kind of definition, so that `terraform query` finds
// those another state made and writes configuration that imports them.
type catalogList struct {
	kind        string // the type name's suffix: container_group
	what        string // for messages and docs: container group
	note        string // what generated configuration lacks, for the docs
	newResource func() listedResource
	// find lists the definitions as identities (name, and cluster for a
	// phase), each with what fills the resource for include_resource.
	find func(ctx context.Context, d *providerData, cfg catalogListModel, diags *diag.Diagnostics) []listed
	data *providerData
}

// listedResource is a resource a catalogList fills: configured, then
// imported from the identity.
type listedResource interface {
	resource.ResourceWithConfigure
	resource.ResourceWithImportState
}

// listed is one definition found. fill sets the resource, imported from the
// identity, as Read would.
type listed struct {
	identity map[string]types.String
	fill     filler
}

// catalogListModel is the list configuration; cluster is a phase's only.
type catalogListModel struct {
	NamePrefix, Cluster types.String
}

func newCredentialList() list.ListResource {
	return &catalogList{kind: "credential", what: "credential", newResource: func() listedResource { return &credentialResource{} }, find: findCredentials,
		note: "A `bearer_token` or `kubeconfig` credential's secret is write-only and never listed: add `bearer_token_wo` " +
			"or `kubeconfig_wo` to its generated block before the apply that imports it."}
}

func newContainerGroupList() list.ListResource {
	return &catalogList{kind: "container_group", what: "container group", newResource: func() listedResource { return &containerGroupResource{} }, find: findGroups}
}

func newNodeLabelList() list.ListResource {
	return &catalogList{kind: "node_label", what: "node label", newResource: func() listedResource { return &nodeLabelResource{} }, find: findLabels}
}

func newPhaseList() list.ListResource {
	return &catalogList{kind: "phase", what: "phase", newResource: func() listedResource { return &phaseResource{} }, find: findPhases,
		note: "A phase's documents and kustomization are not stored on the cluster, only the objects it applied: an imported " +
			"phase lists those, and the plan after the import applies the documents or kustomization you add to its block."}
}

func (l *catalogList) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_" + l.kind
}

func (l *catalogList) ListResourceConfigSchema(_ context.Context, _ list.ListResourceSchemaRequest, resp *list.ListResourceSchemaResponse) {
	resp.Schema = listschema.Schema{
		MarkdownDescription: "Lists the " + l.what + "s in the provider's `catalog_namespace`, whichever state made them, " +
			"for `terraform query`. Each result is the " + l.what + "'s identity; with `include_resource = true` also the " +
			"resource as Read gives it after an import. Write-only and sensitive values are never returned. " + l.note,
		Attributes: map[string]listschema.Attribute{
			"name_prefix": listschema.StringAttribute{
				MarkdownDescription: "Only the " + l.what + "s whose name starts with this.",
				Optional:            true,
			},
		},
	}
	if l.kind == "phase" {
		resp.Schema.Attributes["cluster"] = listschema.StringAttribute{
			MarkdownDescription: "The `kubeplay_credential` whose cluster to list the phases of; unset for the provider's own cluster.",
			Optional:            true,
		}
	}
}

func (l *catalogList) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	l.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (l *catalogList) List(ctx context.Context, req list.ListRequest, stream *list.ListResultsStream) {
	var cfg catalogListModel
	diags := req.Config.GetAttribute(ctx, path.Root("name_prefix"), &cfg.NamePrefix)
	if l.kind == "phase" {
		diags.Append(req.Config.GetAttribute(ctx, path.Root("cluster"), &cfg.Cluster)...)
	}
	var found []listed
	if !diags.HasError() {
		found = l.find(ctx, l.data, cfg, &diags)
	}
	if diags.HasError() {
		stream.Results = list.ListResultsStreamDiagnostics(diags)
		return
	}
	prefix := cfg.NamePrefix.ValueString()
	stream.Results = func(push func(list.ListResult) bool) {
		n := int64(0)
		for _, f := range found {
			name := f.identity["name"].ValueString()
			if !strings.HasPrefix(name, prefix) {
				continue
			}
			if req.Limit > 0 && n >= req.Limit {
				return
			}
			n++
			if !push(l.result(ctx, req, f)) {
				return
			}
		}
	}
}

// result is one definition's list result: its identity, a display name and,
// when asked for, the resource.
func (l *catalogList) result(ctx context.Context, req list.ListRequest, f listed) list.ListResult {
	res := req.NewListResult(ctx)
	res.DisplayName = l.what + " " + f.identity["name"].ValueString()
	if c := f.identity["cluster"]; !c.IsNull() && c.ValueString() != "" {
		res.DisplayName += " on " + c.ValueString()
	}
	for k, v := range f.identity {
		res.Diagnostics.Append(res.Identity.SetAttribute(ctx, path.Root(k), v)...)
	}
	if req.IncludeResource && !res.Diagnostics.HasError() {
		r := l.newResource()
		r.Configure(ctx, resource.ConfigureRequest{ProviderData: l.data}, &resource.ConfigureResponse{})
		st := importedState(ctx, r, req, res.Identity, &res.Diagnostics)
		if !res.Diagnostics.HasError() {
			f.fill(ctx, r, &st, &res.Diagnostics)
		}
		if !res.Diagnostics.HasError() {
			res.Resource.Raw = withoutSensitive(ctx, st, &res.Diagnostics)
		}
	}
	return res
}

// importedState is the state the resource's ImportState makes from the
// identity, as `terraform import` would before Read.
func importedState(ctx context.Context, r listedResource, req list.ListRequest, id *tfsdk.ResourceIdentity, diags *diag.Diagnostics) tfsdk.State {
	resp := resource.ImportStateResponse{
		State:    tfsdk.State{Raw: tftypes.NewValue(req.ResourceSchema.Type().TerraformType(ctx), nil), Schema: req.ResourceSchema},
		Identity: &tfsdk.ResourceIdentity{Raw: id.Raw.Copy(), Schema: id.Schema},
	}
	r.ImportState(ctx, resource.ImportStateRequest{Identity: id}, &resp)
	diags.Append(resp.Diagnostics...)
	return resp.State
}

// withoutSensitive is the state with its sensitive attributes null: a
// listed resource is shown and written to generated configuration, so a
// secret stays in the cluster.
func withoutSensitive(ctx context.Context, st tfsdk.State, diags *diag.Diagnostics) tftypes.Value {
	for name, a := range st.Schema.GetAttributes() {
		if a.IsSensitive() {
			setNull(ctx, &st, name, diags)
		}
	}
	return st.Raw
}

// setNull sets a top-level attribute of st to null.
func setNull(ctx context.Context, st *tfsdk.State, name string, diags *diag.Diagnostics) {
	t := st.Schema.GetAttributes()[name].GetType()
	null, err := t.ValueFromTerraform(ctx, tftypes.NewValue(t.TerraformType(ctx), nil))
	if err != nil {
		diags.AddError("Internal Error", fmt.Sprintf("Clearing sensitive attribute %s of a listed resource failed: %v. "+
			"This is a bug in the provider; please report it.", name, err))
		return
	}
	diags.Append(st.SetAttribute(ctx, path.Root(name), null)...)
}

// fillFrom sets a model of type M from the imported state with set.
func fillFrom[M any](set func(ctx context.Context, r resource.Resource, m *M, diags *diag.Diagnostics)) filler {
	return func(ctx context.Context, r resource.Resource, st *tfsdk.State, diags *diag.Diagnostics) {
		var m M
		diags.Append(st.Get(ctx, &m)...)
		if diags.HasError() {
			return
		}
		set(ctx, r, &m, diags)
		diags.Append(st.Set(ctx, &m)...)
	}
}

// filler sets a listed resource, imported from its identity, as Read would.
type filler = func(ctx context.Context, r resource.Resource, st *tfsdk.State, diags *diag.Diagnostics)

// findEntries lists a kind of definition from the catalog; each gives an
// entry's name and filler.
func findEntries[T any](ctx context.Context, d *providerData, list func(*catalog.Store, context.Context) ([]catalog.Entry[T], error),
	each func(catalog.Entry[T]) (string, filler), diags *diag.Diagnostics,
) []listed {
	store := d.catalogReader(diags)
	if store == nil {
		return nil
	}
	entries, err := list(store, ctx)
	if err != nil {
		addCatalogError(diags, err)
		return nil
	}
	out := make([]listed, 0, len(entries))
	for _, e := range entries {
		name, fill := each(e)
		out = append(out, listed{identity: map[string]types.String{"name": types.StringValue(name)}, fill: fill})
	}
	return out
}

func findCredentials(ctx context.Context, d *providerData, _ catalogListModel, diags *diag.Diagnostics) []listed {
	return findEntries(ctx, d, (*catalog.Store).ListCredentials, func(e catalog.Entry[catalog.Credential]) (string, filler) {
		fill := fillFrom(func(ctx context.Context, _ resource.Resource, m *credentialModel, diags *diag.Diagnostics) {
			(&credentialResource{data: d}).fill(ctx, m, e.Value.Spec, e.Value.Report, checkedAt(e.Value.CheckedAt), diags)
		})
		// Read fills some attributes of other kinds (a provider credential's
		// host): generated configuration must leave them out, as
		// ValidateConfig refuses them.
		return e.Value.Spec.Name, func(ctx context.Context, r resource.Resource, st *tfsdk.State, diags *diag.Diagnostics) {
			fill(ctx, r, st, diags)
			for _, name := range kindSpecificAttributes {
				if !contains(kindAttributes[e.Value.Spec.Kind], name) {
					setNull(ctx, st, name, diags)
				}
			}
		}
	}, diags)
}

func findGroups(ctx context.Context, d *providerData, _ catalogListModel, diags *diag.Diagnostics) []listed {
	return findEntries(ctx, d, (*catalog.Store).ListGroups, func(e catalog.Entry[catalog.Group]) (string, filler) {
		return e.Value.Name, fillFrom(func(ctx context.Context, _ resource.Resource, m *containerGroupModel, diags *diag.Diagnostics) {
			fillGroup(ctx, e.Value, m, e.Rendered, diags)
			m.WarmRevision = warmRevision(ctx, d, e.Value, false)
		})
	}, diags)
}

func findLabels(ctx context.Context, d *providerData, _ catalogListModel, diags *diag.Diagnostics) []listed {
	return findEntries(ctx, d, (*catalog.Store).ListLabels, func(e catalog.Entry[podspec.Label]) (string, filler) {
		return e.Value.Name, fillFrom(func(ctx context.Context, _ resource.Resource, m *nodeLabelModel, diags *diag.Diagnostics) {
			fillLabel(ctx, e.Value, m, e.Rendered, diags)
		})
	}, diags)
}

// findPhases lists the phase inventories on the cluster; include_resource
// runs the phase's Read, which lists an imported phase's recorded objects.
func findPhases(ctx context.Context, d *providerData, cfg catalogListModel, diags *diag.Diagnostics) []listed {
	c, err := d.credentialClients(ctx, cfg.Cluster.ValueString())
	if err != nil {
		diags.AddAttributeError(path.Root("cluster"), "Cluster Unavailable", "Listing phases: "+err.Error()+
			". Check that the credential named in `cluster` exists in the catalog and can reach its cluster (the "+
			"kubeplay_credential data source reads it).")
		return nil
	}
	names, err := phase.Phases(ctx, c.Kube, d.catalogNamespace)
	if err != nil {
		diags.AddError("Listing Phases Failed", fmt.Sprintf("%v. Check that the credential may list ConfigMaps in "+
			"namespace %s, where phase inventories are kept.", err, d.catalogNamespace))
		return nil
	}
	out := make([]listed, 0, len(names))
	for _, n := range names {
		out = append(out, listed{identity: map[string]types.String{"name": types.StringValue(n), "cluster": stringOrNull(cfg.Cluster.ValueString())}, fill: readPhase})
	}
	return out
}

func readPhase(ctx context.Context, r resource.Resource, st *tfsdk.State, diags *diag.Diagnostics) {
	resp := resource.ReadResponse{State: tfsdk.State{Raw: st.Raw.Copy(), Schema: st.Schema}}
	r.Read(ctx, resource.ReadRequest{State: *st}, &resp)
	diags.Append(resp.Diagnostics...)
	*st = resp.State
}
