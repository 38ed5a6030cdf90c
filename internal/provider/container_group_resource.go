// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/boolplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/capacity"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runnamespace"
)

var (
	_ resource.Resource                   = (*containerGroupResource)(nil)
	_ resource.ResourceWithConfigure      = (*containerGroupResource)(nil)
	_ resource.ResourceWithImportState    = (*containerGroupResource)(nil)
	_ resource.ResourceWithValidateConfig = (*containerGroupResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*containerGroupResource)(nil)
)

const (
	// managed.ComponentContainerGroup labels a container group's catalog ConfigMap.
	groupSpecKey = "group.json"
	groupPodKey  = "pod.yaml"
	// groupPlanCheckTimeout bounds the plan-time look at the cluster.
	groupPlanCheckTimeout = 10 * time.Second
	// groupDeleteTimeout bounds the wait for a managed namespace to go.
	groupDeleteTimeout = 5 * time.Minute
)

type containerGroupResource struct {
	data *providerData
}

func newContainerGroupResource() resource.Resource { return &containerGroupResource{} }

type containerGroupModel struct {
	ID                         types.String `tfsdk:"id"`
	Name                       types.String `tfsdk:"name"`
	Credential                 types.String `tfsdk:"credential"`
	Namespace                  types.String `tfsdk:"namespace"`
	ManageNamespace            types.Bool   `tfsdk:"manage_namespace"`
	Image                      types.String `tfsdk:"image"`
	PodSpecOverride            types.String `tfsdk:"pod_spec_override"`
	MaxConcurrentRuns          types.Int64  `tfsdk:"max_concurrent_runs"`
	MaxCores                   types.String `tfsdk:"max_cores"`
	MaxRAM                     types.Int64  `tfsdk:"max_ram"`
	MaxResources               types.Map    `tfsdk:"max_resources"`
	MaxForks                   types.Int64  `tfsdk:"max_forks"`
	DefaultLabelCPU            types.String `tfsdk:"default_label_cpu"`
	DefaultLabelMemory         types.Int64  `tfsdk:"default_label_memory"`
	DefaultLabelStorage        types.Int64  `tfsdk:"default_label_storage"`
	DefaultLabelCPULimit       types.String `tfsdk:"default_label_cpu_limit"`
	DefaultLabelMemoryLimit    types.Int64  `tfsdk:"default_label_memory_limit"`
	DefaultLabelStorageLimit   types.Int64  `tfsdk:"default_label_storage_limit"`
	DefaultLabelExtraResources types.Map    `tfsdk:"default_label_extra_resources"`
	PodPendingTimeout          types.String `tfsdk:"pod_pending_timeout"`
	LaunchRetries              types.Int64  `tfsdk:"launch_retries"`
	Priority                   types.Int64  `tfsdk:"priority"`
	Labels                     types.Map    `tfsdk:"labels"`
	Annotations                types.Map    `tfsdk:"annotations"`
	RenderedPod                types.String `tfsdk:"rendered_pod"`
}

// groupSpec is what the catalog ConfigMap stores, and what runs read.
type groupSpec struct {
	Name              string            `json:"name"`
	Credential        string            `json:"credential,omitempty"`
	Namespace         string            `json:"namespace"`
	ManageNamespace   bool              `json:"manage_namespace"`
	Image             string            `json:"image"`
	PodSpecOverride   string            `json:"pod_spec_override,omitempty"`
	MaxConcurrentRuns *int64            `json:"max_concurrent_runs,omitempty"`
	MaxCores          string            `json:"max_cores,omitempty"`
	MaxRAM            *int64            `json:"max_ram,omitempty"`
	MaxResources      map[string]string `json:"max_resources"`
	MaxForks          *int64            `json:"max_forks,omitempty"`
	DefaultLabel      podspec.Resources `json:"default_label"`
	PodPendingTimeout string            `json:"pod_pending_timeout"`
	LaunchRetries     int64             `json:"launch_retries"`
	Priority          *int64            `json:"priority,omitempty"`
	Labels            map[string]string `json:"labels"`
	Annotations       map[string]string `json:"annotations"`
}

func (g groupSpec) limits() capacity.Limits {
	return capacity.Limits{MaxConcurrentRuns: g.MaxConcurrentRuns, MaxCores: g.MaxCores, MaxRAM: g.MaxRAM, MaxResources: g.MaxResources}
}

func (g groupSpec) podGroup() podspec.Group {
	return podspec.Group{Name: g.Name, Namespace: g.Namespace, Image: g.Image, Labels: g.Labels,
		Annotations: g.Annotations, Override: g.PodSpecOverride}
}

func (r *containerGroupResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_container_group"
}

const containerGroupDescription = "A container group says where runs execute and what their pods look like: AWX's " +
	"container group and Nodepool's kubernetes pool in one. It is stored as a ConfigMap in the provider's " +
	"`catalog_namespace`, so other workspaces can use it by name.\n\n" +
	"**Run pod.** Every run starts from a default pod: one container named `worker` running `image` with args " +
	"`sleep infinity` behind a shell that exits on SIGTERM (the run execs into it), `restartPolicy: Never`, `automountServiceAccountToken: false` and " +
	"requests of 250m CPU and 100Mi memory. `pod_spec_override` is merged over it with a strategic merge patch, so " +
	"containers merge by name instead of replacing the list as in AWX, and `worker` stays the first container. " +
	"`rendered_pod` shows the result at plan time.\n\n" +
	"**Capacity** is enforced by the cluster, so every Terraform process and workspace shares one limit. " +
	"`max_concurrent_runs`, `max_cores`, `max_ram` and `max_resources` become a ResourceQuota named " +
	"`kubeplay-<name>` in `namespace`; a run pod beyond it is refused by the API server with `exceeded quota`. " +
	"A quota covers the whole namespace, so a namespace shared with another group or with other workloads is a " +
	"plan-time warning. `max_forks` is coordinated through a ledger: a ConfigMap `kubeplay-forks-<name>` in " +
	"`namespace` whose entries map a run to the forks it holds and a deadline. A run claims forks by updating the " +
	"ledger conditioned on the resourceVersion it read, so of two processes writing at once one gets `409 Conflict` " +
	"and reads again; when the live claims leave no room it watches the ledger until a run releases its claim. A run " +
	"that dies without releasing is reaped once its deadline passes, and live runs renew theirs.\n\n" +
	"Changing `name`, `credential`, `namespace` or `manage_namespace` replaces the group."

func (r *containerGroupResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	mib := "in MiB"
	resp.Schema = schema.Schema{
		MarkdownDescription: containerGroupDescription,
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The container group's name.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": schema.StringAttribute{
				MarkdownDescription: "The group's name, unique in the catalog namespace: a lowercase RFC 1123 label of at " +
					"most 63 characters. Changing it replaces the group.",
				Required:      true,
				Validators:    []validator.String{dnsLabel()},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"credential": schema.StringAttribute{
				MarkdownDescription: "The name of the `kubeplay_credential` that reaches the cluster runs execute in. " +
					"Unset means the provider's own connection, as AWX falls back to in-cluster authentication. Changing it " +
					"replaces the group.",
				Optional:      true,
				Validators:    []validator.String{dnsLabel()},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"namespace": schema.StringAttribute{
				MarkdownDescription: "The namespace run pods are created in, and where the group's quota and forks ledger " +
					"live. Defaults to the `metadata.namespace` of `pod_spec_override` (as in AWX), else `default`; when both " +
					"are set they must agree. Changing it replaces the group.",
				Optional:   true,
				Computed:   true,
				Validators: []validator.String{dnsLabel()},
			},
			"manage_namespace": schema.BoolAttribute{
				MarkdownDescription: "Whether the group creates `namespace` and deletes it, with everything in it, when " +
					"the group is destroyed. A namespace that already exists is refused. Defaults to `false`: the namespace " +
					"must then exist when the group needs a quota or a ledger there.",
				Optional:      true,
				Computed:      true,
				Default:       booldefault.StaticBool(false),
				PlanModifiers: []planmodifier.Bool{boolplanmodifier.RequiresReplace()},
			},
			"image": schema.StringAttribute{
				MarkdownDescription: "The default run image, the `worker` container's. Defaults to AWX's default " +
					"execution environment, `" + podspec.DefaultImage + "`.",
				Optional:   true,
				Computed:   true,
				Default:    stringdefault.StaticString(podspec.DefaultImage),
				Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
			},
			"pod_spec_override": schema.StringAttribute{
				MarkdownDescription: "A Pod, or a bare PodSpec, as YAML or JSON, as AWX users write it (an AWX override " +
					"works verbatim). It is merged over the default pod with a strategic merge patch: containers merge by " +
					"name; a first container without a name is `worker`; `$patch: replace` replaces a list. Parse errors " +
					"and fields a Pod does not have are plan-time errors that give the line. `metadata.name` is refused " +
					"(runs name their pods); a `metadata.namespace` must equal `namespace`.",
				Optional:   true,
				Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
			},
			"max_concurrent_runs": schema.Int64Attribute{
				MarkdownDescription: "The most run pods that may exist at once in `namespace` (AWX's " +
					"`max_concurrent_jobs`, Nodepool's `max-servers`): the quota's `pods`. At least 1; unset is unlimited.",
				Optional:   true,
				Validators: []validator.Int64{int64validator.AtLeast(1)},
			},
			"max_cores": schema.StringAttribute{
				MarkdownDescription: "The most CPU that run pods may request together (Nodepool's `max-cores`), a " +
					"quantity such as `4` or `1500m`: the quota's `requests.cpu`. Unset is unlimited.",
				Optional:   true,
				Validators: []validator.String{k8sQuantity()},
			},
			"max_ram": schema.Int64Attribute{
				MarkdownDescription: "The most memory, " + mib + ", that run pods may request together (Nodepool's " +
					"`max-ram`): the quota's `requests.memory`. Unset is unlimited.",
				Optional:   true,
				Validators: []validator.Int64{int64validator.AtLeast(0)},
			},
			"max_resources": schema.MapAttribute{
				MarkdownDescription: "Other quota limits (Nodepool's `max-resources`), from ResourceQuota resource names " +
					"such as `requests.nvidia.com/gpu` or `count/configmaps` to quantities.",
				Optional:    true,
				ElementType: types.StringType,
				Validators:  []validator.Map{k8sQuantityMap("quota")},
			},
			"max_forks": schema.Int64Attribute{
				MarkdownDescription: "The most Ansible forks that live runs of the group may use together (AWX's " +
					"`max_forks`), also across Terraform processes: see the forks ledger above. At least 1; unset is " +
					"unlimited.",
				Optional:   true,
				Validators: []validator.Int64{int64validator.AtLeast(1)},
			},
			"default_label_cpu": schema.StringAttribute{
				MarkdownDescription: "The CPU request, a quantity, of node labels that set no `cpu` (Nodepool's " +
					"`default-label-cpu`).",
				Optional:   true,
				Validators: []validator.String{k8sQuantity()},
			},
			"default_label_memory": schema.Int64Attribute{
				MarkdownDescription: "The memory request, " + mib + ", of node labels that set no `memory`.",
				Optional:            true,
				Validators:          []validator.Int64{int64validator.AtLeast(0)},
			},
			"default_label_storage": schema.Int64Attribute{
				MarkdownDescription: "The ephemeral-storage request, in MB, of node labels that set no `storage`.",
				Optional:            true,
				Validators:          []validator.Int64{int64validator.AtLeast(0)},
			},
			"default_label_cpu_limit": schema.StringAttribute{
				MarkdownDescription: "The CPU limit of node labels that set no `cpu_limit`. A missing limit falls back, as " +
					"in Nodepool, to the label's limit, this default limit, the label's request, then the default request.",
				Optional:   true,
				Validators: []validator.String{k8sQuantity()},
			},
			"default_label_memory_limit": schema.Int64Attribute{
				MarkdownDescription: "The memory limit, " + mib + ", of node labels that set no `memory_limit`.",
				Optional:            true,
				Validators:          []validator.Int64{int64validator.AtLeast(0)},
			},
			"default_label_storage_limit": schema.Int64Attribute{
				MarkdownDescription: "The ephemeral-storage limit, in MB, of node labels that set no `storage_limit`.",
				Optional:            true,
				Validators:          []validator.Int64{int64validator.AtLeast(0)},
			},
			"default_label_extra_resources": schema.MapAttribute{
				MarkdownDescription: "Extra resources (requested and limited alike) of node labels that set no " +
					"`extra_resources`, from resource names to quantities.",
				Optional:    true,
				ElementType: types.StringType,
				Validators:  []validator.Map{k8sQuantityMap("container")},
			},
			"pod_pending_timeout": schema.StringAttribute{
				MarkdownDescription: "How long a run waits for its pod to start, including waiting for quota, before it " +
					"fails, as a duration. Defaults to `5m`.",
				Optional:   true,
				Computed:   true,
				Default:    stringdefault.StaticString("5m"),
				Validators: []validator.String{groupDuration()},
			},
			"launch_retries": schema.Int64Attribute{
				MarkdownDescription: "How many times a run retries creating its pod before it fails (Nodepool's " +
					"`launch-retries`). Defaults to `3`.",
				Optional:   true,
				Computed:   true,
				Default:    int64default.StaticInt64(3),
				Validators: []validator.Int64{int64validator.AtLeast(0)},
			},
			"priority": schema.Int64Attribute{
				MarkdownDescription: "The group's priority; a lesser number is a higher priority (Nodepool's `priority`).",
				Optional:            true,
			},
			"labels": schema.MapAttribute{
				MarkdownDescription: "Labels put on every run pod of the group.",
				Optional:            true,
				ElementType:         types.StringType,
				Validators:          []validator.Map{k8sLabelMap()},
			},
			"annotations": schema.MapAttribute{
				MarkdownDescription: "Annotations put on every run pod of the group.",
				Optional:            true,
				ElementType:         types.StringType,
				Validators:          []validator.Map{k8sAnnotationMap()},
			},
			"rendered_pod": schema.StringAttribute{
				MarkdownDescription: "The group's default run pod as YAML, after `image`, `labels`, `annotations` and " +
					"`pod_spec_override`; known at plan time when they are. Each run adds its name, labels and node label.",
				Computed: true,
			},
		},
	}
}

func (r *containerGroupResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (r *containerGroupResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m containerGroupModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || m.PodSpecOverride.IsUnknown() || m.PodSpecOverride.IsNull() {
		return
	}
	ns, err := podspec.OverrideNamespace(m.PodSpecOverride.ValueString())
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("pod_spec_override"), "Invalid Pod Spec Override",
			"pod_spec_override must be a Pod or a PodSpec as YAML or JSON: "+err.Error()+".")
		return
	}
	if ns != "" && !m.Namespace.IsNull() && !m.Namespace.IsUnknown() && ns != m.Namespace.ValueString() {
		resp.Diagnostics.AddAttributeError(path.Root("pod_spec_override"), "Conflicting Namespaces",
			fmt.Sprintf("pod_spec_override sets metadata.namespace %q but namespace is %q. Remove one of them, or make "+
				"them equal.", ns, m.Namespace.ValueString()))
	}
}

// specFromGroupModel builds the stored form; ok is false while inputs are unknown.
func specFromGroupModel(ctx context.Context, m containerGroupModel, diags *diag.Diagnostics) (groupSpec, bool) {
	if m.Name.IsUnknown() || m.Credential.IsUnknown() || m.Namespace.IsUnknown() || m.Image.IsUnknown() ||
		m.PodSpecOverride.IsUnknown() || m.MaxCores.IsUnknown() || m.MaxResources.IsUnknown() || m.Labels.IsUnknown() ||
		m.Annotations.IsUnknown() || m.DefaultLabelCPU.IsUnknown() || m.DefaultLabelCPULimit.IsUnknown() ||
		m.DefaultLabelExtraResources.IsUnknown() || m.PodPendingTimeout.IsUnknown() {
		return groupSpec{}, false
	}
	return groupSpec{
		Name:              m.Name.ValueString(),
		Credential:        m.Credential.ValueString(),
		Namespace:         m.Namespace.ValueString(),
		ManageNamespace:   m.ManageNamespace.ValueBool(),
		Image:             m.Image.ValueString(),
		PodSpecOverride:   m.PodSpecOverride.ValueString(),
		MaxConcurrentRuns: ptrInt64(m.MaxConcurrentRuns),
		MaxCores:          m.MaxCores.ValueString(),
		MaxRAM:            ptrInt64(m.MaxRAM),
		MaxResources:      goStringMap(ctx, m.MaxResources, diags),
		MaxForks:          ptrInt64(m.MaxForks),
		DefaultLabel: podspec.Resources{
			CPU: m.DefaultLabelCPU.ValueString(), CPULimit: m.DefaultLabelCPULimit.ValueString(),
			Memory: ptrInt64(m.DefaultLabelMemory), MemoryLimit: ptrInt64(m.DefaultLabelMemoryLimit),
			Storage: ptrInt64(m.DefaultLabelStorage), StorageLimit: ptrInt64(m.DefaultLabelStorageLimit),
			ExtraResources: goStringMap(ctx, m.DefaultLabelExtraResources, diags),
		},
		PodPendingTimeout: m.PodPendingTimeout.ValueString(),
		LaunchRetries:     m.LaunchRetries.ValueInt64(),
		Priority:          ptrInt64(m.Priority),
		Labels:            goStringMap(ctx, m.Labels, diags),
		Annotations:       goStringMap(ctx, m.Annotations, diags),
	}, true
}

func (g groupSpec) fill(ctx context.Context, m *containerGroupModel, rendered string, diags *diag.Diagnostics) {
	m.ID = types.StringValue(g.Name)
	m.Name = types.StringValue(g.Name)
	m.Credential = stringOrNull(g.Credential)
	m.Namespace = types.StringValue(g.Namespace)
	m.ManageNamespace = types.BoolValue(g.ManageNamespace)
	m.Image = types.StringValue(g.Image)
	m.PodSpecOverride = stringOrNull(g.PodSpecOverride)
	m.MaxConcurrentRuns = nullableInt64(g.MaxConcurrentRuns)
	m.MaxCores = stringOrNull(g.MaxCores)
	m.MaxRAM = nullableInt64(g.MaxRAM)
	m.MaxResources = nullableStringMap(ctx, g.MaxResources, diags)
	m.MaxForks = nullableInt64(g.MaxForks)
	d := g.DefaultLabel
	m.DefaultLabelCPU, m.DefaultLabelCPULimit = stringOrNull(d.CPU), stringOrNull(d.CPULimit)
	m.DefaultLabelMemory, m.DefaultLabelMemoryLimit = nullableInt64(d.Memory), nullableInt64(d.MemoryLimit)
	m.DefaultLabelStorage, m.DefaultLabelStorageLimit = nullableInt64(d.Storage), nullableInt64(d.StorageLimit)
	m.DefaultLabelExtraResources = nullableStringMap(ctx, d.ExtraResources, diags)
	m.PodPendingTimeout = types.StringValue(g.PodPendingTimeout)
	m.LaunchRetries = types.Int64Value(g.LaunchRetries)
	m.Priority = nullableInt64(g.Priority)
	m.Labels = nullableStringMap(ctx, g.Labels, diags)
	m.Annotations = nullableStringMap(ctx, g.Annotations, diags)
	m.RenderedPod = types.StringValue(rendered)
}

// renderGroupPod renders the default run pod as YAML.
func renderGroupPod(g groupSpec) (string, error) {
	pod, err := podspec.RenderGroup(g.podGroup())
	if err != nil {
		return "", err
	}
	return podspec.ToYAML(pod)
}

func (r *containerGroupResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return // destroy
	}
	var plan, config containerGroupModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.Config.Get(ctx, &config)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if config.Namespace.IsNull() && !config.PodSpecOverride.IsUnknown() {
		ns, _ := podspec.OverrideNamespace(config.PodSpecOverride.ValueString())
		if ns == "" {
			ns = corev1.NamespaceDefault
		}
		plan.Namespace = types.StringValue(ns)
	}
	var state containerGroupModel
	if !req.State.Raw.IsNull() {
		resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
		if !plan.Namespace.IsUnknown() && !plan.Namespace.Equal(state.Namespace) {
			resp.RequiresReplace = append(resp.RequiresReplace, path.Root("namespace"))
		}
	}
	plan.RenderedPod = types.StringUnknown()
	spec, known := specFromGroupModel(ctx, plan, &resp.Diagnostics)
	if known {
		y, err := renderGroupPod(spec)
		if err != nil {
			resp.Diagnostics.AddAttributeError(path.Root("pod_spec_override"), "Invalid Pod Spec Override",
				"Merging pod_spec_override into the default pod failed: "+err.Error()+".")
			return
		}
		plan.RenderedPod = types.StringValue(y)
	}
	if !req.State.Raw.IsNull() {
		raw, diags := req.Private.GetKey(ctx, privateDriftKey)
		resp.Diagnostics.Append(diags...)
		var drift string
		if len(raw) > 0 && json.Unmarshal(raw, &drift) == nil && drift != "" {
			resp.Diagnostics.AddWarning("Container Group Changed Outside Terraform",
				fmt.Sprintf("Container group %q: %s. Apply creates it again.", plan.Name.ValueString(), drift))
			plan.RenderedPod = types.StringUnknown() // forces an update
		}
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
	if r.data != nil && !plan.Name.IsUnknown() {
		var v *groupSpec
		if known {
			v = &spec
		}
		r.data.plannedGroups.put(plan.Name.ValueString(), v, req.State.Raw.IsNull() || !resp.Plan.Raw.Equal(req.State.Raw))
	}
	if known && !spec.limits().Empty() {
		r.warnShared(ctx, spec, &resp.Diagnostics)
	}
}

// warnShared warns when the group's namespace holds another group or other
// workloads, which its quota would also limit. It says nothing when the
// cluster cannot be reached at plan time.
func (r *containerGroupResource) warnShared(ctx context.Context, g groupSpec, diags *diag.Diagnostics) {
	if r.data == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, groupPlanCheckTimeout)
	defer cancel()
	c, err := r.data.clients()
	if err != nil {
		return
	}
	gc, err := r.data.credentialClients(ctx, g.Credential)
	if err != nil {
		tflog.Debug(ctx, "skipping the shared-namespace check", map[string]any{"error": err.Error()})
		return
	}
	var users []string
	if others, err := r.otherGroups(ctx, c, g); err == nil {
		users = append(users, others...)
	}
	workloads, err := capacity.NamespaceUsers(ctx, gc.Kube, g.Namespace, g.Name)
	if err != nil {
		tflog.Debug(ctx, "skipping the shared-namespace check", map[string]any{"error": err.Error()})
	}
	users = append(users, workloads...)
	if len(users) > 0 {
		diags.AddAttributeWarning(path.Root("namespace"), "Namespace Is Shared",
			fmt.Sprintf("Namespace %q also holds %s. The group's ResourceQuota covers the whole namespace, so they count "+
				"against the group's capacity and the quota limits them too. Give the group a namespace of its own "+
				"(manage_namespace = true).", g.Namespace, strings.Join(users, "; ")))
	}
}

// otherGroups lists other container groups of the catalog in g's namespace
// on the same cluster.
func (r *containerGroupResource) otherGroups(ctx context.Context, c *kubeclient.Clients, g groupSpec) ([]string, error) {
	list, err := c.Kube.CoreV1().ConfigMaps(r.data.catalogNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: managed.LabelManagedBy + "=" + managed.ManagedByValue + "," + managed.LabelComponent + "=" + managed.ComponentContainerGroup,
	})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, cm := range list.Items {
		var o groupSpec
		if cm.Name == g.Name || json.Unmarshal([]byte(cm.Data[groupSpecKey]), &o) != nil {
			continue
		}
		if o.Namespace == g.Namespace && o.Credential == g.Credential {
			out = append(out, fmt.Sprintf("container group %q", o.Name))
		}
	}
	return out, nil
}

// managed.LabelComponent is the catalog's component label.

func (r *containerGroupResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	r.write(ctx, req.Plan.Get, true, &resp.State, &resp.Diagnostics)
}

func (r *containerGroupResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	r.write(ctx, req.Plan.Get, false, &resp.State, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.Private.SetKey(ctx, privateDriftKey, nil)...)
}

// write ensures the namespace, the quota and the forks ledger on the run
// cluster, then stores the group in the catalog.
func (r *containerGroupResource) write(ctx context.Context, getPlan getter, create bool, state stateSetter, diags *diag.Diagnostics) {
	var plan containerGroupModel
	diags.Append(getPlan(ctx, &plan)...)
	if diags.HasError() {
		return
	}
	g, _ := specFromGroupModel(ctx, plan, diags)
	rendered, err := renderGroupPod(g)
	if err != nil {
		diags.AddAttributeError(path.Root("pod_spec_override"), "Invalid Pod Spec Override", err.Error()+".")
		return
	}
	c := r.data.catalogClients(ctx, diags)
	if c == nil {
		return
	}
	cms := c.Kube.CoreV1().ConfigMaps(r.data.catalogNamespace)
	existing, err := cms.Get(ctx, g.Name, metav1.GetOptions{})
	found := err == nil
	switch {
	case found && create:
		diags.AddAttributeError(path.Root("name"), "Container Group Already Exists",
			fmt.Sprintf("ConfigMap %s/%s already exists. Import it with `terraform import <address> %s`, or choose another name.",
				r.data.catalogNamespace, g.Name, g.Name))
		return
	case err != nil && !apierrors.IsNotFound(err):
		diags.AddError("Reading Container Group Failed", fmt.Sprintf("Reading ConfigMap %s/%s: %v.", r.data.catalogNamespace, g.Name, err))
		return
	}
	gc, ok := r.groupClients(ctx, g, diags)
	if !ok {
		return
	}
	if !r.ensureRunSide(ctx, gc, g, diags) {
		return
	}
	body, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		diags.AddError("Encoding Container Group Failed", err.Error())
		return
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:      g.Name,
			Namespace: r.data.catalogNamespace,
			Labels: map[string]string{managed.LabelManagedBy: managed.ManagedByValue, managed.LabelComponent: managed.ComponentContainerGroup,
				managed.LabelContainerGroup: g.Name},
		},
		Data: map[string]string{groupSpecKey: string(body), groupPodKey: rendered},
	}
	if found {
		existing.Labels, existing.Data = cm.Labels, cm.Data
		_, err = cms.Update(ctx, existing, metav1.UpdateOptions{FieldManager: managed.ManagedByValue})
	} else {
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: managed.ManagedByValue})
	}
	if err != nil {
		diags.AddError("Writing Container Group Failed", fmt.Sprintf("Writing ConfigMap %s/%s: %v.", r.data.catalogNamespace, g.Name, err))
		return
	}
	g.fill(ctx, &plan, rendered, diags)
	diags.Append(state.Set(ctx, &plan)...)
}

// groupClients returns the clients of the cluster the group's runs use.
func (r *containerGroupResource) groupClients(ctx context.Context, g groupSpec, diags *diag.Diagnostics) (*kubeclient.Clients, bool) {
	gc, err := r.data.credentialClients(ctx, g.Credential)
	if err != nil {
		if g.Credential == "" {
			diags.AddError("Kubernetes Connection Unavailable", err.Error())
		} else {
			diags.AddAttributeError(path.Root("credential"), "Credential Unavailable",
				fmt.Sprintf("Container group %q cannot use credential %q: %v.", g.Name, g.Credential, err))
		}
		return nil, false
	}
	return gc, true
}

// ensureRunSide creates or checks the namespace, then sets the quota and the
// ledger to match the group.
func (r *containerGroupResource) ensureRunSide(ctx context.Context, gc *kubeclient.Clients, g groupSpec, diags *diag.Diagnostics) bool {
	host := gc.Config.Host
	nss := gc.Kube.CoreV1().Namespaces()
	ns, err := nss.Get(ctx, g.Namespace, metav1.GetOptions{})
	needsNamespace := !g.limits().Empty() || g.MaxForks != nil
	// A group that manages nothing but pods works with seed 001's pod-manager
	// Role alone, which may not read namespaces, quotas or ConfigMaps.
	podsOnly := !g.ManageNamespace && !needsNamespace
	forbiddenOK := func(err error) error {
		if podsOnly && apierrors.IsForbidden(err) {
			return nil
		}
		return err
	}
	if forbiddenOK(err) == nil && err != nil {
		tflog.Debug(ctx, "the group's credential may not read its namespace; it manages pods only", map[string]any{"namespace": g.Namespace})
		return true
	}
	switch {
	case err == nil && g.ManageNamespace && ns.Labels[managed.LabelContainerGroup] != g.Name:
		diags.AddAttributeError(path.Root("manage_namespace"), "Namespace Already Exists",
			fmt.Sprintf("Namespace %q already exists on %s and was not created by container group %q; a managed namespace "+
				"is deleted with the group, so kubeplay does not adopt it. Set manage_namespace = false, or choose a new namespace.",
				g.Namespace, host, g.Name))
		return false
	case apierrors.IsNotFound(err) && g.ManageNamespace:
		_, err = nss.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: g.Namespace, Labels: map[string]string{
			managed.LabelManagedBy: managed.ManagedByValue, managed.LabelContainerGroup: g.Name,
		}}}, metav1.CreateOptions{FieldManager: managed.ManagedByValue})
		if err != nil {
			diags.AddAttributeError(path.Root("namespace"), "Creating Namespace Failed",
				fmt.Sprintf("Creating namespace %q on %s: %v.", g.Namespace, host, err))
			return false
		}
	case apierrors.IsNotFound(err) && needsNamespace:
		diags.AddAttributeError(path.Root("namespace"), "Namespace Not Found",
			fmt.Sprintf("Namespace %q does not exist on %s, and the group's quota and forks ledger live there. Create it, "+
				"or set manage_namespace = true.", g.Namespace, host))
		return false
	case apierrors.IsNotFound(err):
		diags.AddAttributeWarning(path.Root("namespace"), "Namespace Not Found",
			fmt.Sprintf("Namespace %q does not exist on %s yet; runs of container group %q fail until it does.", g.Namespace, host, g.Name))
		return true
	case err != nil:
		diags.AddAttributeError(path.Root("namespace"), "Reading Namespace Failed",
			fmt.Sprintf("Reading namespace %q on %s: %v. Check that the cluster is reachable and that the credential may "+
				"read namespaces.", g.Namespace, host, err))
		return false
	}
	if err := forbiddenOK(capacity.ApplyQuota(ctx, gc.Kube, g.Name, g.Namespace, g.limits())); err != nil {
		diags.AddAttributeError(path.Root("max_concurrent_runs"), "Writing Quota Failed",
			fmt.Sprintf("Setting ResourceQuota %s/%s on %s: %v.", g.Namespace, capacity.QuotaName(g.Name), host, err))
		return false
	}
	led := capacity.Ledger{Kube: gc.Kube, Namespace: g.Namespace, Group: g.Name}
	if g.MaxForks != nil {
		err = led.Ensure(ctx, *g.MaxForks)
	} else {
		err = forbiddenOK(led.Delete(ctx))
	}
	if err != nil {
		diags.AddAttributeError(path.Root("max_forks"), "Writing Forks Ledger Failed",
			fmt.Sprintf("Setting ConfigMap %s/%s on %s: %v.", g.Namespace, capacity.LedgerName(g.Name), host, err))
		return false
	}
	runs := capacity.Ledger{Kube: gc.Kube, Namespace: g.Namespace, Group: g.Name, Kind: capacity.Runs}
	if g.MaxConcurrentRuns != nil {
		err = runs.Ensure(ctx, *g.MaxConcurrentRuns)
	} else {
		err = forbiddenOK(runs.Delete(ctx))
	}
	if err != nil {
		diags.AddAttributeError(path.Root("max_concurrent_runs"), "Writing Runs Ledger Failed",
			fmt.Sprintf("Setting ConfigMap %s/%s on %s: %v.", g.Namespace, runs.ConfigMapName(), host, err))
		return false
	}
	return true
}

// readGroup reads a group from the catalog; nil when it does not exist.
func readGroup(ctx context.Context, data *providerData, name string) (*groupSpec, string, error) {
	c, err := data.clients()
	if err != nil {
		return nil, "", err
	}
	cm, err := c.Kube.CoreV1().ConfigMaps(data.catalogNamespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("reading ConfigMap %s/%s: %w", data.catalogNamespace, name, err)
	}
	var g groupSpec
	if err := json.Unmarshal([]byte(cm.Data[groupSpecKey]), &g); err != nil || g.Name == "" {
		return nil, "", fmt.Errorf("ConfigMap %s/%s is not a kubeplay container group (its %s is missing or invalid); "+
			"delete it or fix it", data.catalogNamespace, name, groupSpecKey)
	}
	return &g, cm.Data[groupPodKey], nil
}

func (r *containerGroupResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state containerGroupModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := state.Name.ValueString()
	g, rendered, err := readGroup(ctx, r.data, name)
	if err != nil {
		resp.Diagnostics.AddError("Reading Container Group Failed", err.Error()+".")
		return
	}
	if g == nil {
		tflog.Info(ctx, "container group ConfigMap is gone; removing it from state", map[string]any{"container_group": name})
		resp.State.RemoveResource(ctx)
		return
	}
	resp.Diagnostics.Append(resp.Private.SetKey(ctx, privateDriftKey, r.runSideDrift(ctx, *g))...)
	g.fill(ctx, &state, rendered, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// runSideDrift names what the group needs on its cluster and is missing, as
// private state for ModifyPlan; nil when all is there or it cannot tell.
func (r *containerGroupResource) runSideDrift(ctx context.Context, g groupSpec) []byte {
	gc, err := r.data.credentialClients(ctx, g.Credential)
	if err != nil {
		return nil
	}
	var missing []string
	kube := gc.Kube.CoreV1()
	if _, err := kube.Namespaces().Get(ctx, g.Namespace, metav1.GetOptions{}); apierrors.IsNotFound(err) && g.ManageNamespace {
		missing = append(missing, "namespace "+g.Namespace)
	}
	if !g.limits().Empty() {
		if _, err := kube.ResourceQuotas(g.Namespace).Get(ctx, capacity.QuotaName(g.Name), metav1.GetOptions{}); apierrors.IsNotFound(err) {
			missing = append(missing, "ResourceQuota "+g.Namespace+"/"+capacity.QuotaName(g.Name))
		}
	}
	if g.MaxForks != nil {
		if _, err := kube.ConfigMaps(g.Namespace).Get(ctx, capacity.LedgerName(g.Name), metav1.GetOptions{}); apierrors.IsNotFound(err) {
			missing = append(missing, "forks ledger "+g.Namespace+"/"+capacity.LedgerName(g.Name))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	b, _ := json.Marshal(strings.Join(missing, ", ") + " is gone")
	return b
}

func (r *containerGroupResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state containerGroupModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	g, _ := specFromGroupModel(ctx, state, &resp.Diagnostics)
	// A namespace stuck terminating (a finalizer that never finishes) must not
	// hang the destroy.
	ctx, cancel := context.WithTimeout(ctx, groupDeleteTimeout)
	defer cancel()
	gc, err := r.data.credentialClients(ctx, g.Credential)
	switch {
	case err != nil:
		// The credential may be destroyed in the same apply: nothing left to reach.
		resp.Diagnostics.AddWarning("Container Group Cluster Unavailable",
			fmt.Sprintf("Container group %q: %v. Its quota and ledger in namespace %q were not removed; delete them by hand "+
				"if the cluster still exists.", g.Name, err, g.Namespace))
	default:
		if g.ManageNamespace {
			if err := runnamespace.Delete(ctx, gc.Kube, g.Namespace); err != nil {
				resp.Diagnostics.AddError("Deleting Namespace Failed", fmt.Sprintf("Deleting namespace %q on %s: %v. A namespace "+
					"that stays Terminating has a finalizer that has not finished: see `kubectl get namespace %s -o yaml`.",
					g.Namespace, gc.Config.Host, err, g.Namespace))
				return
			}
		} else if !g.limits().Empty() || g.MaxForks != nil {
			// A pods-only group made neither: its credential may lack the rights to delete them.
			if err := capacity.DeleteQuota(ctx, gc.Kube, g.Name, g.Namespace); err != nil && !apierrors.IsNotFound(err) {
				resp.Diagnostics.AddError("Deleting Quota Failed", fmt.Sprintf("Deleting ResourceQuota %s/%s on %s: %v.",
					g.Namespace, capacity.QuotaName(g.Name), gc.Config.Host, err))
				return
			}
			if err := (capacity.Ledger{Kube: gc.Kube, Namespace: g.Namespace, Group: g.Name, Kind: capacity.Runs}).Delete(ctx); err != nil {
				resp.Diagnostics.AddError("Deleting Runs Ledger Failed", fmt.Sprintf("Deleting the runs ledger of group %q in %s: %v.", g.Name, g.Namespace, err))
				return
			}
			if err := (capacity.Ledger{Kube: gc.Kube, Namespace: g.Namespace, Group: g.Name}).Delete(ctx); err != nil {
				resp.Diagnostics.AddError("Deleting Forks Ledger Failed", fmt.Sprintf("Deleting ConfigMap %s/%s on %s: %v.",
					g.Namespace, capacity.LedgerName(g.Name), gc.Config.Host, err))
				return
			}
		}
	}
	c, err := r.data.clients()
	if err != nil {
		resp.Diagnostics.AddError("Kubernetes Connection Unavailable", err.Error())
		return
	}
	err = c.Kube.CoreV1().ConfigMaps(r.data.catalogNamespace).Delete(ctx, g.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		resp.Diagnostics.AddError("Deleting Container Group Failed", fmt.Sprintf("Deleting ConfigMap %s/%s: %v.", r.data.catalogNamespace, g.Name, err))
	}
}

func (r *containerGroupResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
}
