// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/credential"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

var (
	_ resource.Resource                   = (*credentialResource)(nil)
	_ resource.ResourceWithConfigure      = (*credentialResource)(nil)
	_ resource.ResourceWithImportState    = (*credentialResource)(nil)
	_ resource.ResourceWithIdentity       = (*credentialResource)(nil)
	_ resource.ResourceWithValidateConfig = (*credentialResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*credentialResource)(nil)
)

// credentialCheckTimeout bounds the reachability and permission checks, so an
// unreachable host fails the apply instead of hanging it.
const credentialCheckTimeout = 30 * time.Second

type credentialResource struct {
	data *providerData
}

func newCredentialResource() resource.Resource { return &credentialResource{} }

type credentialModel struct {
	ID                 types.String `tfsdk:"id"`
	Name               types.String `tfsdk:"name"`
	Kind               types.String `tfsdk:"kind"`
	Description        types.String `tfsdk:"description"`
	Host               types.String `tfsdk:"host"`
	BearerTokenWO      types.String `tfsdk:"bearer_token_wo"`
	BearerTokenVersion types.Int64  `tfsdk:"bearer_token_wo_version"`
	CACert             types.String `tfsdk:"ca_cert"`
	VerifySSL          types.Bool   `tfsdk:"verify_ssl"`
	KubeconfigWO       types.String `tfsdk:"kubeconfig_wo"`
	KubeconfigVersion  types.Int64  `tfsdk:"kubeconfig_wo_version"`
	Context            types.String `tfsdk:"context"`
	AllowExecPlugin    types.Bool   `tfsdk:"allow_exec_plugin"`
	ExecSHA256         types.String `tfsdk:"exec_sha256"`
	Namespace          types.String `tfsdk:"namespace"`
	ServiceAccountName types.String `tfsdk:"service_account_name"`
	ExportKubeconfig   types.Bool   `tfsdk:"export_kubeconfig"`
	ExportedKubeconfig types.String `tfsdk:"exported_kubeconfig"`
	ServerVersion      types.String `tfsdk:"server_version"`
	Username           types.String `tfsdk:"username"`
	Groups             types.List   `tfsdk:"groups"`
	CanRunPods         types.Bool   `tfsdk:"can_run_pods"`
	MissingPermissions types.List   `tfsdk:"missing_permissions"`
	CheckedAt          types.String `tfsdk:"checked_at"`
	Parent             types.String `tfsdk:"parent"`
	ClusterName        types.String `tfsdk:"cluster_name"`
	ClusterNamespace   types.String `tfsdk:"cluster_namespace"`
	KubeconfigTimeout  types.String `tfsdk:"kubeconfig_timeout"`
	OwnerID            types.String `tfsdk:"owner_id"`
}

func (r *credentialResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_credential"
}

func (r *credentialResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "A credential says how kubeplay reaches a Kubernetes cluster, as AWX's `kubernetes_bearer_token` " +
			"credential does. It is stored as a Secret in the provider's `catalog_namespace`. On create and " +
			"update the provider connects with it, records the server version and identity, and checks whether " +
			"runs can work in `namespace` (a warning when not); a credential that cannot connect is an error, and " +
			"so is a cluster older than Kubernetes " + credential.OldestKubernetes +
			" (kubeplay supports " + credential.OldestKubernetes + " and later; " + credential.OldestKubernetes + " to " +
			credential.NewestKubernetes + " are tested).\n\nKinds:\n\n* `bearer_token`: `host`, the write-only `bearer_token_wo` and its " +
			"`bearer_token_wo_version`, `ca_cert` and `verify_ssl`.\n* `cluster_api`: the kubeconfig a Cluster API " +
			"management cluster holds for a cluster it provisioned, as airship's dynamic kubeconfig: the Secret " +
			"`<cluster_name>-kubeconfig`, key `value`, in `cluster_namespace` on the cluster of the `parent` " +
			"credential. It is read whenever the credential is used, waiting up to `kubeconfig_timeout`, and " +
			"never stored; it may hold only inline data.\n* `kubeconfig`: the write-only `kubeconfig_wo` content " +
			"and its `kubeconfig_wo_version`, and an optional `context`. It is read back from the catalog Secret " +
			"by every workspace that uses the credential, so it may hold only inline data (no `auth-provider`, no " +
			"file paths); an `exec` plugin only with `allow_exec_plugin = true`, and it runs where the credential " +
			"is used only when that workspace's provider pins it in `exec_plugin_credentials` by its " +
			"`exec_sha256`.\n* `provider`: the provider's own connection.\n* `service_account`: provisions on the " +
			"provider's cluster, in `namespace`, a ServiceAccount, a Role `<service_account_name>-pod-manager` " +
			"that grants exactly what runs call (see Permissions below), its RoleBinding and a long-lived token " +
			"Secret `<service_account_name>-token`, revoked when destroy deletes it; objects of these names that " +
			"kubeplay did not create are refused, never adopted. Set `export_kubeconfig` to get a kubeconfig for " +
			"AWX, Zuul or a CI system.\n\nWrite-only values (`bearer_token_wo`, `kubeconfig_wo`) never reach the " +
			"plan or the state, so Terraform sees no change of them: change `bearer_token_wo_version` or " +
			"`kubeconfig_wo_version` with them to send new ones. What whoever can write the catalog namespace can " +
			"make the provider do with each kind is described under Catalog Writers below.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The credential's name.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": schema.StringAttribute{
				MarkdownDescription: "The credential's name, unique in the catalog namespace: a lowercase RFC 1123 label " +
					"of at most 63 characters. Changing it replaces the credential.",
				Required:      true,
				Validators:    []validator.String{dnsLabel()},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"kind": schema.StringAttribute{
				MarkdownDescription: "How the credential connects: `bearer_token`, `cluster_api`, `kubeconfig`, `provider` or " +
					"`service_account`. Changing it replaces the credential.",
				Required:      true,
				Validators:    []validator.String{stringvalidator.OneOf(credential.Kinds...)},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"description": schema.StringAttribute{
				MarkdownDescription: "A free-form description, stored as an annotation.",
				Optional:            true,
			},
			"host": schema.StringAttribute{
				MarkdownDescription: "The API server's https URL. Required for `bearer_token`; for the other kinds it is " +
					"computed from the connection.",
				Optional:      true,
				Computed:      true,
				Validators:    []validator.String{httpsURL()},
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"bearer_token_wo": schema.StringAttribute{
				MarkdownDescription: "The bearer token the credential authenticates with, for `bearer_token`, which requires it; stored in " +
					"the catalog Secret, never in the plan or the state. Change `bearer_token_wo_version` to send a new " +
					"one.",
				Optional:  true,
				Sensitive: true,
				WriteOnly: true,
			},
			"bearer_token_wo_version": schema.Int64Attribute{
				MarkdownDescription: "For `bearer_token`, with `bearer_token_wo`: a number of your choosing whose change sends " +
					"`bearer_token_wo` again, updating the credential in place.",
				Optional:   true,
				Validators: []validator.Int64{int64validator.AlsoRequires(path.MatchRoot("bearer_token_wo"))},
			},
			"ca_cert": schema.StringAttribute{
				MarkdownDescription: "The PEM-encoded CA certificate that signed the API server's certificate, for " +
					"`bearer_token`. When unset, the system's roots are used.",
				Optional:   true,
				Validators: []validator.String{pemBlock("CERTIFICATE")},
			},
			"verify_ssl": schema.BoolAttribute{
				MarkdownDescription: "Whether to verify the API server's certificate, for `bearer_token`. Defaults to `true`; `false` is a " +
					"plan warning and conflicts with `ca_cert`.",
				Optional: true,
				Computed: true,
				Default:  booldefault.StaticBool(true),
			},
			"kubeconfig_wo": schema.StringAttribute{
				MarkdownDescription: "The content of the kubeconfig file the credential connects with, for `kubeconfig`, which requires " +
					"it; stored in the catalog Secret, never in the plan or the state. Change `kubeconfig_wo_version` to " +
					"send a new one.",
				Optional:  true,
				Sensitive: true,
				WriteOnly: true,
			},
			"kubeconfig_wo_version": schema.Int64Attribute{
				MarkdownDescription: "For `kubeconfig`, with `kubeconfig_wo`: a number of your choosing whose change sends `kubeconfig_wo` " +
					"again, updating the credential in place.",
				Optional:   true,
				Validators: []validator.Int64{int64validator.AlsoRequires(path.MatchRoot("kubeconfig_wo"))},
			},
			"context": schema.StringAttribute{
				MarkdownDescription: "The kubeconfig context to use, for `kubeconfig`. Defaults to the kubeconfig's " +
					"current context.",
				Optional:   true,
				Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
			},
			"allow_exec_plugin": schema.BoolAttribute{
				MarkdownDescription: "For `kubeconfig`: whether the kubeconfig's `exec` credential plugin, a program run on the host where " +
					"Terraform runs, may run; where the credential is read back from the catalog, only if that " +
					"workspace's provider also pins it in `exec_plugin_credentials` (see Catalog Writers). Defaults to " +
					"`false`. `auth-provider` and file paths are always refused: embed the data.",
				Optional: true,
				Computed: true,
				Default:  booldefault.StaticBool(false),
			},
			"exec_sha256": schema.StringAttribute{
				MarkdownDescription: "For `kubeconfig`: the SHA-256 of the canonical JSON of the kubeconfig's `exec` blocks, which a " +
					"workspace's `exec_plugin_credentials` pins. Null without an `exec` block.",
				Computed: true,
			},
			"namespace": schema.StringAttribute{
				MarkdownDescription: "The namespace whose run permissions are checked; for `service_account`, the existing namespace the " +
					"account is provisioned in (changing it then replaces the credential). Defaults to `default`.",
				Optional:      true,
				Computed:      true,
				Default:       stringdefault.StaticString("default"),
				Validators:    []validator.String{dnsLabel()},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplaceIf(saNamespaceReplace, "Moving a service account replaces it.", "Moving a service account replaces it.")},
			},
			"service_account_name": schema.StringAttribute{
				MarkdownDescription: "The ServiceAccount's name, for `service_account`. Defaults to `name`. " +
					"Changing it replaces the credential.",
				Optional:      true,
				Computed:      true,
				Validators:    []validator.String{dnsLabel()},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"export_kubeconfig": schema.BoolAttribute{
				MarkdownDescription: "For `service_account`: whether to put a kubeconfig with the account's token into " +
					"`exported_kubeconfig`, and so into the state. Defaults to `false`.",
				Optional: true,
				Computed: true,
				Default:  booldefault.StaticBool(false),
			},
			"exported_kubeconfig": schema.StringAttribute{
				MarkdownDescription: "A kubeconfig for the provisioned service account (server, CA, token, namespace), when " +
					"`export_kubeconfig` is `true`; otherwise null. Sensitive: it holds the token.",
				Computed:  true,
				Sensitive: true,
			},
			"server_version": schema.StringAttribute{
				MarkdownDescription: "The Kubernetes version the API server reported at the last check.",
				Computed:            true,
			},
			"username": schema.StringAttribute{
				MarkdownDescription: "The identity the API server authenticated the credential as (SelfSubjectReview).",
				Computed:            true,
			},
			"groups": schema.ListAttribute{
				MarkdownDescription: "The groups of that identity.",
				Computed:            true,
				ElementType:         types.StringType,
			},
			"can_run_pods": schema.BoolAttribute{
				MarkdownDescription: "Whether the credential may do everything a run needs in `namespace`: pods get, list, " +
					"watch, create and delete; pods/exec create and get; events list and watch; resourcequotas list and watch (see " +
					"Permissions).",
				Computed: true,
			},
			"missing_permissions": schema.ListAttribute{
				MarkdownDescription: "The run permissions the credential lacks in `namespace`, as `verb resource`.",
				Computed:            true,
				ElementType:         types.StringType,
			},
			"owner_id": schema.StringAttribute{
				MarkdownDescription: "For `service_account`: a random id that the account's objects carry (`kubeplay.io/owner-id`), so " +
					"that kubeplay changes only its own. Null for other kinds.",
				Computed:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"checked_at": schema.StringAttribute{
				MarkdownDescription: "When the credential was last checked against its cluster (RFC 3339).",
				Computed:            true,
			},
			"parent": schema.StringAttribute{
				MarkdownDescription: "For `cluster_api`: the name of the credential of the management cluster that holds " +
					"the kubeconfig Secret, as airship's cluster map names a parent. A chain of parents must not loop back.",
				Optional:   true,
				Validators: []validator.String{dnsLabel()},
			},
			"cluster_name": schema.StringAttribute{
				MarkdownDescription: "For `cluster_api`: the name of the Cluster API `Cluster`; its kubeconfig is read from " +
					"the Secret `<cluster_name>-kubeconfig`, key `value`.",
				Optional:   true,
				Validators: []validator.String{stringvalidator.LengthBetween(1, 242)},
			},
			"cluster_namespace": schema.StringAttribute{
				MarkdownDescription: "For `cluster_api`: the namespace of the `Cluster` and its kubeconfig Secret. " +
					"Defaults to `default`.",
				Optional:   true,
				Validators: []validator.String{dnsLabel()},
			},
			"kubeconfig_timeout": schema.StringAttribute{
				MarkdownDescription: "For `cluster_api`: how long to wait for the kubeconfig Secret while Cluster API is " +
					"still provisioning the cluster, as a duration such as `10m`. Defaults to `10m`; `0s` does not wait.",
				Optional:   true,
				Validators: []validator.String{duration()},
			},
		},
	}
}

func saNamespaceReplace(ctx context.Context, req planmodifier.StringRequest, resp *stringplanmodifier.RequiresReplaceIfFuncResponse) {
	var kind types.String
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("kind"), &kind)...)
	resp.RequiresReplace = kind.ValueString() == credential.KindServiceAccount
}

func (r *credentialResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = nameIdentitySchema("credential")
}

func (r *credentialResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

// kindAttributes lists, per kind, the optional attributes it accepts.
var kindAttributes = map[string][]string{
	credential.KindBearerToken:    {"host", "bearer_token_wo", "bearer_token_wo_version", "ca_cert", "verify_ssl"},
	credential.KindKubeconfig:     {"kubeconfig_wo", "kubeconfig_wo_version", "context", "allow_exec_plugin"},
	credential.KindProvider:       {},
	credential.KindServiceAccount: {"service_account_name", "export_kubeconfig"},
	credential.KindClusterAPI:     {"parent", "cluster_name", "cluster_namespace", "kubeconfig_timeout"},
}

var kindSpecificAttributes = []string{
	"host", "bearer_token_wo", "bearer_token_wo_version", "ca_cert", "verify_ssl", "kubeconfig_wo", "kubeconfig_wo_version",
	"context", "allow_exec_plugin", "service_account_name", "export_kubeconfig", "parent", "cluster_name", "cluster_namespace",
	"kubeconfig_timeout",
}

func (r *credentialResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m credentialModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || m.Kind.IsUnknown() || m.Kind.IsNull() {
		return
	}
	kind := m.Kind.ValueString()
	allowed, ok := kindAttributes[kind]
	if !ok {
		return // the OneOf validator reports it
	}
	for _, name := range kindSpecificAttributes {
		var v attr.Value
		resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root(name), &v)...)
		if v == nil || v.IsNull() || contains(allowed, name) {
			continue
		}
		resp.Diagnostics.AddAttributeError(path.Root(name), "Attribute Not Allowed For Kind",
			fmt.Sprintf("%s does not apply to a credential of kind %q, which takes only %s. Remove it, or change kind.",
				name, kind, listOrNone(allowed)))
	}
	switch kind {
	case credential.KindBearerToken:
		requireAttr(&resp.Diagnostics, m.Host, "host", kind, "the API server's https URL")
		requireAttr(&resp.Diagnostics, m.BearerTokenWO, "bearer_token_wo", kind, "the token to authenticate with")
		if !m.VerifySSL.IsNull() && !m.VerifySSL.IsUnknown() && !m.VerifySSL.ValueBool() {
			if m.CACert.IsNull() {
				warnInsecureTLS(&resp.Diagnostics, path.Root("verify_ssl"), "verify_ssl = false", "set ca_cert to the PEM "+
					"certificate of the CA that signed the API server's certificate and remove verify_ssl")
			} else {
				resp.Diagnostics.AddAttributeError(path.Root("verify_ssl"), "Contradictory TLS Settings",
					"verify_ssl = false skips verification of the API server's certificate, while ca_cert asks to verify it "+
						"against that CA. Remove verify_ssl to verify the server (recommended), or remove ca_cert.")
			}
		}
	case credential.KindClusterAPI:
		requireAttr(&resp.Diagnostics, m.Parent, "parent", kind, "the credential of the cluster that holds the kubeconfig Secret")
		requireAttr(&resp.Diagnostics, m.ClusterName, "cluster_name", kind, "the name of the Cluster API cluster")
		if !m.Parent.IsUnknown() && !m.Name.IsUnknown() && m.Parent.ValueString() == m.Name.ValueString() && !m.Parent.IsNull() {
			resp.Diagnostics.AddAttributeError(path.Root("parent"), "Credential Parent Cycle",
				fmt.Sprintf("Credential %q names itself as parent. The parent is the credential of the management cluster "+
					"that holds this cluster's kubeconfig Secret; set it to that credential.", m.Name.ValueString()))
		}
	case credential.KindKubeconfig:
		requireAttr(&resp.Diagnostics, m.KubeconfigWO, "kubeconfig_wo", kind, "the content of a kubeconfig file")
		if !m.KubeconfigWO.IsNull() && !m.KubeconfigWO.IsUnknown() && !m.Context.IsUnknown() {
			if err := credential.ValidateKubeconfig(m.KubeconfigWO.ValueString(), m.Context.ValueString()); err != nil {
				p := path.Root("kubeconfig_wo")
				if !m.Context.IsNull() {
					p = path.Root("context")
				}
				resp.Diagnostics.AddAttributeError(p, "Invalid Kubeconfig",
					"The kubeplay credential's kubeconfig cannot be used: "+err.Error()+".")
				return
			}
			checkConfigKubeconfig(&resp.Diagnostics, m)
		}
	}
}

// checkConfigKubeconfig refuses, at plan, a kubeconfig that would run a
// program or read a file where Terraform runs, and warns of clusters it
// does not verify. An unknown allow_exec_plugin lets exec pass until apply.
func checkConfigKubeconfig(diags *diag.Diagnostics, m credentialModel) {
	content := m.KubeconfigWO.ValueString()
	allowExec := m.AllowExecPlugin.ValueBool() || m.AllowExecPlugin.IsUnknown()
	if err := credential.CheckKubeconfig(content, allowExec); err != nil {
		addHostAccessError(diags, path.Root("kubeconfig_wo"), fmt.Errorf("the kubeconfig: %w", err), true)
		return
	}
	for _, c := range credential.InsecureKubeconfigClusters(content) {
		warnInsecureTLS(diags, path.Root("kubeconfig_wo"), fmt.Sprintf("the kubeconfig's cluster %q sets insecure-skip-tls-verify", c),
			"replace insecure-skip-tls-verify with certificate-authority-data holding the base64 PEM certificate of the "+
				"CA that signed the API server's certificate")
	}
}

func requireAttr(diags *diag.Diagnostics, v attr.Value, name, kind, what string) {
	if v.IsNull() {
		diags.AddAttributeError(path.Root(name), "Missing Required Attribute",
			fmt.Sprintf("A credential of kind %q needs %s: %s. Set it.", kind, name, what))
	}
}

func (r *credentialResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return // destroy
	}
	var plan credentialModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	r.checkParentCycle(ctx, plan, &resp.Diagnostics)
	changed := r.planExecSHA256(ctx, req, &plan, &resp.Diagnostics)
	if plan.ID.IsUnknown() && !plan.Name.IsUnknown() {
		// The id is the name: references to it are known at plan, as the name is.
		plan.ID, changed = plan.Name, true
	}
	if plan.Kind.ValueString() == credential.KindServiceAccount {
		if plan.ServiceAccountName.IsUnknown() {
			plan.ServiceAccountName = plan.Name
			changed = true
		}
	} else if plan.ServiceAccountName.IsUnknown() {
		plan.ServiceAccountName = types.StringNull()
		changed = true
	}
	if !plan.ExportKubeconfig.ValueBool() && plan.ExportedKubeconfig.IsUnknown() {
		plan.ExportedKubeconfig = types.StringNull()
		changed = true
	}
	if planDrift(ctx, req, &resp.Diagnostics, catalog.KindCredential, plan.Name.ValueString()) {
		markCheckUnknown(&plan)
		changed = true
	}
	if changed {
		resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
	}
	if r.data != nil && !plan.Name.IsUnknown() && (req.State.Raw.IsNull() || !resp.Plan.Raw.Equal(req.State.Raw)) {
		r.data.changingCredentials.put(plan.Name.ValueString(), nil, true)
	}
}

// planExecSHA256 plans exec_sha256 from the configured kubeconfig when the
// credential changes (the write-only value is in the config at plan), and
// warns of a declared exec plugin that this workspace's other uses would
// refuse: not listed, or pinned to other exec blocks. true: plan changed.
func (r *credentialResource) planExecSHA256(ctx context.Context, req resource.ModifyPlanRequest, plan *credentialModel, diags *diag.Diagnostics) bool {
	changed := false
	if plan.ExecSHA256.IsUnknown() {
		var kc types.String
		diags.Append(req.Config.GetAttribute(ctx, path.Root("kubeconfig_wo"), &kc)...)
		switch {
		case plan.Kind.IsUnknown() || plan.Kind.ValueString() == credential.KindKubeconfig && kc.IsUnknown():
		case plan.Kind.ValueString() != credential.KindKubeconfig:
			plan.ExecSHA256, changed = types.StringNull(), true
		default:
			plan.ExecSHA256 = stringOrNull(credential.Spec{Kind: credential.KindKubeconfig, Kubeconfig: kc.ValueString()}.ExecSHA256())
			changed = true
		}
	}
	if r.data == nil || r.data.connect == nil || !plan.AllowExecPlugin.ValueBool() || plan.Name.IsUnknown() {
		return changed
	}
	name, digest := plan.Name.ValueString(), plan.ExecSHA256.ValueString()
	pin, listed := r.data.connect.ExecPin(name)
	switch {
	case !listed:
		diags.AddAttributeWarning(path.Root("allow_exec_plugin"), "Exec Plugin Not Listed By Provider",
			fmt.Sprintf("Credential %q declares allow_exec_plugin = true, but this provider's exec_plugin_credentials does "+
				"not list it. This resource's own check runs the plugin; every other use of the credential, in this workspace "+
				"or another, reads its kubeconfig back from the catalog and refuses the plugin unless that workspace's provider "+
				"pins it. Add %q = %q to exec_plugin_credentials in the provider block of each workspace that uses it "+
				"(the credential's exec_sha256).", name, name, digest))
	case digest != "" && digest != pin:
		diags.AddAttributeWarning(path.Root("exec_sha256"), "Exec Plugin Differs From Provider's Pin",
			fmt.Sprintf("Credential %q's kubeconfig has exec_sha256 %s, but this provider's exec_plugin_credentials pins "+
				"%s. This resource's own check runs the plugin; every other use of the credential refuses it until the pin "+
				"is %q in the provider block of each workspace that uses it.", name, digest, pin, digest))
	}
	return changed
}

func markCheckUnknown(m *credentialModel) {
	m.ServerVersion = types.StringUnknown()
	m.Username = types.StringUnknown()
	m.Groups = types.ListUnknown(types.StringType)
	m.CanRunPods = types.BoolUnknown()
	m.MissingPermissions = types.ListUnknown(types.StringType)
	m.CheckedAt = types.StringUnknown()
	if m.ExportKubeconfig.ValueBool() {
		m.ExportedKubeconfig = types.StringUnknown()
	}
}

func (r *credentialResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	defer r.data.writingDefinitions()()
	r.write(ctx, req.Plan.Get, req.Config.Get, true, &resp.State, &resp.Diagnostics)
	setIdentity(ctx, resp.Identity, &resp.Diagnostics, resp.State)
}

func (r *credentialResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	defer r.data.writingDefinitions()()
	r.write(ctx, req.Plan.Get, req.Config.Get, false, &resp.State, &resp.Diagnostics)
	setIdentity(ctx, resp.Identity, &resp.Diagnostics, resp.State)
	// The Secret now holds what Terraform wrote: forget the drift Read saw.
	resp.Diagnostics.Append(recordDrift(ctx, resp.Private)...)
}

// write provisions (for service_account), checks the credential against its
// cluster, and only then writes the catalog Secret, so that a credential that
// cannot connect leaves nothing behind.
func (r *credentialResource) write(ctx context.Context, getPlan, getConfig getter, create bool, state stateSetter, diags *diag.Diagnostics) {
	var plan, config credentialModel
	diags.Append(getPlan(ctx, &plan)...)
	diags.Append(getConfig(ctx, &config)...)
	if diags.HasError() {
		return
	}
	store := r.data.catalogWriter(ctx, diags)
	if store == nil {
		return
	}
	name, mode := plan.Name.ValueString(), catalog.CreateOrUpdate
	if create {
		if err := store.CheckAbsent(ctx, catalog.KindCredential, name); err != nil {
			addCatalogError(diags, err)
			return
		}
		mode = catalog.NewOnly
	}
	c, err := r.data.clients()
	if err != nil {
		addConnectionUnavailable(diags, err)
		return
	}
	spec := specFromModel(plan, config)
	account, ok := r.provision(ctx, c, &spec, create, diags)
	if !ok {
		return
	}
	rep, ok := r.check(ctx, spec, diags)
	if !ok {
		r.undoProvision(ctx, c, account, create, diags)
		return
	}
	now := time.Now()
	if _, err := store.PutCredential(ctx, catalog.Credential{Spec: spec, Report: rep, CheckedAt: now}, mode); err != nil {
		addCatalogError(diags, err)
		r.undoProvision(ctx, c, account, create, diags)
		return
	}
	if !rep.CanRun() {
		diags.AddAttributeWarning(path.Root("namespace"), "Credential Cannot Run Pods",
			fmt.Sprintf("Credential %q authenticates as %q but lacks, in namespace %q: %v. Runs that use it may fail; "+
				"bind it to a Role with the rules listed in the kubeplay_credential documentation (or use kind = \"service_account\").",
				name, rep.Username, rep.Namespace, rep.Missing))
	}
	r.fill(ctx, &plan, spec, rep, checkedAt(now), diags)
	diags.Append(state.Set(ctx, &plan)...)
}

// provision provisions the service account of a service_account credential
// and completes spec with its token; for other kinds it does nothing.
func (r *credentialResource) provision(ctx context.Context, c *kubeclient.Clients, spec *credential.Spec, create bool, diags *diag.Diagnostics) (credential.Account, bool) {
	if spec.Kind != credential.KindServiceAccount {
		return credential.Account{}, true
	}
	account, ok := r.ownedAccount(spec, create, diags)
	if !ok {
		return account, false
	}
	prov, err := credential.Provision(ctx, c.Kube, account)
	if other := (*managed.OwnedByOtherError)(nil); errors.As(err, &other) {
		diags.AddAttributeError(path.Root("service_account_name"), "Service Account Object Owned By Another Credential",
			fmt.Sprintf("Credential %q would provision %s/%s, but %v. It is another configuration's: a credential of the "+
				"same name in another catalog_namespace or on another catalog cluster, whose token would stop working. Set "+
				"service_account_name to a name that is free in namespace %q.", spec.Name, account.Namespace, other.Name, err,
				account.Namespace))
		return account, false
	}
	if no := (*managed.NotOwnedError)(nil); errors.As(err, &no) {
		diags.AddAttributeError(path.Root("service_account_name"), "Service Account Object Exists",
			fmt.Sprintf("Credential %q would provision %s/%s, but %v. kubeplay does not adopt or delete objects it did not "+
				"create. Set service_account_name to a name that is free in namespace %q, or delete that %s (or, if it is "+
				"this credential's, label it %s).", spec.Name, no.Namespace, no.Name, err, account.Namespace, no.Kind, ownershipLabels(no.Labels)))
		return account, false
	}
	if err != nil {
		diags.AddAttributeError(path.Root("namespace"), "Service Account Provisioning Failed",
			fmt.Sprintf("Provisioning service account %s/%s for credential %q failed: %v.", account.Namespace, account.Name, spec.Name, err))
		r.undoProvision(ctx, c, account, create, diags)
		return account, false
	}
	spec.Host, spec.BearerToken, spec.CACert, spec.VerifySSL = c.Config.Host, prov.Token, prov.CACert, true
	if spec.CACert == "" {
		spec.CACert = string(c.Config.CAData)
	}
	return account, true
}

// ownershipLabels formats labels as kubectl label takes them.
func ownershipLabels(l map[string]string) string {
	pairs := make([]string, 0, len(l))
	for _, k := range managed.SortedKeys(l) {
		pairs = append(pairs, k+"="+l[k])
	}
	return strings.Join(pairs, " ")
}

// checkedAt formats the time of a check as the state holds it.
func checkedAt(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// undoProvision removes a service account provisioned by a create that failed.
func (r *credentialResource) undoProvision(ctx context.Context, c *kubeclient.Clients, a credential.Account, create bool, diags *diag.Diagnostics) {
	if !create || a.Name == "" {
		return
	}
	if err := credential.Deprovision(context.WithoutCancel(ctx), c.Kube, a); err != nil {
		diags.AddWarning("Cleanup Failed", fmt.Sprintf("Removing service account %s/%s after the failure: %v. Delete it by hand.", a.Namespace, a.Name, err))
	}
}

// check connects with the credential and reports failures as diagnostics
// that say what happened and which attribute to look at.
func (r *credentialResource) check(ctx context.Context, spec credential.Spec, diags *diag.Diagnostics) (credential.Report, bool) {
	// The Secret is not written yet: key the clients by the content to be written.
	cc, err := r.data.connect.Spec(ctx, spec)
	if err != nil {
		attr := map[string]string{credential.KindClusterAPI: "cluster_name", credential.KindKubeconfig: "kubeconfig_wo"}[spec.Kind]
		if attr == "" {
			attr = "kind"
		}
		fromConfig := spec.Kind == credential.KindKubeconfig
		if !addHostAccessError(diags, path.Root(attr), err, fromConfig) && !addCredentialRefused(diags, path.Root("parent"), err) {
			diags.AddAttributeError(path.Root(attr), "Invalid Credential", err.Error()+".")
		}
		return credential.Report{}, false
	}
	host := cc.Config.Host
	if spec.Kind == credential.KindClusterAPI && cc.Config.Insecure {
		warnInsecureTLS(diags, path.Root("cluster_name"), fmt.Sprintf("the kubeconfig in Secret %s/%s on the parent cluster "+
			"sets insecure-skip-tls-verify", spec.ClusterNamespaceOrDefault(), spec.KubeconfigSecretName()),
			"have whoever writes that Secret put certificate-authority-data in it instead (Cluster API does)")
	}
	tflog.Debug(ctx, "checking credential", map[string]any{"credential": spec.Name, "kind": spec.Kind, "host": host})
	cctx, cancel := context.WithTimeout(ctx, credentialCheckTimeout)
	defer cancel()
	verify := credential.Verify
	if spec.Kind == credential.KindServiceAccount {
		verify = credential.VerifyProvisioned
	}
	rep, err := verify(cctx, cc.Kube, host, spec.Namespace)
	if err != nil {
		addCredentialCheckError(diags, spec, host, err)
		return credential.Report{}, false
	}
	return rep, true
}

func (r *credentialResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	defer setReadIdentity(ctx, req, resp)
	var state credentialModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := state.Name.ValueString()
	e, ok := readForResource(ctx, r.data, catalog.KindCredential, name, (*catalog.Store).GetCredential, resp)
	if !ok {
		return
	}
	spec := e.Value.Spec
	accountDrift, ok := r.accountDrift(ctx, spec, &resp.Diagnostics)
	if !ok {
		return
	}
	resp.Diagnostics.Append(recordDrift(ctx, resp.Private, e.Drift, accountDrift)...)
	r.fill(ctx, &state, spec, e.Value.Report, checkedAt(e.Value.CheckedAt), &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// accountDrift says what is gone of a service_account credential's account.
func (r *credentialResource) accountDrift(ctx context.Context, spec credential.Spec, diags *diag.Diagnostics) (string, bool) {
	if spec.Kind != credential.KindServiceAccount {
		return "", true
	}
	c, err := r.data.clients()
	if err != nil {
		addConnectionUnavailable(diags, err)
		return "", false
	}
	a := credential.Account{Namespace: spec.Namespace, Name: spec.ServiceAccount, Credential: spec.Name,
		Owner: managed.Owner{ID: spec.OwnerID}}
	ok, err := credential.Exists(ctx, c.Kube, a)
	if err != nil {
		diags.AddError("Reading Service Account Failed", fmt.Sprintf("Reading %s/%s: %v.", a.Namespace, a.Name, err))
		return "", false
	}
	if !ok {
		return fmt.Sprintf("the ServiceAccount or token Secret %s/%s is gone", a.Namespace, a.TokenSecretName()), true
	}
	return "", true
}

func (r *credentialResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	defer r.data.writingDefinitions()()
	var state credentialModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	c, err := r.data.clients()
	if err != nil {
		addConnectionUnavailable(&resp.Diagnostics, err)
		return
	}
	if state.Kind.ValueString() == credential.KindServiceAccount {
		a := credential.Account{Namespace: state.Namespace.ValueString(), Name: state.ServiceAccountName.ValueString(),
			Credential: state.Name.ValueString(), Owner: managed.Owner{ID: state.OwnerID.ValueString()}}
		if err := credential.Deprovision(ctx, c.Kube, a); err != nil {
			resp.Diagnostics.AddError("Deleting Service Account Failed", err.Error()+".")
			return
		}
	}
	store := r.data.catalogReader(&resp.Diagnostics)
	if store == nil {
		return
	}
	if err := store.DeleteCredential(ctx, state.Name.ValueString()); err != nil {
		addCatalogError(&resp.Diagnostics, err)
	}
}

func (r *credentialResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importByName(ctx, req, resp)
}

// specFromModel builds the spec to store; write-only values come from config.
func specFromModel(plan, config credentialModel) credential.Spec {
	s := credential.Spec{
		Name:             plan.Name.ValueString(),
		Kind:             plan.Kind.ValueString(),
		Description:      plan.Description.ValueString(),
		Namespace:        plan.Namespace.ValueString(),
		ExportKubeconfig: plan.ExportKubeconfig.ValueBool(),
	}
	switch s.Kind {
	case credential.KindBearerToken:
		s.Host, s.BearerToken, s.CACert, s.VerifySSL = plan.Host.ValueString(), config.BearerTokenWO.ValueString(), plan.CACert.ValueString(), plan.VerifySSL.ValueBool()
		s.SecretVersion = woVersion(plan.BearerTokenVersion)
	case credential.KindKubeconfig:
		s.Kubeconfig, s.Context = config.KubeconfigWO.ValueString(), plan.Context.ValueString()
		s.AllowExecPlugin = plan.AllowExecPlugin.ValueBool()
		s.SecretVersion = woVersion(plan.KubeconfigVersion)
	case credential.KindServiceAccount:
		s.ServiceAccount, s.OwnerID = plan.ServiceAccountName.ValueString(), plan.OwnerID.ValueString()
	case credential.KindClusterAPI:
		s.Parent, s.ClusterName = plan.Parent.ValueString(), plan.ClusterName.ValueString()
		s.ClusterNamespace, s.KubeconfigTimeout = plan.ClusterNamespace.ValueString(), plan.KubeconfigTimeout.ValueString()
	}
	return s
}

// woVersion is the *_wo_version the catalog Secret keeps; "" when unset.
func woVersion(v types.Int64) string {
	if v.IsNull() || v.IsUnknown() {
		return ""
	}
	return strconv.FormatInt(v.ValueInt64(), 10)
}

// woVersionValue reads a stored *_wo_version back. One that is not a number
// (edited outside kubeplay) reads as null, so the next apply writes it again.
func woVersionValue(s string) types.Int64 {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return types.Int64Null()
	}
	return types.Int64Value(v)
}

// fill sets the model from what is stored; write-only attributes stay null.
func (r *credentialResource) fill(ctx context.Context, m *credentialModel, spec credential.Spec, rep credential.Report, checkedAt string, diags *diag.Diagnostics) {
	m.ID = types.StringValue(spec.Name)
	m.Name = types.StringValue(spec.Name)
	m.Kind = types.StringValue(spec.Kind)
	m.Description = stringOrNull(spec.Description)
	m.Namespace = types.StringValue(spec.Namespace)
	m.ExportKubeconfig = types.BoolValue(spec.ExportKubeconfig)
	m.BearerTokenWO, m.KubeconfigWO = types.StringNull(), types.StringNull()
	m.BearerTokenVersion, m.KubeconfigVersion = types.Int64Null(), types.Int64Null()
	m.CACert, m.VerifySSL, m.Context, m.ServiceAccountName = types.StringNull(), types.BoolValue(true), types.StringNull(), types.StringNull()
	m.AllowExecPlugin = types.BoolValue(spec.AllowExecPlugin)
	m.ExecSHA256 = stringOrNull(spec.ExecSHA256())
	m.ExportedKubeconfig = types.StringNull()
	m.OwnerID = stringOrNull(spec.OwnerID)
	m.Parent, m.ClusterName = stringOrNull(spec.Parent), stringOrNull(spec.ClusterName)
	m.ClusterNamespace, m.KubeconfigTimeout = stringOrNull(spec.ClusterNamespace), stringOrNull(spec.KubeconfigTimeout)
	switch spec.Kind {
	case credential.KindBearerToken:
		m.Host, m.CACert, m.VerifySSL = types.StringValue(spec.Host), stringOrNull(spec.CACert), types.BoolValue(spec.VerifySSL)
		m.BearerTokenVersion = woVersionValue(spec.SecretVersion)
	case credential.KindKubeconfig:
		m.Context = stringOrNull(spec.Context)
		m.KubeconfigVersion = woVersionValue(spec.SecretVersion)
		// Read, not built: building a client from the catalog's copy
		// must not be the way its exec plugin gets to run.
		if server := spec.KubeconfigServer(); server != "" {
			m.Host = types.StringValue(server)
		}
	case credential.KindProvider:
		if r.data.restConfig != nil {
			m.Host = types.StringValue(r.data.restConfig.Host)
		}
	case credential.KindServiceAccount:
		m.Host, m.ServiceAccountName = types.StringValue(spec.Host), types.StringValue(spec.ServiceAccount)
		if spec.ExportKubeconfig {
			kc, err := credential.Kubeconfig(spec.Name, spec.Host, spec.CACert, spec.ServiceAccount, spec.BearerToken, spec.Namespace)
			if err != nil {
				diags.AddError("Rendering Kubeconfig Failed", err.Error())
				return
			}
			m.ExportedKubeconfig = types.StringValue(string(kc))
		}
	}
	if m.Host.IsUnknown() {
		m.Host = types.StringNull()
	}
	var d diag.Diagnostics
	m.ServerVersion = types.StringValue(rep.ServerVersion)
	m.Username = types.StringValue(rep.Username)
	m.Groups, d = types.ListValueFrom(ctx, types.StringType, nonNil(rep.Groups))
	diags.Append(d...)
	m.MissingPermissions, d = types.ListValueFrom(ctx, types.StringType, nonNil(rep.Missing))
	diags.Append(d...)
	m.CanRunPods = types.BoolValue(rep.CanRun())
	m.CheckedAt = types.StringValue(checkedAt)
}

// checkParentCycle follows the stored parents of a cluster_api credential and
// fails the plan when the chain comes back to it. Parents not stored yet end
// the walk: they are checked when they are planned.
func (r *credentialResource) checkParentCycle(ctx context.Context, plan credentialModel, diags *diag.Diagnostics) {
	if plan.Kind.ValueString() != credential.KindClusterAPI || plan.Parent.IsUnknown() || plan.Parent.IsNull() || r.data == nil {
		return
	}
	store, err := r.data.catalog()
	if err != nil {
		return
	}
	name := plan.Name.ValueString()
	chain := []string{name}
	for next := plan.Parent.ValueString(); next != ""; {
		chain = append(chain, next)
		if next == name {
			diags.AddAttributeError(path.Root("parent"), "Credential Parent Cycle",
				fmt.Sprintf("The parents of credential %q loop back to it: %s. Each cluster_api credential's parent must "+
					"be the credential of the cluster that provisioned it.", name, strings.Join(chain, " -> ")))
			return
		}
		if len(chain) > 16 {
			return
		}
		e, err := store.GetCredential(ctx, next)
		if err != nil || e.Value.Spec.Kind != credential.KindClusterAPI {
			return
		}
		next = e.Value.Spec.Parent
	}
}

// ownedAccount is the account a service_account credential provisions,
// owned by its definition: a new credential gets a fresh owner id (or the
// one its plan holds, replacing one of its own), one stored before owner
// ids gets one now and adopts, this once, the objects made for its name.
func (r *credentialResource) ownedAccount(spec *credential.Spec, create bool, diags *diag.Diagnostics) (credential.Account, bool) {
	adopt, ok := ensureOwnerID(&spec.OwnerID, fmt.Sprintf("Credential %q", spec.Name), create, diags)
	if !ok {
		return credential.Account{}, false
	}
	return credential.Account{Namespace: spec.Namespace, Name: spec.ServiceAccount, Credential: spec.Name, Adopt: adopt,
		Owner: managed.Owner{ID: spec.OwnerID, Kind: "credential", Name: spec.Name, Catalog: r.data.catalogNamespace}}, true
}
