// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/phase"
)

var (
	_ datasource.DataSource              = (*phaseDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*phaseDataSource)(nil)
)

type phaseDataSource struct {
	data *providerData
}

func newPhaseDataSource() datasource.DataSource { return &phaseDataSource{} }

type phaseDataModel struct {
	ID          types.String `tfsdk:"id"`
	Name        types.String `tfsdk:"name"`
	Cluster     types.String `tfsdk:"cluster"`
	InventoryID types.String `tfsdk:"inventory_id"`
	Objects     types.List   `tfsdk:"objects"`
}

var phaseMemberType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"api_version": types.StringType,
	"kind":        types.StringType,
	"namespace":   types.StringType,
	"name":        types.StringType,
}}

func (d *phaseDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_phase"
}

func (d *phaseDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Reads the inventory of a `kubeplay_phase`, for example one another workspace manages: the " +
			"objects it applied, from its ApplySet parent ConfigMap `kubeplay-phase-<name>` in the catalog namespace of " +
			"its cluster. Use it to order a workspace after another's phase.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{MarkdownDescription: "The phase's name.", Computed: true},
			"name": schema.StringAttribute{
				MarkdownDescription: "The name of the phase to read.",
				Required:            true,
				Validators:          []validator.String{dnsLabel()},
			},
			"cluster": schema.StringAttribute{
				MarkdownDescription: "The name of the `kubeplay_credential` of the phase's cluster. Unset means the " +
					"provider's own cluster.",
				Optional:   true,
				Validators: []validator.String{dnsLabel()},
			},
			"inventory_id": schema.StringAttribute{
				MarkdownDescription: "The phase's ApplySet id, the value of the `applyset.kubernetes.io/part-of` label on its members.",
				Computed:            true,
			},
			"objects": schema.ListNestedAttribute{
				MarkdownDescription: "The objects the phase's inventory records, sorted by group, kind, namespace and name; " +
					"namespaced objects carry the namespace they were applied to.",
				Computed: true,
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"api_version": schema.StringAttribute{MarkdownDescription: "The object's apiVersion.", Computed: true},
					"kind":        schema.StringAttribute{MarkdownDescription: "The object's kind.", Computed: true},
					"namespace":   schema.StringAttribute{MarkdownDescription: "The object's namespace; empty for cluster-scoped objects.", Computed: true},
					"name":        schema.StringAttribute{MarkdownDescription: "The object's name.", Computed: true},
				}},
			},
		},
	}
}

func (d *phaseDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (d *phaseDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m phaseDataModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	c, err := d.data.credentialClients(ctx, m.Cluster.ValueString())
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("cluster"), "Cluster Unavailable", err.Error()+".")
		return
	}
	inv := phase.NewInventory(c.Kube, m.Name.ValueString(), d.data.catalogNamespace)
	refs, found, err := inv.Load(ctx)
	if err != nil {
		resp.Diagnostics.AddError("Reading Phase Inventory Failed", err.Error()+".")
		return
	}
	if !found {
		resp.Diagnostics.AddError("Phase Not Found",
			fmt.Sprintf("No phase %q has an inventory (ConfigMap %s/%s) on that cluster. Check the name and cluster, and "+
				"that the provider's catalog_namespace matches the workspace that applied it.", m.Name.ValueString(), inv.Namespace, inv.Name))
		return
	}
	vals := make([]attr.Value, 0, len(refs))
	for _, r := range refs {
		vals = append(vals, types.ObjectValueMust(phaseMemberType.AttrTypes, map[string]attr.Value{
			"api_version": types.StringValue(r.APIVersion()), "kind": types.StringValue(r.GroupKind.Kind),
			"namespace": types.StringValue(r.Namespace), "name": types.StringValue(r.Name),
		}))
	}
	l, diags := types.ListValue(phaseMemberType, vals)
	resp.Diagnostics.Append(diags...)
	m.ID, m.InventoryID, m.Objects = m.Name, types.StringValue(inv.ID), l
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
