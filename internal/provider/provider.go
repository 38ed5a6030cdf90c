// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

// Package provider implements the kubeplay Terraform provider.
package provider

import (
	"context"
	"fmt"
	"os"

	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/action"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	"github.com/hashicorp/terraform-plugin-framework/list"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalogkey"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/connect"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/tfinvocation"
)

var (
	_ provider.Provider                       = (*kubeplayProvider)(nil)
	_ provider.ProviderWithValidateConfig     = (*kubeplayProvider)(nil)
	_ provider.ProviderWithListResources      = (*kubeplayProvider)(nil)
	_ provider.ProviderWithActions            = (*kubeplayProvider)(nil)
	_ provider.ProviderWithEphemeralResources = (*kubeplayProvider)(nil)
)

// DefaultCatalogNamespace holds the Secrets, ConfigMaps and PodTemplates that
// store kubeplay's definitions.
const DefaultCatalogNamespace = "kubeplay-system"

type kubeplayProvider struct {
	version string
	// invocation tells which Terraform command started the provider; tests
	// that serve it in-process give their own (newWithInvocation).
	invocation func() tfinvocation.Invocation
}

// New returns the provider factory for version.
func New(version string) func() provider.Provider {
	return newWithInvocation(version, tfinvocation.Current)
}

func newWithInvocation(version string, inv func() tfinvocation.Invocation) func() provider.Provider {
	return func() provider.Provider {
		return &kubeplayProvider{version: version, invocation: inv}
	}
}

type providerModel struct {
	Host                  types.String `tfsdk:"host"`
	Token                 types.String `tfsdk:"token"`
	Insecure              types.Bool   `tfsdk:"insecure"`
	TLSServerName         types.String `tfsdk:"tls_server_name"`
	ClientCertificate     types.String `tfsdk:"client_certificate"`
	ClientKey             types.String `tfsdk:"client_key"`
	ClusterCACertificate  types.String `tfsdk:"cluster_ca_certificate"`
	ConfigPath            types.String `tfsdk:"config_path"`
	ConfigPaths           types.List   `tfsdk:"config_paths"`
	ConfigContext         types.String `tfsdk:"config_context"`
	ConfigContextAuthInfo types.String `tfsdk:"config_context_auth_info"`
	ConfigContextCluster  types.String `tfsdk:"config_context_cluster"`
	ProxyURL              types.String `tfsdk:"proxy_url"`
	CatalogNamespace      types.String `tfsdk:"catalog_namespace"`
	CatalogKey            types.String `tfsdk:"catalog_key"`
	PreviousCatalogKeys   types.List   `tfsdk:"previous_catalog_keys"`
	Exec                  *execModel   `tfsdk:"exec"`
	GroupDefaultChecks    types.Bool   `tfsdk:"group_default_plan_checks"`
	DisablePlanChecks     types.Bool   `tfsdk:"disable_plan_checks"`
	ExecPluginCredentials types.Map    `tfsdk:"exec_plugin_credentials"`
}

type execModel struct {
	APIVersion types.String `tfsdk:"api_version"`
	Command    types.String `tfsdk:"command"`
	Args       types.List   `tfsdk:"args"`
	Env        types.Map    `tfsdk:"env"`
}

func (p *kubeplayProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "kubeplay"
	resp.Version = p.version
}

func (p *kubeplayProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	env := kubeclient.EnvVars
	resp.Schema = schema.Schema{
		MarkdownDescription: "The kubeplay provider runs Ansible playbooks in ephemeral Kubernetes pods and applies " +
			"bundles of Kubernetes documents as phases. Its connection settings follow the `hashicorp/kubernetes` provider, " +
			"so an existing provider block can be copied. Settings are taken, in order, from kubeconfig files " +
			"(`config_path`, `config_paths`, `KUBE_CONFIG_PATH`, `KUBE_CONFIG_PATHS`) with the explicit attributes applied " +
			"over them; from the explicit attributes alone (`host`, `token`, certificates, `exec`); from `KUBECONFIG` when " +
			"nothing explicit is set; and last from the in-cluster service account.",
		Attributes: map[string]schema.Attribute{
			"host": schema.StringAttribute{
				MarkdownDescription: "The address of the Kubernetes API server, for example `https://127.0.0.1:6443`. " +
					"Can be set with `" + env.Host + "`.",
				Optional:   true,
				Validators: []validator.String{httpURL()},
			},
			"token": schema.StringAttribute{
				MarkdownDescription: "A bearer token to authenticate with. Can be set with `" + env.Token + "`. " +
					"Conflicts with `client_certificate` and `exec`.",
				Optional:  true,
				Sensitive: true,
				Validators: []validator.String{
					stringvalidator.ConflictsWith(path.MatchRoot("client_certificate"), path.MatchRoot("exec")),
				},
			},
			"insecure": schema.BoolAttribute{
				MarkdownDescription: "Whether to skip verification of the API server's certificate. Defaults to `false`. " +
					"Conflicts with `cluster_ca_certificate`. Can be set with `" + env.Insecure + "`.",
				Optional: true,
			},
			"tls_server_name": schema.StringAttribute{
				MarkdownDescription: "The server name to verify the API server's certificate against, when it differs " +
					"from the host name in `host`. Can be set with `" + env.TLSServerName + "`.",
				Optional: true,
			},
			"client_certificate": schema.StringAttribute{
				MarkdownDescription: "A PEM-encoded client certificate for TLS authentication. Requires `client_key`. " +
					"Can be set with `" + env.ClientCertificate + "`.",
				Optional: true,
				Validators: []validator.String{
					stringvalidator.AlsoRequires(path.MatchRoot("client_key")),
					pemBlock("CERTIFICATE"),
				},
			},
			"client_key": schema.StringAttribute{
				MarkdownDescription: "The PEM-encoded private key of `client_certificate`. Requires `client_certificate`. " +
					"Can be set with `" + env.ClientKey + "`.",
				Optional:  true,
				Sensitive: true,
				Validators: []validator.String{
					stringvalidator.AlsoRequires(path.MatchRoot("client_certificate")),
					pemBlock("PRIVATE KEY"),
				},
			},
			"cluster_ca_certificate": schema.StringAttribute{
				MarkdownDescription: "The PEM-encoded root certificate of the API server. When unset, the system's roots " +
					"are used. Can be set with `" + env.ClusterCACertificate + "`.",
				Optional:   true,
				Validators: []validator.String{pemBlock("CERTIFICATE")},
			},
			"config_path": schema.StringAttribute{
				MarkdownDescription: "The path of a kubeconfig file. Conflicts with `config_paths`. Can be set with `" +
					env.ConfigPath + "`.",
				Optional: true,
				Validators: []validator.String{
					stringvalidator.ConflictsWith(path.MatchRoot("config_paths")),
					stringvalidator.LengthAtLeast(1),
				},
			},
			"config_paths": schema.ListAttribute{
				MarkdownDescription: "A list of kubeconfig files, merged as `kubectl` merges `KUBECONFIG`. Conflicts with " +
					"`config_path`. Can be set with `" + env.ConfigPaths + "`, separated by the system's path-list separator.",
				Optional:    true,
				ElementType: types.StringType,
				Validators:  []validator.List{listvalidator.SizeAtLeast(1)},
			},
			"config_context": schema.StringAttribute{
				MarkdownDescription: "The kubeconfig context to use instead of its current context. Can be set with `" +
					env.ConfigContext + "`.",
				Optional: true,
			},
			"config_context_auth_info": schema.StringAttribute{
				MarkdownDescription: "The kubeconfig user to use instead of the context's. Can be set with `" +
					env.ConfigContextAuthInfo + "`.",
				Optional: true,
			},
			"config_context_cluster": schema.StringAttribute{
				MarkdownDescription: "The kubeconfig cluster to use instead of the context's. Can be set with `" +
					env.ConfigContextCluster + "`.",
				Optional: true,
			},
			"proxy_url": schema.StringAttribute{
				MarkdownDescription: "The URL of a proxy for every request to the API server. Can be set with `" +
					env.ProxyURL + "`.",
				Optional:   true,
				Validators: []validator.String{httpURL()},
			},
			"catalog_namespace": schema.StringAttribute{
				MarkdownDescription: "The namespace, in the provider's cluster, that stores kubeplay's definitions: " +
					"credentials as Secrets, container groups as ConfigMaps and node labels as PodTemplates. Created when " +
					"missing. Defaults to `" + DefaultCatalogNamespace + "`.",
				Optional:   true,
				Validators: []validator.String{dnsLabel()},
			},
			"catalog_key":             catalogKeyAttribute(),
			"previous_catalog_keys":   previousCatalogKeysAttribute(),
			"exec_plugin_credentials": execPluginCredentialsAttribute(),

			"group_default_plan_checks": groupDefaultPlanChecksAttribute(),
			"disable_plan_checks":       disablePlanChecksAttribute(),
		},
		Blocks: map[string]schema.Block{
			"exec": schema.SingleNestedBlock{
				MarkdownDescription: "A client-go credential plugin that prints a token, as in a kubeconfig's `exec` user. client-go runs " +
					"it again whenever its token expires. Conflicts with `token`. When the block is present, " +
					"`api_version` and `command` must be set in it.",
				Attributes: map[string]schema.Attribute{
					"api_version": schema.StringAttribute{
						MarkdownDescription: "The `client.authentication.k8s.io` version the plugin speaks: " +
							"`client.authentication.k8s.io/v1` or `client.authentication.k8s.io/v1beta1`. Required when the block " +
							"is present.",
						Optional: true,
						Validators: []validator.String{
							stringvalidator.OneOf("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"),
						},
					},
					"command": schema.StringAttribute{
						MarkdownDescription: "The plugin's executable, a path or a name on `PATH`. Required when the block is present.",
						Optional:            true,
						Validators:          []validator.String{stringvalidator.LengthAtLeast(1)},
					},
					"args": schema.ListAttribute{
						MarkdownDescription: "Arguments passed to the plugin.",
						Optional:            true,
						ElementType:         types.StringType,
					},
					"env": schema.MapAttribute{
						MarkdownDescription: "Environment variables added to the plugin's environment.",
						Optional:            true,
						ElementType:         types.StringType,
					},
				},
			},
		},
	}
}

func (p *kubeplayProvider) ValidateConfig(ctx context.Context, req provider.ValidateConfigRequest, resp *provider.ValidateConfigResponse) {
	var m providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	switch {
	case m.Insecure.ValueBool() && !m.ClusterCACertificate.IsNull():
		resp.Diagnostics.AddAttributeError(path.Root("insecure"), "Contradictory TLS Settings",
			"insecure = true skips verification of the API server's certificate, while cluster_ca_certificate asks to "+
				"verify it against that CA. Remove one of the two: keep cluster_ca_certificate to verify the server (recommended).")
	case m.Insecure.ValueBool():
		warnInsecureTLS(&resp.Diagnostics, path.Root("insecure"), "insecure = true", "set cluster_ca_certificate to the "+
			"PEM certificate of the CA that signed the API server's certificate and remove insecure")
	}
	if m.Exec != nil {
		if m.Exec.Command.IsNull() {
			resp.Diagnostics.AddAttributeError(path.Root("exec").AtName("command"), "Missing Exec Command",
				"The exec block needs command: the credential plugin that prints an ExecCredential. Set command, or remove the block.")
		}
		if m.Exec.APIVersion.IsNull() {
			resp.Diagnostics.AddAttributeError(path.Root("exec").AtName("api_version"), "Missing Exec API Version",
				"The exec block needs api_version, the version of client.authentication.k8s.io the plugin prints, "+
					"for example client.authentication.k8s.io/v1.")
		}
		if !m.ClientCertificate.IsNull() {
			resp.Diagnostics.AddAttributeError(path.Root("exec"), "Contradictory Authentication Settings",
				"Both exec and client_certificate authenticate the provider. Keep one of them.")
		}
	}
}

func (p *kubeplayProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var m providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	data := &providerData{
		pool:             kubeclient.NewPool(),
		catalogNamespace: DefaultCatalogNamespace,
		version:          p.version,
	}
	if p.invocation != nil { // else unknown: no check
		data.invocation = p.invocation()
	}
	data.connect = connect.New(data.pool, data.clients, data.catalog, m.execPluginCredentials())
	resp.DataSourceData = data
	resp.ResourceData = data
	resp.ListResourceData = data
	resp.ActionData = data
	resp.EphemeralResourceData = data
	if !m.CatalogNamespace.IsNull() && !m.CatalogNamespace.IsUnknown() {
		data.catalogNamespace = m.CatalogNamespace.ValueString()
	}
	key, diags := catalogKeyFrom(m.CatalogKey, os.Getenv)
	if resp.Diagnostics.Append(diags...); resp.Diagnostics.HasError() {
		return
	}
	data.catalogKey = key
	data.checks, diags = checkSwitchesFrom(m.GroupDefaultChecks, m.DisablePlanChecks, os.Getenv)
	if resp.Diagnostics.Append(diags...); resp.Diagnostics.HasError() {
		return
	}
	data.previousKeys, diags = previousCatalogKeysFrom(ctx, m.PreviousCatalogKeys)
	if resp.Diagnostics.Append(diags...); resp.Diagnostics.HasError() {
		return
	}
	if !req.Config.Raw.IsFullyKnown() {
		// Known after another resource is applied: resources report this when
		// they need the cluster, which keeps `terraform plan` of other parts working.
		data.configUnknown = true
		tflog.Debug(ctx, "provider configuration depends on unknown values; connecting is deferred")
		return
	}
	settings, diags := m.settings(ctx)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	settings.UserAgent = "terraform-provider-kubeplay/" + p.version
	if err := settings.ApplyEnv(os.Getenv); err != nil {
		resp.Diagnostics.AddError("Invalid Provider Environment", err.Error()+". Fix or unset the variable.")
		return
	}
	cfg, src, err := settings.RESTConfig(os.Getenv)
	if err != nil {
		resp.Diagnostics.AddError("Invalid Kubernetes Connection",
			"The provider could not build its Kubernetes connection: "+err.Error()+".")
		return
	}
	data.restConfig = cfg
	if cfg.Insecure && !m.Insecure.ValueBool() {
		// From a kubeconfig's insecure-skip-tls-verify or KUBE_INSECURE; the
		// attribute itself is warned about in ValidateConfig.
		warnInsecureTLS(&resp.Diagnostics, path.Empty(), fmt.Sprintf("the provider's connection from %s", src),
			"give the CA certificate: certificate-authority-data in the kubeconfig, cluster_ca_certificate, or "+
				"KUBE_CLUSTER_CA_CERT_DATA, and remove insecure-skip-tls-verify or KUBE_INSECURE")
	}
	tflog.Debug(ctx, "provider connection configured", map[string]any{"source": string(src), "host": cfg.Host})
}

func (m *providerModel) settings(ctx context.Context) (kubeclient.Settings, diag.Diagnostics) {
	var diags diag.Diagnostics
	s := kubeclient.Settings{
		Host:                  m.Host.ValueString(),
		Token:                 m.Token.ValueString(),
		TLSServerName:         m.TLSServerName.ValueString(),
		ClientCertificate:     m.ClientCertificate.ValueString(),
		ClientKey:             m.ClientKey.ValueString(),
		ClusterCACertificate:  m.ClusterCACertificate.ValueString(),
		ConfigContext:         m.ConfigContext.ValueString(),
		ConfigContextAuthInfo: m.ConfigContextAuthInfo.ValueString(),
		ConfigContextCluster:  m.ConfigContextCluster.ValueString(),
		ProxyURL:              m.ProxyURL.ValueString(),
	}
	if !m.Insecure.IsNull() {
		v := m.Insecure.ValueBool()
		s.Insecure = &v
	}
	if !m.ConfigPath.IsNull() {
		s.ConfigPaths = []string{m.ConfigPath.ValueString()}
	}
	if !m.ConfigPaths.IsNull() {
		diags.Append(m.ConfigPaths.ElementsAs(ctx, &s.ConfigPaths, false)...)
	}
	if m.Exec != nil && !m.Exec.Command.IsNull() {
		e := &kubeclient.ExecSettings{APIVersion: m.Exec.APIVersion.ValueString(), Command: m.Exec.Command.ValueString()}
		if !m.Exec.Args.IsNull() {
			diags.Append(m.Exec.Args.ElementsAs(ctx, &e.Args, false)...)
		}
		if !m.Exec.Env.IsNull() {
			diags.Append(m.Exec.Env.ElementsAs(ctx, &e.Env, false)...)
		}
		s.Exec = e
	}
	return s, diags
}

func (p *kubeplayProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{
		newCredentialResource,
		newContainerGroupResource,
		newNodeLabelResource,
		newPhaseResource,
		newClusterctlResource,
		newRunResource,
		newNodeResource,
	}
}

func (p *kubeplayProvider) ListResources(context.Context) []func() list.ListResource {
	return []func() list.ListResource{
		newCredentialList,
		newContainerGroupList,
		newNodeLabelList,
		newPhaseList,
		newRunList,
	}
}

func (p *kubeplayProvider) Actions(context.Context) []func() action.Action {
	return []func() action.Action{newRunAction}
}

func (p *kubeplayProvider) EphemeralResources(context.Context) []func() ephemeral.EphemeralResource {
	return []func() ephemeral.EphemeralResource{newNodeKubeconfigEphemeral}
}

func (p *kubeplayProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{
		newCredentialDataSource,
		newContainerGroupDataSource,
		newNodeLabelDataSource,
		newPhaseDataSource,
	}
}

// envCatalogKey sets catalog_key when the configuration does not.
const envCatalogKey = "KUBEPLAY_CATALOG_KEY"

func catalogKeyAttribute() schema.StringAttribute {
	return schema.StringAttribute{
		MarkdownDescription: "The key with which kubeplay signs and checks the catalog's definitions. At least " +
			fmt.Sprint(catalogkey.MinLength) + " bytes, from a secret store (for example an ephemeral value); can be " +
			"set with `" + envCatalogKey + "`. Without it, kubeplay keeps a random key in the Secret `" +
			catalogkey.SecretName + "` of `catalog_namespace`; workspaces that share a catalog must share the key ([Security " +
			"model](guides/security-model.md#the-catalog-key)).",
		Optional:   true,
		Sensitive:  true,
		Validators: []validator.String{stringvalidator.LengthAtLeast(catalogkey.MinLength)},
	}
}

// catalogKeyFrom is the configured catalog key, or the environment's; nil
// for none (the key Secret).
func catalogKeyFrom(v types.String, getenv func(string) string) ([]byte, diag.Diagnostics) {
	var diags diag.Diagnostics
	if v.IsUnknown() {
		return nil, diags // known at apply: the configuration is not fully known, and nothing connects
	}
	key, from := v.ValueString(), "catalog_key"
	if v.IsNull() {
		key, from = getenv(envCatalogKey), envCatalogKey
	}
	if key != "" && len(key) < catalogkey.MinLength {
		diags.AddAttributeError(path.Root("catalog_key"), "Catalog Key Too Short",
			fmt.Sprintf("%s is %d bytes long; a catalog key needs at least %d, so that nobody can guess it. Generate "+
				"one, for example with `openssl rand -base64 48`, and give the same key to every workspace that shares "+
				"the catalog.", from, len(key), catalogkey.MinLength))
		return nil, diags
	}
	if key == "" {
		return nil, diags
	}
	return []byte(key), diags
}
