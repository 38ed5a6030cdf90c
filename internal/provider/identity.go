// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/identityschema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// The catalog's resources are identified by name within the provider's
// catalog_namespace, as their import ids are. The namespace is provider
// configuration, like the cluster, so it is not part of the identity: an
// identity names the same object wherever the provider is pointed.

// nameIdentitySchema is the identity of a catalog definition: its name.
func nameIdentitySchema(what string) identityschema.Schema {
	return identityschema.Schema{Attributes: map[string]identityschema.Attribute{
		"name": identityschema.StringAttribute{
			Description:       "The " + what + "'s name in the provider's `catalog_namespace`.",
			RequiredForImport: true,
		},
	}}
}

// setIdentity copies the identity's attributes, which are all strings named as
// in the resource schema, from the first of states that is not null: Read
// passes its prior state too, since the framework wants an identity even when
// Read removes the resource. A failed create, whose state is null, gets none.
func setIdentity(ctx context.Context, identity *tfsdk.ResourceIdentity, diags *diag.Diagnostics, states ...tfsdk.State) {
	if identity == nil {
		return
	}
	for _, state := range states {
		if state.Raw.IsNull() {
			continue
		}
		for name := range identity.Schema.GetAttributes() {
			var v types.String
			src := name
			if s, ok := identitySource[name]; ok {
				src = s
			}
			diags.Append(state.GetAttribute(ctx, path.Root(src), &v)...)
			diags.Append(identity.SetAttribute(ctx, path.Root(name), v)...)
		}
		return
	}
}

// identitySource names the resource attribute an identity attribute is
// copied from where their names differ: a run's id is its run_id.
var identitySource = map[string]string{"run_id": "id"}

// setReadIdentity sets the identity when Read returns, whichever way: from
// the new state, or from the prior one when Read removed the resource.
func setReadIdentity(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	setIdentity(ctx, resp.Identity, &resp.Diagnostics, resp.State, req.State)
}

// importByName sets name and id from an import id or, with an identity, from
// its name.
func importByName(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughWithIdentity(ctx, path.Root("name"), path.Root("name"), req, resp)
	resource.ImportStatePassthroughWithIdentity(ctx, path.Root("id"), path.Root("name"), req, resp)
}

// phaseIdentityModel is a phase's identity: its name on its cluster.
type phaseIdentityModel struct {
	Name    types.String `tfsdk:"name"`
	Cluster types.String `tfsdk:"cluster"`
}

var _ resource.ResourceWithIdentity = (*runResource)(nil)

// IdentitySchema: a run is its id in its container group. The identity lets
// `terraform query` list run pods as kubeplay_run results, to find what a
// killed process left behind; a run cannot be imported, as what it did is
// known only to the apply that ran it.
func (r *runResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = identityschema.Schema{Attributes: map[string]identityschema.Attribute{
		"container_group": identityschema.StringAttribute{
			Description:       "The container group the run ran in.",
			RequiredForImport: true,
		},
		"run_id": identityschema.StringAttribute{
			Description:       "The run's id: its `id`, and its pods' `kubeplay.io/run` label.",
			RequiredForImport: true,
		},
	}}
}
