// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/credential"
)

var (
	_ datasource.DataSource              = (*credentialDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*credentialDataSource)(nil)
)

type credentialDataSource struct {
	data *providerData
}

func newCredentialDataSource() datasource.DataSource { return &credentialDataSource{} }

type credentialDataModel struct {
	ID                 types.String `tfsdk:"id"`
	Name               types.String `tfsdk:"name"`
	Kind               types.String `tfsdk:"kind"`
	Description        types.String `tfsdk:"description"`
	Host               types.String `tfsdk:"host"`
	CACert             types.String `tfsdk:"ca_cert"`
	VerifySSL          types.Bool   `tfsdk:"verify_ssl"`
	Context            types.String `tfsdk:"context"`
	AllowExecPlugin    types.Bool   `tfsdk:"allow_exec_plugin"`
	ExecSHA256         types.String `tfsdk:"exec_sha256"`
	Namespace          types.String `tfsdk:"namespace"`
	ServiceAccountName types.String `tfsdk:"service_account_name"`
	Parent             types.String `tfsdk:"parent"`
	ClusterName        types.String `tfsdk:"cluster_name"`
	ClusterNamespace   types.String `tfsdk:"cluster_namespace"`
	ServerVersion      types.String `tfsdk:"server_version"`
	Username           types.String `tfsdk:"username"`
	Groups             types.List   `tfsdk:"groups"`
	CanRunPods         types.Bool   `tfsdk:"can_run_pods"`
	MissingPermissions types.List   `tfsdk:"missing_permissions"`
	CheckedAt          types.String `tfsdk:"checked_at"`
}

func (d *credentialDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_credential"
}

func (d *credentialDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	computed := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{MarkdownDescription: desc, Computed: true}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Reads a `kubeplay_credential` from the catalog namespace by name, for example one that " +
			"another workspace manages. Secret material (tokens, kubeconfigs) is never read into Terraform.",
		Attributes: map[string]schema.Attribute{
			"id": computed("The credential's name."),
			"name": schema.StringAttribute{
				MarkdownDescription: "The name of the credential to read.",
				Required:            true,
				Validators:          []validator.String{dnsLabel()},
			},
			"kind":        computed("The credential's kind: `bearer_token`, `cluster_api`, `kubeconfig`, `provider` or `service_account`."),
			"description": computed("The credential's description."),
			"host":        computed("The API server's URL, for `bearer_token` and `service_account`."),
			"ca_cert":     computed("The PEM-encoded CA certificate, for `bearer_token`."),
			"verify_ssl":  schema.BoolAttribute{MarkdownDescription: "Whether the API server's certificate is verified.", Computed: true},
			"context":     computed("The kubeconfig context, for `kubeconfig`."),
			"allow_exec_plugin": schema.BoolAttribute{
				MarkdownDescription: "For `kubeconfig`: whether the credential declares that its kubeconfig's `exec` " +
					"credential plugin may run. It lets the plugin run only where the provider of the workspace that uses " +
					"the credential also pins it in `exec_plugin_credentials` by its `exec_sha256`.",
				Computed: true,
			},
			"exec_sha256": computed("For `kubeconfig`: the SHA-256 of the kubeconfig's `exec` blocks as the catalog holds " +
				"them now, which `exec_plugin_credentials` pins; null without `exec`. Whoever can write the catalog can " +
				"change it: compare it with the digest the credential's owner gives before you pin it."),
			"namespace":            computed("The namespace checked for run permissions, or the service account's namespace."),
			"service_account_name": computed("The provisioned ServiceAccount, for `service_account`."),
			"parent":               computed("The credential of the parent (management) cluster, for `cluster_api`."),
			"cluster_name":         computed("The Cluster API cluster whose `<cluster_name>-kubeconfig` Secret holds the kubeconfig, for `cluster_api`."),
			"cluster_namespace":    computed("The namespace of that Secret on the parent cluster, for `cluster_api`."),
			"server_version":       computed("The Kubernetes version reported at the last check."),
			"username":             computed("The identity the API server authenticated the credential as."),
			"groups": schema.ListAttribute{
				MarkdownDescription: "The groups of that identity.", Computed: true, ElementType: types.StringType,
			},
			"can_run_pods": schema.BoolAttribute{
				MarkdownDescription: "Whether the credential had every run permission in `namespace` at the last check.",
				Computed:            true,
			},
			"missing_permissions": schema.ListAttribute{
				MarkdownDescription: "The run permissions the credential lacked at the last check.", Computed: true,
				ElementType: types.StringType,
			},
			"checked_at": computed("When the credential was last checked (RFC 3339)."),
		},
	}
}

func (d *credentialDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (d *credentialDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m credentialDataModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := m.Name.ValueString()
	// A credential whose Secret was changed outside kubeplay is refused, as
	// everywhere it would be used.
	e, ok := readForDataSource(ctx, d.data, catalog.KindCredential, name, (*catalog.Store).TrustedCredential, &resp.Diagnostics)
	if !ok {
		return
	}
	spec, rep := e.Value.Spec, e.Value.Report
	m.ID = types.StringValue(name)
	m.Kind = types.StringValue(spec.Kind)
	m.Description = stringOrNull(spec.Description)
	m.Host = stringOrNull(spec.Host)
	m.CACert = types.StringNull()
	if spec.Kind == credential.KindBearerToken {
		m.CACert = stringOrNull(spec.CACert)
	}
	m.VerifySSL = types.BoolValue(spec.VerifySSL)
	m.Context = stringOrNull(spec.Context)
	m.AllowExecPlugin = types.BoolValue(spec.AllowExecPlugin)
	m.ExecSHA256 = stringOrNull(spec.ExecSHA256())
	m.Namespace = stringOrNull(spec.Namespace)
	m.ServiceAccountName = stringOrNull(spec.ServiceAccount)
	m.Parent = stringOrNull(spec.Parent)
	m.ClusterName = stringOrNull(spec.ClusterName)
	m.ClusterNamespace = stringOrNull(spec.ClusterNamespace)
	m.ServerVersion = types.StringValue(rep.ServerVersion)
	m.Username = types.StringValue(rep.Username)
	groups, diags := types.ListValueFrom(ctx, types.StringType, nonNil(rep.Groups))
	m.Groups = groups
	resp.Diagnostics.Append(diags...)
	m.MissingPermissions, diags = types.ListValueFrom(ctx, types.StringType, nonNil(rep.Missing))
	resp.Diagnostics.Append(diags...)
	m.CanRunPods = types.BoolValue(rep.CanRun())
	m.CheckedAt = types.StringValue(checkedAt(e.Value.CheckedAt))
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
