// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
)

var (
	_ datasource.DataSource              = (*nodeLabelDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*nodeLabelDataSource)(nil)
)

type nodeLabelDataSource struct {
	data *providerData
}

func newNodeLabelDataSource() datasource.DataSource { return &nodeLabelDataSource{} }

func (d *nodeLabelDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_node_label"
}

func (d *nodeLabelDataSource) Schema(ctx context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = dataSchemaFrom(ctx, newNodeLabelResource(),
		"Reads a `kubeplay_node_label` from the catalog namespace by name, for example one that another workspace "+
			"manages, with its rendered pod template.",
		"The name of the node label to read.")
}

func (d *nodeLabelDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (d *nodeLabelDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m nodeLabelModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := m.Name.ValueString()
	e, ok := readForDataSource(ctx, d.data, catalog.KindLabel, name, (*catalog.Store).GetLabel, &resp.Diagnostics)
	if !ok {
		return
	}
	fillLabel(ctx, e.Value, &m, e.Rendered, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
