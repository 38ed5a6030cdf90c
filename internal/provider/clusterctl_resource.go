// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/clusterctl"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
)

var (
	_ resource.Resource                   = (*clusterctlResource)(nil)
	_ resource.ResourceWithConfigure      = (*clusterctlResource)(nil)
	_ resource.ResourceWithValidateConfig = (*clusterctlResource)(nil)
)

const (
	clusterctlInit = "init"
	clusterctlMove = "move"
)

// clusterctlCleanupTimeout bounds the removal of what a failed init left.
const clusterctlCleanupTimeout = 2 * time.Minute

// clusterctlTimeout is the default of each key of the resource's timeouts.
const clusterctlTimeout = 5 * time.Minute

type clusterctlResource struct {
	data *providerData
}

func newClusterctlResource() resource.Resource { return &clusterctlResource{} }

type clusterctlModel struct {
	ID          types.String   `tfsdk:"id"`
	Name        types.String   `tfsdk:"name"`
	Action      types.String   `tfsdk:"action"`
	Cluster     types.String   `tfsdk:"cluster"`
	ToCluster   types.String   `tfsdk:"to_cluster"`
	Namespace   types.String   `tfsdk:"namespace"`
	Providers   types.List     `tfsdk:"providers"`
	Variables   types.Map      `tfsdk:"variables"`
	WOVersion   types.Int64    `tfsdk:"variables_wo_version"`
	VariablesWO types.Map      `tfsdk:"variables_wo"`
	DestroyCRDs types.Bool     `tfsdk:"destroy_crds"`
	Timeouts    timeouts.Value `tfsdk:"timeouts"`
}

type clusterctlProviderModel struct {
	Name       types.String `tfsdk:"name"`
	Type       types.String `tfsdk:"type"`
	Version    types.String `tfsdk:"version"`
	Components types.String `tfsdk:"components"`
	Metadata   types.String `tfsdk:"metadata"`
}

func (r *clusterctlResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_clusterctl"
}

func (r *clusterctlResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replaceStr := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		MarkdownDescription: "A phase run by airshipctl's `Clusterctl` executor, through the clusterctl library " +
			"(`sigs.k8s.io/cluster-api/cmd/clusterctl/client`): `init` installs Cluster API providers into a " +
			"cluster, `move` moves the Cluster API objects of a namespace from one cluster to another, the step " +
			"that turns an ephemeral bootstrap cluster into a self-managed target cluster. Order it among " +
			"`kubeplay_phase` and `kubeplay_run` resources with `depends_on`.\n\nNothing is downloaded. Each " +
			"provider's components and metadata are given here, as airshipctl reads them from a local repository. " +
			"clusterctl requires cert-manager's API (`cert-manager.io/v1`) on the cluster to init: install " +
			"cert-manager first, for example with a `kubeplay_phase` of its manifests as airshipctl does in an " +
			"earlier phase; kubeplay never installs it and says so at apply when it is missing.\n\n`init` waits " +
			"until the providers' controllers are available, up to `timeouts.create`, and stops at once when a " +
			"controller's pod cannot start; a failed or interrupted `init` deletes what it installed. Destroy of " +
			"an `init` deletes its providers and their namespaces, keeping their CRDs (and so every Cluster API " +
			"object) unless `destroy_crds` is set, as `clusterctl delete` does. A provider deleted outside " +
			"Terraform is planned as a new `init`. Destroy of a `move` does nothing. A change of any argument but " +
			"`timeouts`, `destroy_crds` and `variables_wo` replaces the resource. Upgrades (`clusterctl upgrade`) " +
			"are not supported.\n\nIts log goes to Terraform's (`TF_LOG=DEBUG`).",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The phase's name.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": schema.StringAttribute{
				MarkdownDescription: "The phase's name, as in airshipctl's phase plan: a lowercase RFC 1123 label.",
				Required:            true,
				Validators:          []validator.String{dnsLabel()},
				PlanModifiers:       replaceStr,
			},
			"action": schema.StringAttribute{
				MarkdownDescription: "What the executor does: `init` (install `providers` into `cluster`) or `move` " +
					"(move the Cluster API objects of `namespace` from `cluster` to `to_cluster`).",
				Required:      true,
				Validators:    []validator.String{stringvalidator.OneOf(clusterctlInit, clusterctlMove)},
				PlanModifiers: replaceStr,
			},
			"cluster": schema.StringAttribute{
				MarkdownDescription: "The name of the `kubeplay_credential` of the cluster to init, or to move from. " +
					"Unset means the provider's own cluster.",
				Optional:      true,
				Validators:    []validator.String{dnsLabel()},
				PlanModifiers: replaceStr,
			},
			"to_cluster": schema.StringAttribute{
				MarkdownDescription: "`move` only, and required by it: the name of the `kubeplay_credential` of the " +
					"cluster to move to. It must run the same providers as `cluster` (an `init` of each).",
				Optional:      true,
				Validators:    []validator.String{dnsLabel()},
				PlanModifiers: replaceStr,
			},
			"namespace": schema.StringAttribute{
				MarkdownDescription: "`move` only: the namespace whose Cluster API objects move. Defaults to `default`.",
				Optional:            true,
				Validators:          []validator.String{dnsLabel()},
				PlanModifiers:       replaceStr,
			},
			"providers": schema.ListNestedAttribute{
				MarkdownDescription: "`init` only, and required by it: the providers to install, exactly one of them " +
					"of type `CoreProvider` (clusterctl would otherwise fetch the default core provider from the internet).",
				Optional:      true,
				Validators:    []validator.List{listvalidator.SizeAtLeast(1)},
				PlanModifiers: []planmodifier.List{listplanmodifier.RequiresReplace()},
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name": schema.StringAttribute{
						MarkdownDescription: "The provider's name, such as `cluster-api`, `kubeadm` or `docker`.",
						Required:            true,
						Validators:          []validator.String{dnsLabel()},
					},
					"type": schema.StringAttribute{
						MarkdownDescription: "The provider's type: one of `" + strings.Join(clusterctl.Types, "`, `") + "`.",
						Required:            true,
						Validators:          []validator.String{stringvalidator.OneOf(clusterctl.Types...)},
					},
					"version": schema.StringAttribute{
						MarkdownDescription: "The release the components are of, such as `v1.14.2`.",
						Required:            true,
					},
					"components": schema.StringAttribute{
						MarkdownDescription: "The release's components YAML (`core-components.yaml`, " +
							"`infrastructure-components.yaml`, ...). `${VAR}` and `${VAR:=default}` placeholders are " +
							"filled from `variables` and `variables_wo`, as clusterctl does.",
						Required: true,
					},
					"metadata": schema.StringAttribute{
						MarkdownDescription: "The release's `metadata.yaml`: a `clusterctl.cluster.x-k8s.io/v1alpha3` " +
							"`Metadata` whose `releaseSeries` holds the version's major.minor.",
						Required: true,
					},
				}},
			},
			"variables": schema.MapAttribute{
				MarkdownDescription: "`init` only: values of the components' placeholders, shown in the plan and kept " +
					"in the state. Put secrets in `variables_wo`.",
				Optional:      true,
				ElementType:   types.StringType,
				Validators:    []validator.Map{mapvalidator.KeysAre(envName())},
				PlanModifiers: []planmodifier.Map{mapplanmodifier.RequiresReplace()},
			},
			"variables_wo_version": schema.Int64Attribute{
				MarkdownDescription: "`init` only, with `variables_wo`: a number of your choosing whose change replaces the resource, " +
					"reinstalling the providers with the new `variables_wo`.",
				Optional:      true,
				Validators:    []validator.Int64{int64validator.AlsoRequires(path.MatchRoot("variables_wo"))},
				PlanModifiers: []planmodifier.Int64{int64planmodifier.RequiresReplace()},
			},
			"variables_wo": schema.MapAttribute{
				MarkdownDescription: "`init` only: secret values of the components' placeholders (cloud credentials, " +
					"for example). Write-only: never in the plan or the state, so Terraform sees no change of them and a " +
					"change of them alone plans nothing; change `variables_wo_version` to init again with new values. They " +
					"win over `variables` of the same name. Requires Terraform 1.11 or later.",
				Optional: true, Sensitive: true, WriteOnly: true, ElementType: types.StringType,
				Validators: []validator.Map{mapvalidator.KeysAre(envName())},
			},
			"destroy_crds": schema.BoolAttribute{
				MarkdownDescription: "`init`: whether destroy also deletes the providers' CustomResourceDefinitions, " +
					"as `clusterctl delete --include-crd` does. clusterctl refuses while objects of those kinds " +
					"(Clusters, Machines, ...) exist, and destroy then fails until they are deleted. Defaults to `false`.",
				Optional: true,
				Computed: true,
				Default:  booldefault.StaticBool(false),
			},
		},
		Blocks: map[string]schema.Block{
			// Update only records timeouts and destroy_crds: it waits for
			// nothing, so there is no update key.
			"timeouts": timeoutsBlock(ctx, timeouts.Opts{Create: true, Delete: true,
				CreateDescription: "How long the create may take, as a duration: for `init`, the install and the wait for the " +
					"controllers (a failed init deletes what it installed); for `move`, the whole move. Defaults to `5m`.",
				DeleteDescription: "`init`: how long destroy may take, as a duration: the deletion of the providers until gone. A " +
					"destroy past it fails and the resource stays in the state. Destroy reads it from the state. Defaults " +
					"to `5m`.",
			}),
		},
	}
}

func (r *clusterctlResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (r *clusterctlResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m clusterctlModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || m.Action.IsUnknown() {
		return
	}
	onlyFor := func(attr, action string, set bool) {
		if set {
			resp.Diagnostics.AddAttributeError(path.Root(attr), "Attribute Not Used By Action",
				fmt.Sprintf("%s is used only by action %q; this resource's action is %q. Remove it.", attr, action, m.Action.ValueString()))
		}
	}
	switch m.Action.ValueString() {
	case clusterctlInit:
		onlyFor("to_cluster", clusterctlMove, !m.ToCluster.IsNull())
		onlyFor("namespace", clusterctlMove, !m.Namespace.IsNull())
		if m.Providers.IsNull() {
			resp.Diagnostics.AddAttributeError(path.Root("providers"), "Missing Providers",
				"Action \"init\" installs the providers listed in providers; add at least the core provider "+
					"(type = \"CoreProvider\") with its components and metadata.")
			return
		}
		r.validateProviders(ctx, m, &resp.Diagnostics)
	case clusterctlMove:
		onlyFor("providers", clusterctlInit, !m.Providers.IsNull())
		onlyFor("variables", clusterctlInit, !m.Variables.IsNull())
		onlyFor("variables_wo", clusterctlInit, !m.VariablesWO.IsNull())
		onlyFor("variables_wo_version", clusterctlInit, !m.WOVersion.IsNull())
		if m.ToCluster.IsNull() {
			resp.Diagnostics.AddAttributeError(path.Root("to_cluster"), "Missing Target Cluster",
				"Action \"move\" moves objects to the cluster of to_cluster; set it to a kubeplay_credential's name.")
		} else if !m.ToCluster.IsUnknown() && !m.Cluster.IsUnknown() && m.ToCluster.ValueString() == m.Cluster.ValueString() {
			resp.Diagnostics.AddAttributeError(path.Root("to_cluster"), "Move To The Same Cluster",
				fmt.Sprintf("to_cluster and cluster both name %q; a move needs two clusters.", m.Cluster.ValueString()))
		}
	}
}

// validateProviders checks each provider as clusterctl will at apply, and
// that exactly one is the core provider.
func (r *clusterctlResource) validateProviders(ctx context.Context, m clusterctlModel, diags *diag.Diagnostics) {
	if m.Providers.IsUnknown() {
		return
	}
	var ps []clusterctlProviderModel
	diags.Append(m.Providers.ElementsAs(ctx, &ps, false)...)
	if diags.HasError() {
		return
	}
	cores, known := 0, true
	seen := map[string]int{}
	for i, p := range ps {
		at := path.Root("providers").AtListIndex(i)
		if p.Type.IsUnknown() || p.Name.IsUnknown() {
			known = false
			continue
		}
		if p.Type.ValueString() == "CoreProvider" {
			cores++
		}
		key := p.Type.ValueString() + "/" + p.Name.ValueString()
		if j, dup := seen[key]; dup {
			diags.AddAttributeError(at, "Duplicate Provider",
				fmt.Sprintf("providers[%d] and providers[%d] are both the %s %q; list each provider once.", j, i, p.Type.ValueString(), p.Name.ValueString()))
		}
		seen[key] = i
		if p.Version.IsUnknown() || p.Components.IsUnknown() || p.Metadata.IsUnknown() {
			continue
		}
		if err := providerOf(p).Validate(); err != nil {
			diags.AddAttributeError(at, "Invalid Provider Release",
				fmt.Sprintf("The %s %q cannot be installed: %v. Give the components and metadata.yaml of the release "+
					"named by version.", p.Type.ValueString(), p.Name.ValueString(), err))
		}
	}
	if known && cores != 1 {
		diags.AddAttributeError(path.Root("providers"), "One Core Provider Required",
			fmt.Sprintf("providers lists %d providers of type CoreProvider; list exactly one (usually cluster-api), "+
				"since clusterctl would otherwise fetch the default one from the internet.", cores))
	}
}

func providerOf(p clusterctlProviderModel) clusterctl.Provider {
	return clusterctl.Provider{
		Name: p.Name.ValueString(), Type: p.Type.ValueString(), Version: p.Version.ValueString(),
		Components: p.Components.ValueString(), Metadata: p.Metadata.ValueString(),
	}
}

func providersOf(ctx context.Context, m clusterctlModel, diags *diag.Diagnostics) []clusterctl.Provider {
	var ps []clusterctlProviderModel
	diags.Append(m.Providers.ElementsAs(ctx, &ps, false)...)
	out := make([]clusterctl.Provider, 0, len(ps))
	for _, p := range ps {
		out = append(out, providerOf(p))
	}
	return out
}

func (r *clusterctlResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan, config clusterctlModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.Config.Get(ctx, &config)...)
	if resp.Diagnostics.HasError() {
		return
	}
	plan.ID = plan.Name
	name := plan.Name.ValueString()
	from, err := r.data.credentialClients(ctx, plan.Cluster.ValueString())
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("cluster"), "Cluster Unavailable",
			fmt.Sprintf("Clusterctl phase %q cannot reach its cluster: %v.", name, err))
		return
	}
	limit, diags := plan.Timeouts.Create(ctx, clusterctlTimeout)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	// The cleanup of a failed init has its own time, after this deadline.
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	switch plan.Action.ValueString() {
	case clusterctlInit:
		vars := map[string]string{}
		maps.Copy(vars, goStringMap(ctx, plan.Variables, &resp.Diagnostics))
		maps.Copy(vars, goStringMap(ctx, config.VariablesWO, &resp.Diagnostics))
		providers := providersOf(ctx, plan, &resp.Diagnostics)
		if resp.Diagnostics.HasError() {
			return
		}
		// What another install left: a failed init then keeps the CRDs.
		before, err := clusterctl.Installed(ctx, from.Dynamic, providers)
		if err != nil {
			addInventoryUnreadable(&resp.Diagnostics, name, err)
			return
		}
		start := time.Now()
		err = clusterctl.Init(ctx, from, clusterctl.InitRequest{Providers: providers, Variables: vars, Timeout: limit})
		if err != nil {
			resp.Diagnostics.AddError("Clusterctl Init Failed", initFailure(name, limit, err))
			if !errors.Is(err, clusterctl.ErrNoCertManager) {
				r.cleanUp(ctx, name, from, providers, len(before) == 0, &resp.Diagnostics)
			}
			return
		}
		tflog.Info(ctx, "clusterctl init done", map[string]any{"phase": name, "providers": len(providers), "seconds": time.Since(start).Seconds()})
	case clusterctlMove:
		to, err := r.data.credentialClients(ctx, plan.ToCluster.ValueString())
		if err != nil {
			resp.Diagnostics.AddAttributeError(path.Root("to_cluster"), "Cluster Unavailable",
				fmt.Sprintf("Clusterctl phase %q cannot reach the cluster to move to: %v.", name, err))
			return
		}
		ns := plan.Namespace.ValueString()
		if ns == "" {
			ns = "default"
		}
		if err := clusterctl.Move(ctx, from, to, ns); err != nil {
			cause := "Both clusters need the same providers (an init of each) and every Cluster must have finished " +
				"provisioning. Fix the cause"
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				cause = fmt.Sprintf("The move did not finish within timeouts.create (%s). Raise it for a namespace "+
					"of many objects", limit)
			}
			resp.Diagnostics.AddError("Clusterctl Move Failed", fmt.Sprintf(
				"Moving the Cluster API objects of namespace %q failed: %v.\n\nclusterctl move pauses the clusters, "+
					"creates the objects on the target and then deletes them from the source; an interrupted move can "+
					"leave them on both, paused. %s and apply again: the move runs again and skips objects the target "+
					"already holds.", ns, err, cause))
			return
		}
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, plan)...)
}

// initFailure is the detail of a failed init: its cause and remedy.
func initFailure(name string, limit time.Duration, err error) string {
	switch {
	case errors.Is(err, clusterctl.ErrNoCertManager):
		return fmt.Sprintf("Clusterctl phase %q cannot init its cluster: %v. clusterctl requires cert-manager before "+
			"it installs providers, and kubeplay does not download it: install cert-manager first, for example with a "+
			"kubeplay_phase of its release manifests, and add that phase to this resource's depends_on.", name, err)
	case errors.Is(err, clusterctl.ErrCannotStart):
		return fmt.Sprintf("Clusterctl phase %q: %v.\n\nCheck the image the components name and that the node can "+
			"pull it (imagePullPolicy, registry credentials), and the components' variables. What the init installed "+
			"was deleted, so the next apply starts clean.", name, err)
	case errors.Is(err, context.Canceled):
		return fmt.Sprintf("Clusterctl phase %q was canceled: Terraform was interrupted. What it installed was "+
			"deleted; the next apply runs the init again.", name)
	}
	if strings.Contains(err.Error(), "variable substitution") {
		return fmt.Sprintf("Clusterctl phase %q cannot init its cluster: %v.\n\nGive those values in variables, or in "+
			"variables_wo for secrets: kubeplay reads neither environment variables nor clusterctl's config file. "+
			"What the init installed was deleted, so the next apply starts clean.", name, err)
	}
	return fmt.Sprintf("Clusterctl phase %q cannot init its cluster: %v.\n\nCheck the components and their "+
		"variables, and that the providers' controllers become available within timeouts.create (%s): their pods' "+
		"events show why not (node, RBAC, probes), or raise it. What the init installed was deleted, so the next "+
		"apply starts clean.", name, err, limit)
}

// cleanUp deletes the providers of a failed init, so that the next apply
// can install them again, and their CRDs when the init installed them (crds)
// and no object uses them; a failure to do so is added to diags.
func (r *clusterctlResource) cleanUp(ctx context.Context, name string, c *kubeclient.Clients, providers []clusterctl.Provider, crds bool, diags *diag.Diagnostics) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), clusterctlCleanupTimeout)
	defer cancel()
	if err := clusterctl.Delete(ctx, c, providers, crds); err != nil {
		diags.AddError("Clusterctl Cleanup Failed", fmt.Sprintf(
			"After the failed init of clusterctl phase %q, deleting what it installed failed: %v. Delete the "+
				"providers' namespaces and the clusterctl inventory entries (providers.clusterctl.cluster.x-k8s.io) "+
				"before the next apply.", name, err))
	}
}

// addInventoryUnreadable: the cluster's clusterctl inventory cannot be listed.
func addInventoryUnreadable(diags *diag.Diagnostics, name string, err error) {
	diags.AddAttributeError(path.Root("cluster"), "Clusterctl Inventory Unreadable", fmt.Sprintf(
		"Clusterctl phase %q cannot read which providers its cluster runs: %v. Check that the credential may "+
			"list providers.clusterctl.cluster.x-k8s.io on all namespaces.", name, err))
}

// initTarget is what Read and Delete of an init work on.
type initTarget struct {
	name      string
	clients   *kubeclient.Clients
	providers []clusterctl.Provider
	crds      bool
}

// target returns the init in state s with its cluster's clients: nil for a
// move or a state that cannot be read (then diags says why), and the error
// of a cluster that cannot be reached.
func (r *clusterctlResource) target(ctx context.Context, s tfsdk.State, diags *diag.Diagnostics) (*initTarget, error) {
	var m clusterctlModel
	diags.Append(s.Get(ctx, &m)...)
	if diags.HasError() || m.Action.ValueString() != clusterctlInit {
		return nil, nil
	}
	t := &initTarget{name: m.Name.ValueString(), providers: providersOf(ctx, m, diags), crds: m.DestroyCRDs.ValueBool()}
	var err error
	t.clients, err = r.data.credentialClients(ctx, m.Cluster.ValueString())
	return t, err
}

func (r *clusterctlResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	t, err := r.target(ctx, req.State, &resp.Diagnostics)
	if err != nil {
		// An unreachable cluster keeps the state: the next apply says why.
		tflog.Warn(ctx, "clusterctl phase's cluster unreachable", map[string]any{"phase": t.name, "error": err.Error()})
		return
	}
	if t == nil {
		return
	}
	installed, err := clusterctl.Installed(ctx, t.clients.Dynamic, t.providers)
	if err != nil {
		addInventoryUnreadable(&resp.Diagnostics, t.name, err)
		return
	}
	if len(installed) < len(t.providers) {
		tflog.Info(ctx, "clusterctl providers gone; planning a new init", map[string]any{"phase": t.name})
		resp.State.RemoveResource(ctx)
	}
}

func (r *clusterctlResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	// Only timeouts and destroy_crds change in place: both are read later.
	var plan clusterctlModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, plan)...)
}

func (r *clusterctlResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	t, err := r.target(ctx, req.State, &resp.Diagnostics)
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("cluster"), "Cluster Unavailable",
			fmt.Sprintf("Clusterctl phase %q cannot reach its cluster to delete its providers: %v.", t.name, err))
		return
	}
	if t == nil {
		return
	}
	var to timeouts.Value
	resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("timeouts"), &to)...)
	limit, diags := to.Delete(ctx, clusterctlTimeout)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	if err := clusterctl.Delete(ctx, t.clients, t.providers, t.crds); err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			resp.Diagnostics.AddError("Clusterctl Delete Timed Out", fmt.Sprintf(
				"Deleting the providers of clusterctl phase %q did not finish within timeouts.delete (%s): %v. "+
					"A namespace that stays Terminating (an object whose finalizer no controller removes) keeps it "+
					"waiting. Raise timeouts.delete, or remove what holds the providers' namespaces, and destroy "+
					"again: it deletes what is left.", t.name, limit, err))
			return
		}
		resp.Diagnostics.AddError("Clusterctl Delete Failed", fmt.Sprintf(
			"Deleting the providers of clusterctl phase %q failed: %v. Check the credential's permissions and apply "+
				"the destroy again.", t.name, err))
	}
}
