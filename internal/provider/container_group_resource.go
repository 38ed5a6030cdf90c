// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
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

	"github.com/kubeplay/terraform-provider-kubeplay/internal/capacity"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/groupside"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podsecurity"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/warmpool"
)

var (
	_ resource.Resource                   = (*containerGroupResource)(nil)
	_ resource.ResourceWithConfigure      = (*containerGroupResource)(nil)
	_ resource.ResourceWithImportState    = (*containerGroupResource)(nil)
	_ resource.ResourceWithIdentity       = (*containerGroupResource)(nil)
	_ resource.ResourceWithValidateConfig = (*containerGroupResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*containerGroupResource)(nil)
)

const (
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
	DisconnectGracePeriod      types.String `tfsdk:"disconnect_grace_period"`
	LaunchRetries              types.Int64  `tfsdk:"launch_retries"`
	Priority                   types.Int64  `tfsdk:"priority"`
	Labels                     types.Map    `tfsdk:"labels"`
	Annotations                types.Map    `tfsdk:"annotations"`
	PodSecurityLevel           types.String `tfsdk:"pod_security_level"`
	RenderedPod                types.String `tfsdk:"rendered_pod"`
	WarmPods                   types.Int64  `tfsdk:"warm_pods"`
	WarmLabels                 types.Map    `tfsdk:"warm_labels"`
	WarmRevision               types.String `tfsdk:"warm_revision"`
	WarmPodsReady              types.Int64  `tfsdk:"warm_pods_ready"`
	WarmPodsStarting           types.Int64  `tfsdk:"warm_pods_starting"`
	OwnerID                    types.String `tfsdk:"owner_id"`
	DefaultPlanCheck           types.String `tfsdk:"default_plan_check"`
}

func (r *containerGroupResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_container_group"
}

const containerGroupDescription = "A container group says where runs execute and what their pods look like: AWX's container group and " +
	"Nodepool's kubernetes pool in one. It is stored as a ConfigMap in the provider's " +
	"`catalog_namespace`, so other workspaces can use it by name.\n\n**Run pod.** Every run starts from a " +
	"default pod: one container named `worker` running `image` with args `sleep infinity` (the run execs " +
	"into it), `restartPolicy: Never`, `automountServiceAccountToken: false`, requests of 250m CPU and " +
	"100Mi memory, and an `emptyDir` `kubeplay-tmp` at `/tmp` (`sizeLimit` 1Gi) where runs unpack and " +
	"keep their output. `pod_spec_override` is merged over it with a strategic merge patch, so containers " +
	"merge by name, and `worker` stays the first container; `rendered_pod` shows the result at plan time. " +
	"The worker ends its pod after `disconnect_grace_period` without the provider, or when no run started " +
	"within 45 seconds.\n\n**Capacity** is enforced on the cluster, so every Terraform process shares one " +
	"limit. `max_concurrent_runs`, `max_cores`, `max_ram` and `max_resources` become a ResourceQuota " +
	"`kubeplay-<name>` in `namespace`; a run pod beyond it waits, watching the quota, up to " +
	"`pod_pending_timeout`. A namespace shared with another group or other workloads is a plan-time " +
	"warning.\n\n**Node capacity.** " + nodeCapacityDescription + "\n\n**Claims.** Before it creates its pod, a run claims capacity in ledgers, ConfigMaps in " +
	"`namespace`: `kubeplay-runs-<name>` for `max_concurrent_runs` and `kubeplay-forks-<name>` for its " +
	"`forks` of `max_forks`. With no room, it watches the ledger up to `pod_pending_timeout`, then fails " +
	"without a pod. A claim lasts 30 seconds and the live run renews it every 10, so a killed provider's " +
	"claim expires within 30 seconds (the clocks of the machines that run Terraform must agree to within " +
	"some seconds). A run that asks for more forks than `max_forks` fails at once.\n\n**Scheduling.** " + schedulingDescription + "\n\n" +
	"**Warm pods.** " + warmPodsDescription + "\n\n" +
	"**Pod security.** " + podSecurityLevelDescription + "\n\n" +
	"Changing `name`, `credential`, `namespace` or `manage_namespace` replaces the group."

// schedulingDescription is the paragraph of the group's description that
// says which scheduling failures a run waits out; pod_pending_timeout
// refers to it. Its 20 seconds are runner.AutoscalerGrace (checked by
// TestSchedulingDescription).
const schedulingDescription = "A run pod the scheduler cannot place yet (no room for now, a preemption, anti-affinity) " +
	"waits within `pod_pending_timeout` (then `capacity_timeout`). One that no node could ever hold waits for up to 20 " +
	"seconds for a cluster autoscaler to add a node, and otherwise ends as `unschedulable`; node lifecycle taints are " +
	"waited out. The `schedule` step of `timeline` says what the pod waited for."

// maxWarmPods bounds one pool: more would be a deployment, not a pool.
const maxWarmPods = 100

// warmPodsDescription and podSecurityLevelDescription are paragraphs of the
// group's description, which warm_pods and pod_security_level refer to.
const warmPodsDescription = "`warm_pods` and `warm_labels` keep pods started ahead of the runs that will use them. A run whose " +
	"pod matches a ready warm pod claims it (two runs never share one), runs in it at once and deletes it " +
	"afterwards; the pool is refilled as soon as a pod is claimed. A run that finds the pool starting " +
	"waits for the first ready pod; one that finds it empty starts its own. The `pods` limit of " +
	"`max_concurrent_runs` grows by `warm_pods`, while `max_cores`, `max_ram` and `max_resources` count " +
	"warm pods as run pods. A warm pod has a deadline of 24 hours (a claim lowers it to the run's " +
	"timeout), so an abandoned pool ends by itself. Destroying the group deletes its warm pods."

const podSecurityLevelDescription = "`pod_security_level` is checked at plan time with the API server's PodSecurity " +
	"checks (`k8s.io/pod-security-admission`) against `rendered_pod` and each run's pod: the group's pod at the newest " +
	"policy version this provider knows and, when its cluster can be reached, at the API server's own version; a run's " +
	"pod at its API server's version, or the newest when that cannot be read. With `manage_namespace = true` the " +
	"namespace is also labelled `pod-security.kubernetes.io/enforce=<level>`. The default run pod passes `baseline`; " +
	"`restricted` needs a `pod_spec_override` with `runAsNonRoot`, a non-zero `runAsUser`, " +
	"`allowPrivilegeEscalation: false`, `capabilities: {drop: [ALL]}` and `seccompProfile: {type: RuntimeDefault}` " +
	"(any UID and a read-only root file system work)."

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
				MarkdownDescription: "Whether the group creates `namespace`, which must not exist yet, and deletes it with everything in " +
					"it. Defaults to `false`.",
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
				MarkdownDescription: "A Pod, or a bare PodSpec, as YAML or JSON, as AWX users write it, merged over the default pod with a " +
					"strategic merge patch (see Run pod under How It Works); `$patch: replace` replaces a list. " +
					"`metadata.name` is refused, and `metadata.namespace` must equal `namespace`.",
				Optional:   true,
				Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
			},
			"max_concurrent_runs": schema.Int64Attribute{
				MarkdownDescription: "The most run pods that may exist at once in `namespace` (AWX's `max_concurrent_jobs`, Nodepool's " +
					"`max-servers`): the quota's `pods` and the runs ledger (see Capacity and Claims under How It Works). " +
					"At least 1; unset is unlimited.",
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
					"`max_forks`), also across Terraform processes: see Claims in the `kubeplay_container_group` resource's description. At least 1; unset is " +
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
				MarkdownDescription: "The CPU limit of node labels that set no `cpu_limit`; limits fall back as in Nodepool.",
				Optional:            true,
				Validators:          []validator.String{k8sQuantity()},
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
				MarkdownDescription: "How long a run waits for its pod to start, as a duration: for the quota, then for the scheduler " +
					"while that can pass (see Scheduling under How It Works). Defaults to `5m`.",
				Optional:   true,
				Computed:   true,
				Default:    stringdefault.StaticString("5m"),
				Validators: []validator.String{groupDuration()},
			},
			"disconnect_grace_period": schema.StringAttribute{
				MarkdownDescription: "How long a run goes on in its pod without hearing from the provider, as a duration from `10s` to " +
					"`1h`. A cut up to this period less 5 seconds is always survived; past it, the pod ends the playbook " +
					"and, but on a held node, itself (see [When a connection " +
					"breaks](../guides/live-output-and-debugging.md#when-a-connection-breaks)). Defaults to `30s`.",
				Optional:   true,
				Computed:   true,
				Default:    stringdefault.StaticString(defaultDisconnectGrace),
				Validators: []validator.String{graceDuration()},
			},
			"launch_retries": schema.Int64Attribute{
				MarkdownDescription: "How many times a run launches a fresh pod when its launch fails for a reason that can pass " +
					"(Nodepool's `launch-retries`): the [status reasons](run.md#status-reasons) marked retried. `0` turns " +
					"retries off. Defaults to `3`.",
				Optional:   true,
				Computed:   true,
				Default:    int64default.StaticInt64(3),
				Validators: []validator.Int64{int64validator.AtLeast(0)},
			},
			"priority": schema.Int64Attribute{
				MarkdownDescription: "The group's priority, a lesser number being a higher priority (Nodepool's pool `priority`). A run's " +
					"`container_groups` are tried by priority, then in the list's order; unset counts as `0`.",
				Optional: true,
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
			"pod_security_level": schema.StringAttribute{
				MarkdownDescription: "The Kubernetes [Pod Security " +
					"Standard](https://kubernetes.io/docs/concepts/security/pod-security-standards/) level that every run " +
					"pod of the group must meet, checked at plan and, with `manage_namespace = true`, enforced by the API " +
					"server: `privileged` (no checks), `baseline` or `restricted` (see Pod security under How It Works). " +
					"Defaults to `baseline`.",
				Optional:   true,
				Computed:   true,
				Default:    stringdefault.StaticString(podsecurity.Default),
				Validators: []validator.String{stringvalidator.OneOf(podsecurity.Levels...)},
			},
			"owner_id": schema.StringAttribute{
				MarkdownDescription: "A random id that kubeplay gives the group, which its namespace, ResourceQuota and ledgers carry " +
					"(`kubeplay.io/owner-id`), so that another group of the same name is refused at plan.",
				Computed:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"rendered_pod": schema.StringAttribute{
				MarkdownDescription: "The group's default run pod as YAML, after `image`, `labels`, `annotations` and " +
					"`pod_spec_override`; known at plan time when they are. Each run adds its name, labels and node label.",
				Computed: true,
			},
			"warm_pods": schema.Int64Attribute{
				MarkdownDescription: "How many pods of the group's own run pod the group keeps ready ahead of runs, as Nodepool's " +
					"`min-ready` (see Warm pods under How It Works). Defaults to `0`.",
				Optional:   true,
				Computed:   true,
				Default:    int64default.StaticInt64(0),
				Validators: []validator.Int64{int64validator.Between(0, maxWarmPods)},
			},
			"warm_labels": schema.MapAttribute{
				MarkdownDescription: "Warm pods of node labels: how many pods of each `kubeplay_node_label` (of type `pod`) the group " +
					"keeps ready, as Nodepool's `min-ready` of a label.",
				Optional:    true,
				ElementType: types.Int64Type,
				Validators: []validator.Map{
					mapvalidator.KeysAre(dnsLabel()),
					mapvalidator.ValueInt64sAre(int64validator.Between(0, maxWarmPods)),
				},
			},
			"warm_revision": schema.StringAttribute{
				MarkdownDescription: "A hash of the pod specs the group's warm pods are started from, its own and its `warm_labels`'. When " +
					"it changes, the apply replaces the warm pods. Empty without warm pods.",
				Computed: true,
			},
			"warm_pods_ready": schema.Int64Attribute{
				MarkdownDescription: "How many of the group's warm pods, of its own pod and of its labels, were ready to be " +
					"claimed when the state was last refreshed.",
				Computed: true,
			},
			"warm_pods_starting": schema.Int64Attribute{
				MarkdownDescription: "How many of the group's warm pods were still starting when the state was last refreshed.",
				Computed:            true,
			},
			"default_plan_check": schema.StringAttribute{
				MarkdownDescription: "The `plan_check` of the group's runs that set none: `off`, `changes` or `drift`. It applies only in " +
					"workspaces whose provider sets `group_default_plan_checks = true`. See [Checking At " +
					"Plan](run.md#checking-at-plan). Defaults to `off`.",
				Optional:   true,
				Computed:   true,
				Default:    stringdefault.StaticString(planCheckOff),
				Validators: []validator.String{stringvalidator.OneOf(planCheckModes...)},
			},
		},
	}
}

func (r *containerGroupResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = nameIdentitySchema("container group")
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
	if err == nil {
		err = podspec.ValidateOverride(m.PodSpecOverride.ValueString())
	}
	if err != nil {
		addOverrideError(err, &resp.Diagnostics)
		return
	}
	if ns != "" && !m.Namespace.IsNull() && !m.Namespace.IsUnknown() && ns != m.Namespace.ValueString() {
		resp.Diagnostics.AddAttributeError(path.Root("pod_spec_override"), "Conflicting Namespaces",
			fmt.Sprintf("pod_spec_override sets metadata.namespace %q but namespace is %q. Remove one of them, or make "+
				"them equal.", ns, m.Namespace.ValueString()))
		return
	}
	if _, err := podsecurity.Level(m.PodSecurityLevel.ValueString()); err == nil && !m.PodSecurityLevel.IsUnknown() && !m.Image.IsUnknown() {
		// The level's checks look at the spec: the override and the image
		// are enough to tell before the plan.
		renderGroupPod(catalog.Group{Name: m.Name.ValueString(), Namespace: ns, Image: m.Image.ValueString(),
			PodSpecOverride: m.PodSpecOverride.ValueString(), PodSecurityLevel: m.PodSecurityLevel.ValueString()}, &resp.Diagnostics)
	}
}

// addOverrideError reports a pod_spec_override that cannot make a run pod.
func addOverrideError(err error, diags *diag.Diagnostics) {
	var rl *podspec.ReservedLabelError
	switch {
	case errors.Is(err, podspec.ErrNoContainers):
		diags.AddAttributeError(path.Root("pod_spec_override"), "Pod Spec Override Removes Every Container",
			"The pod that pod_spec_override leaves has no container, and a run executes in the pod's first container: "+
				err.Error()+". Keep at least one container (by default \"worker\"), and do not set containers to null "+
				"or replace them with an empty list.")
	case errors.As(err, &rl):
		attr := "pod_spec_override"
		if rl.Input == podspec.InputGroupLabels {
			attr = "labels"
		}
		diags.AddAttributeError(path.Root(attr), "Run Pod Labels Reserved By Kubeplay",
			err.Error()+". kubeplay finds, counts and cleans up its run pods by these labels: remove the label, or "+
				"use another key.")
	default:
		diags.AddAttributeError(path.Root("pod_spec_override"), "Invalid Pod Spec Override",
			"pod_spec_override must be a Pod or a PodSpec as YAML or JSON: "+err.Error()+".")
	}
}

// podInputsKnown: every input that shapes the group's run pods is known,
// so that a run's pod renders at plan whatever else (the credential, the
// limits) is known only at apply.
func podInputsKnown(m containerGroupModel) bool {
	for _, v := range []attr.Value{m.Name, m.Namespace, m.Image, m.PodSpecOverride, m.Labels, m.Annotations, m.PodSecurityLevel,
		m.DefaultLabelCPU, m.DefaultLabelCPULimit, m.DefaultLabelMemory, m.DefaultLabelMemoryLimit,
		m.DefaultLabelStorage, m.DefaultLabelStorageLimit, m.DefaultLabelExtraResources} {
		if v.IsUnknown() {
			return false
		}
	}
	return true
}

// specFromGroupModel builds the stored form; ok is false while inputs are
// unknown, when the group holds what podInputsKnown allows it to.
func specFromGroupModel(ctx context.Context, m containerGroupModel, diags *diag.Diagnostics) (catalog.Group, bool) {
	if !podInputsKnown(m) {
		return catalog.Group{}, false
	}
	known := !m.Credential.IsUnknown() && !m.MaxCores.IsUnknown() && !m.MaxResources.IsUnknown() &&
		!m.PodPendingTimeout.IsUnknown() && !m.DisconnectGracePeriod.IsUnknown() && !m.MaxConcurrentRuns.IsUnknown() && !m.MaxRAM.IsUnknown() &&
		!m.MaxForks.IsUnknown() && !m.LaunchRetries.IsUnknown() && !m.Priority.IsUnknown()
	return catalog.Group{
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
		PodPendingTimeout:     m.PodPendingTimeout.ValueString(),
		DisconnectGracePeriod: m.DisconnectGracePeriod.ValueString(),
		LaunchRetries:         m.LaunchRetries.ValueInt64(),
		Priority:              ptrInt64(m.Priority),
		Labels:                goStringMap(ctx, m.Labels, diags),
		Annotations:           goStringMap(ctx, m.Annotations, diags),
		PodSecurityLevel:      m.PodSecurityLevel.ValueString(),
		WarmPods:              m.WarmPods.ValueInt64(),
		WarmLabels:            goInt64Map(ctx, m.WarmLabels, diags),
		OwnerID:               m.OwnerID.ValueString(),
		DefaultPlanCheck:      m.DefaultPlanCheck.ValueString(),
	}, known && !m.DefaultPlanCheck.IsUnknown() && !m.WarmPods.IsUnknown() && !m.WarmLabels.IsUnknown()
}

// fillGroup sets the model from a stored group and its rendered pod.
func fillGroup(ctx context.Context, g catalog.Group, m *containerGroupModel, rendered string, diags *diag.Diagnostics) {
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
	m.DisconnectGracePeriod = types.StringValue(cmp.Or(g.DisconnectGracePeriod, defaultDisconnectGrace))
	m.LaunchRetries = types.Int64Value(g.LaunchRetries)
	m.Priority = nullableInt64(g.Priority)
	m.Labels = nullableStringMap(ctx, g.Labels, diags)
	m.Annotations = nullableStringMap(ctx, g.Annotations, diags)
	if level, err := podsecurity.Level(g.PodSecurityLevel); err == nil {
		m.PodSecurityLevel = types.StringValue(level)
	} else {
		m.PodSecurityLevel = types.StringValue(g.PodSecurityLevel) // a plan refuses it
	}
	m.RenderedPod = types.StringValue(rendered)
	m.OwnerID = stringOrNull(g.OwnerID)
	m.WarmPods = types.Int64Value(g.WarmPods)
	m.WarmLabels = nullableInt64Map(ctx, g.WarmLabels, diags)
	m.DefaultPlanCheck = types.StringValue(cmp.Or(g.DefaultPlanCheck, planCheckOff))
	if m.WarmPodsReady.IsUnknown() || m.WarmPodsReady.IsNull() {
		m.WarmPodsReady, m.WarmPodsStarting = types.Int64Value(0), types.Int64Value(0)
	}
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
	if plan.ID.IsUnknown() && !plan.Name.IsUnknown() {
		plan.ID = plan.Name // so that references to id are known at plan, as name is
	}
	if !req.State.Raw.IsNull() && state.OwnerID.IsNull() {
		plan.OwnerID = types.StringUnknown() // a group from before owner ids gets one
	}
	plan.RenderedPod = types.StringUnknown()
	spec, known := specFromGroupModel(ctx, plan, &resp.Diagnostics)
	podKnown := podInputsKnown(plan)
	plan.WarmRevision = types.StringUnknown()
	if podKnown && !plan.WarmPods.IsUnknown() && !plan.WarmLabels.IsUnknown() {
		plan.WarmRevision = r.warmRevision(ctx, spec, true)
	}
	var rendered string
	if podKnown {
		y, ok := renderGroupPod(spec, &resp.Diagnostics)
		if !ok {
			return
		}
		plan.RenderedPod, rendered = types.StringValue(y), y
	}
	if planDrift(ctx, req, &resp.Diagnostics, catalog.KindGroup, plan.Name.ValueString()) {
		plan.RenderedPod = types.StringUnknown() // forces an update
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
	if !req.State.Raw.IsNull() && !resp.Plan.Raw.Equal(req.State.Raw) {
		// An update fills and counts the pools again; the framework leaves
		// them known when only this function changed the plan.
		plan.WarmPodsReady, plan.WarmPodsStarting = types.Int64Unknown(), types.Int64Unknown()
		resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
	}
	changing := req.State.Raw.IsNull() || !resp.Plan.Raw.Equal(req.State.Raw)
	if r.data != nil && !plan.Name.IsUnknown() {
		switch {
		case known:
			r.data.plannedGroups.put(plan.Name.ValueString(), &spec, changing)
		case podKnown:
			// Runs render their pods from it, but cannot reach its cluster yet.
			r.data.plannedGroups.putPartial(plan.Name.ValueString(), &spec, changing)
		default:
			r.data.plannedGroups.put(plan.Name.ValueString(), nil, changing)
		}
	}
	// A group that does not change writes nothing to its cluster, and each
	// run planned in it dry-runs its pod there: the cluster's checks, five
	// requests, are for groups that change (as warnCapacity's below).
	if known && changing && !spec.Limits().Empty() {
		r.warnShared(ctx, spec, &resp.Diagnostics)
	}
	if known && changing {
		r.checkOnCluster(ctx, spec, req.State.Raw.IsNull(), state.OwnerID, &resp.Diagnostics)
	}
	if known && capacityChanged(req.State.Raw.IsNull(), state, plan, rendered) {
		r.warnCapacity(ctx, spec, &resp.Diagnostics)
	}
}

// renderGroupPod renders the group's default run pod as YAML and holds it
// to the group's pod security level.
func renderGroupPod(g catalog.Group, diags *diag.Diagnostics) (string, bool) {
	pod, err := podspec.RenderGroup(g.PodGroup())
	var y string
	if err == nil {
		y, err = podspec.ToYAML(pod)
	}
	if err != nil {
		addOverrideError(err, diags)
		return "", false
	}
	if err := podsecurity.Check(g.PodSecurityLevel, pod); err != nil {
		addGroupPodSecurityError(g, err, diags)
		return "", false
	}
	return y, true
}

// addGroupPodSecurityError reports a default run pod below the group's
// level: at pod_spec_override when the pod passes without it, else at
// pod_security_level.
func addGroupPodSecurityError(g catalog.Group, err error, diags *diag.Diagnostics) {
	var ve *podsecurity.ViolationError
	if !errors.As(err, &ve) {
		diags.AddAttributeError(path.Root("pod_security_level"), "Invalid Pod Security Level",
			fmt.Sprintf("%v. Set one of %s.", err, strings.Join(podsecurity.Levels, ", ")))
		return
	}
	bare := g
	bare.PodSpecOverride = ""
	if pod, err := podspec.RenderGroup(bare.PodGroup()); g.PodSpecOverride != "" && err == nil &&
		podsecurity.Check(g.PodSecurityLevel, pod) == nil {
		diags.AddAttributeError(path.Root("pod_spec_override"), "Run Pod Below Pod Security Level",
			fmt.Sprintf("With pod_spec_override, the run pod of container group %q %s\nRemove what the checks name from "+
				"pod_spec_override, or lower pod_security_level.", g.Name, violationList(ve)))
		return
	}
	diags.AddAttributeError(path.Root("pod_security_level"), "Run Pod Below Pod Security Level",
		fmt.Sprintf("The run pod of container group %q %s\nMake pod_spec_override (and the image) meet level %q, or "+
			"lower pod_security_level; the default pod meets %q.", g.Name, violationList(ve), ve.Level, podsecurity.Default))
}

// violationList words a pod security failure with each failed check on a
// line of its own: the library's forbidden reason, then its detail. The
// last line ends without a newline.
func violationList(ve *podsecurity.ViolationError) string {
	var b strings.Builder
	fmt.Fprintf(&b, "violates PodSecurity %q. Failed checks:", ve.Level+":latest")
	for _, v := range ve.Violations {
		b.WriteString("\n  - " + v.Reason)
		if v.Detail != "" {
			b.WriteString(": " + v.Detail)
		}
	}
	return b.String()
}

// sideSpec is what the group's cluster must hold for it.
func sideSpec(g catalog.Group) groupside.Spec {
	return groupside.Spec{Name: g.Name, Namespace: g.Namespace, ManageNamespace: g.ManageNamespace,
		Limits: g.Limits(), MaxForks: g.MaxForks, PodSecurityLevel: g.PodSecurityLevel,
		Owner: managed.Owner{ID: g.OwnerID, Kind: groupOwnerKind, Name: g.Name}}
}

// warnShared warns when the group's namespace holds another group or other
// workloads, which its quota would also limit. It says nothing when the
// cluster cannot be reached at plan time.
func (r *containerGroupResource) warnShared(ctx context.Context, g catalog.Group, diags *diag.Diagnostics) {
	if r.data == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, groupPlanCheckTimeout)
	defer cancel()
	store, err := r.data.catalog()
	if err != nil {
		return
	}
	gc, err := r.data.credentialClients(ctx, g.Credential)
	if err != nil {
		tflog.Debug(ctx, "skipping the shared-namespace check", map[string]any{"error": err.Error()})
		return
	}
	// Groups of the same credential run on the same cluster.
	var others []groupside.Spec
	if list, err := store.ListGroups(ctx); err == nil {
		for _, e := range list {
			if e.Value.Credential == g.Credential {
				others = append(others, sideSpec(e.Value))
			}
		}
	}
	users, err := groupside.Sharing(ctx, gc.Kube, sideSpec(g), others)
	if err != nil {
		tflog.Debug(ctx, "skipping the shared-namespace check", map[string]any{"error": err.Error()})
	}
	if len(users) > 0 {
		diags.AddAttributeWarning(path.Root("namespace"), "Namespace Is Shared",
			fmt.Sprintf("Namespace %q also holds %s. The group's ResourceQuota covers the whole namespace, so they count "+
				"against the group's capacity and the quota limits them too. Give the group a namespace of its own "+
				"(manage_namespace = true).", g.Namespace, strings.Join(users, "; ")))
	}
}

func (r *containerGroupResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	defer r.data.writingDefinitions()()
	r.write(ctx, req.Plan.Get, true, &resp.State, &resp.Diagnostics)
	setIdentity(ctx, resp.Identity, &resp.Diagnostics, resp.State)
}

func (r *containerGroupResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	defer r.data.writingDefinitions()()
	r.write(ctx, req.Plan.Get, false, &resp.State, &resp.Diagnostics)
	setIdentity(ctx, resp.Identity, &resp.Diagnostics, resp.State)
	resp.Diagnostics.Append(recordDrift(ctx, resp.Private)...)
}

// write ensures the namespace, the quota and the ledgers on the run
// cluster, then stores the group in the catalog.
func (r *containerGroupResource) write(ctx context.Context, getPlan getter, create bool, state stateSetter, diags *diag.Diagnostics) {
	var plan containerGroupModel
	diags.Append(getPlan(ctx, &plan)...)
	if diags.HasError() {
		return
	}
	g, _ := specFromGroupModel(ctx, plan, diags)
	if _, ok := renderGroupPod(g, diags); !ok {
		return
	}
	store := r.data.catalogWriter(ctx, diags)
	if store == nil {
		return
	}
	mode := catalog.CreateOrUpdate
	if create {
		if err := store.CheckAbsent(ctx, catalog.KindGroup, g.Name); err != nil {
			addCatalogError(diags, err)
			return
		}
		mode = catalog.NewOnly
	}
	gc, err := r.data.credentialClients(ctx, g.Credential)
	if err != nil {
		addCredentialUnavailable(diags, g.Name, g.Credential, err)
		return
	}
	side, ok := r.assignOwner(ctx, store, gc.Kube, &g, create, diags)
	if !ok {
		return
	}
	outcome, err := groupside.Ensure(ctx, gc.Kube, side)
	if err != nil {
		addGroupSideError(diags, g, gc.Config.Host, err)
		return
	}
	switch outcome {
	case groupside.PodsOnly:
		tflog.Debug(ctx, "the group's credential may not read its namespace; it manages pods only", map[string]any{"namespace": g.Namespace})
	case groupside.NamespaceAbsent:
		diags.AddAttributeWarning(path.Root("namespace"), "Namespace Not Found",
			fmt.Sprintf("Namespace %q does not exist on %s yet; runs of container group %q fail until it does.",
				g.Namespace, gc.Config.Host, g.Name))
	}
	pools := r.warmTemplates(ctx, g, diags)
	if diags.HasError() {
		return
	}
	e, err := store.PutGroup(ctx, g, mode)
	if err != nil {
		addCatalogError(diags, err)
		return
	}
	fillWarm(ctx, r.data, gc.Kube, g, pools, diags)
	fillGroup(ctx, e.Value, &plan, e.Rendered, diags)
	plan.WarmRevision = r.warmRevision(ctx, g, false)
	plan.WarmPodsReady, plan.WarmPodsStarting = warmCounts(ctx, r.data, g)
	diags.Append(state.Set(ctx, &plan)...)
}

// addGroupSideError reports a failure on the group's cluster at the
// attribute that asked for what failed.
func addGroupSideError(diags *diag.Diagnostics, g catalog.Group, host string, err error) {
	var (
		exists  *groupside.NamespaceExistsError
		missing *groupside.NamespaceMissingError
		nsErr   *groupside.NamespaceError
		quota   *groupside.QuotaError
		ledger  *groupside.LedgerError
		other   *managed.OwnedByOtherError
	)
	switch {
	case errors.As(err, &other):
		addOwnedByOtherError(diags, g, host, other)
	case errors.As(err, &exists):
		diags.AddAttributeError(path.Root("manage_namespace"), "Namespace Already Exists",
			fmt.Sprintf("Namespace %q already exists on %s and was not created by container group %q; a managed namespace "+
				"is deleted with the group, so kubeplay does not adopt it. Set manage_namespace = false, or choose a new namespace.",
				g.Namespace, host, g.Name))
	case errors.As(err, &missing):
		diags.AddAttributeError(path.Root("namespace"), "Namespace Not Found",
			fmt.Sprintf("Namespace %q does not exist on %s, and the group's quota and forks ledger live there. Create it, "+
				"or set manage_namespace = true.", g.Namespace, host))
	case errors.As(err, &nsErr) && nsErr.Op == groupside.OpDelete:
		diags.AddError("Deleting Namespace Failed", fmt.Sprintf("Deleting namespace %q on %s: %v. A namespace "+
			"that stays Terminating has a finalizer that has not finished: see `kubectl get namespace %s -o yaml`.",
			g.Namespace, host, nsErr.Err, g.Namespace))
	case errors.As(err, &nsErr) && nsErr.Op == groupside.OpWrite:
		diags.AddAttributeError(path.Root("pod_security_level"), "Labelling Namespace Failed",
			fmt.Sprintf("Setting the pod security labels of namespace %q on %s: %v. The group's credential needs to "+
				"patch namespaces.", g.Namespace, host, nsErr.Err))
	case errors.As(err, &nsErr) && nsErr.Op == groupside.OpCreate:
		diags.AddAttributeError(path.Root("namespace"), "Creating Namespace Failed",
			fmt.Sprintf("Creating namespace %q on %s: %v.", g.Namespace, host, nsErr.Err))
	case errors.As(err, &nsErr):
		diags.AddAttributeError(path.Root("namespace"), "Reading Namespace Failed",
			fmt.Sprintf("Reading namespace %q on %s: %v. Check that the cluster is reachable and that the credential may "+
				"read namespaces.", g.Namespace, host, nsErr.Err))
	case errors.As(err, &quota) && quota.Op == groupside.OpDelete:
		diags.AddError("Deleting Quota Failed", fmt.Sprintf("Deleting ResourceQuota %s/%s on %s: %v.",
			quota.Namespace, quota.Name, host, quota.Err))
	case errors.As(err, &quota):
		diags.AddAttributeError(path.Root("max_concurrent_runs"), "Writing Quota Failed",
			fmt.Sprintf("Setting ResourceQuota %s/%s on %s: %v.", quota.Namespace, quota.Name, host, quota.Err))
	case errors.As(err, &ledger):
		addLedgerError(diags, host, ledger)
	default:
		diags.AddError("Container Group Provisioning Failed", fmt.Sprintf("Container group %q on %s: %v.", g.Name, host, err))
	}
}

func addLedgerError(diags *diag.Diagnostics, host string, e *groupside.LedgerError) {
	title, attr := "Forks Ledger", path.Root("max_forks")
	if e.Kind == capacity.Runs {
		title, attr = "Runs Ledger", path.Root("max_concurrent_runs")
	}
	if e.Op == groupside.OpDelete {
		diags.AddError("Deleting "+title+" Failed", fmt.Sprintf("Deleting ConfigMap %s/%s on %s: %v.", e.Namespace, e.Name, host, e.Err))
		return
	}
	diags.AddAttributeError(attr, "Writing "+title+" Failed",
		fmt.Sprintf("Setting ConfigMap %s/%s on %s: %v.", e.Namespace, e.Name, host, e.Err))
}

func (r *containerGroupResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	defer setReadIdentity(ctx, req, resp)
	var state containerGroupModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := state.Name.ValueString()
	e, ok := readForResource(ctx, r.data, catalog.KindGroup, name, (*catalog.Store).GetGroup, resp)
	if !ok {
		return
	}
	resp.Diagnostics.Append(recordDrift(ctx, resp.Private, e.Drift, r.runSideDrift(ctx, e.Value))...)
	fillGroup(ctx, e.Value, &state, e.Rendered, &resp.Diagnostics)
	state.WarmRevision = r.warmRevision(ctx, e.Value, false)
	state.WarmPodsReady, state.WarmPodsStarting = warmCounts(ctx, r.data, e.Value)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// runSideDrift names what the group needs on its cluster and is missing;
// "" when all is there or it cannot tell.
func (r *containerGroupResource) runSideDrift(ctx context.Context, g catalog.Group) string {
	gc, err := r.data.credentialClients(ctx, g.Credential)
	if err != nil {
		return ""
	}
	missing := groupside.Missing(ctx, gc.Kube, sideSpec(g))
	if len(missing) == 0 {
		return ""
	}
	return strings.Join(missing, ", ") + " is gone"
}

func (r *containerGroupResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	defer r.data.writingDefinitions()()
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
	if gc, err := r.data.credentialClients(ctx, g.Credential); err != nil {
		// The credential may be destroyed in the same apply: nothing left to reach.
		resp.Diagnostics.AddWarning("Container Group Cluster Unavailable",
			fmt.Sprintf("Container group %q: %v. Its quota and ledger in namespace %q were not removed; delete them by hand "+
				"if the cluster still exists.", g.Name, err, g.Namespace))
	} else {
		if err := drainWarm(ctx, r.data, gc.Kube, g, &resp.Diagnostics); err != nil {
			// As with an unreachable cluster: the destroy goes on, and says what is left.
			resp.Diagnostics.AddWarning("Warm Pods Not Deleted", fmt.Sprintf("Container group %q: deleting its warm "+
				"pods failed: %v. They end by themselves within 24 hours (their activeDeadlineSeconds); to delete them "+
				"now: kubectl delete pods -n %s -l '%s'", g.Name, err, g.Namespace, warmpool.GroupSelector(g.Name)))
		}
		if err := groupside.Remove(ctx, gc.Kube, sideSpec(g)); err != nil {
			addGroupSideError(&resp.Diagnostics, g, gc.Config.Host, err)
			return
		}
	}
	store := r.data.catalogReader(&resp.Diagnostics)
	if store == nil {
		return
	}
	if err := store.DeleteGroup(ctx, g.Name); err != nil {
		addCatalogError(&resp.Diagnostics, err)
	}
}

func (r *containerGroupResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importByName(ctx, req, resp)
}
