// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podsecurity"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
)

var (
	_ resource.Resource                   = (*nodeLabelResource)(nil)
	_ resource.ResourceWithConfigure      = (*nodeLabelResource)(nil)
	_ resource.ResourceWithImportState    = (*nodeLabelResource)(nil)
	_ resource.ResourceWithIdentity       = (*nodeLabelResource)(nil)
	_ resource.ResourceWithValidateConfig = (*nodeLabelResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*nodeLabelResource)(nil)
)

type nodeLabelResource struct {
	data *providerData
}

func newNodeLabelResource() resource.Resource { return &nodeLabelResource{} }

type nodeLabelModel struct {
	ID               types.String `tfsdk:"id"`
	Name             types.String `tfsdk:"name"`
	Type             types.String `tfsdk:"type"`
	Image            types.String `tfsdk:"image"`
	ImagePullPolicy  types.String `tfsdk:"image_pull_policy"`
	CPU              types.String `tfsdk:"cpu"`
	Memory           types.Int64  `tfsdk:"memory"`
	Storage          types.Int64  `tfsdk:"storage"`
	CPULimit         types.String `tfsdk:"cpu_limit"`
	MemoryLimit      types.Int64  `tfsdk:"memory_limit"`
	StorageLimit     types.Int64  `tfsdk:"storage_limit"`
	GPU              types.String `tfsdk:"gpu"`
	GPUResource      types.String `tfsdk:"gpu_resource"`
	ExtraResources   types.Map    `tfsdk:"extra_resources"`
	Env              types.List   `tfsdk:"env"`
	NodeSelector     types.Map    `tfsdk:"node_selector"`
	SchedulerName    types.String `tfsdk:"scheduler_name"`
	Privileged       types.Bool   `tfsdk:"privileged"`
	Volumes          types.String `tfsdk:"volumes"`
	VolumeMounts     types.String `tfsdk:"volume_mounts"`
	Labels           types.Map    `tfsdk:"labels"`
	DynamicLabels    types.Map    `tfsdk:"dynamic_labels"`
	Annotations      types.Map    `tfsdk:"annotations"`
	PythonPath       types.String `tfsdk:"python_path"`
	ShellType        types.String `tfsdk:"shell_type"`
	Spec             types.String `tfsdk:"spec"`
	RenderedTemplate types.String `tfsdk:"rendered_template"`
}

type envModel struct {
	Name  types.String `tfsdk:"name"`
	Value types.String `tfsdk:"value"`
}

var envAttrTypes = map[string]attr.Type{"name": types.StringType, "value": types.StringType}

// podAttributes are the attributes that shape a pod: a namespace label has
// none, and a label with spec only name, type, labels, dynamic_labels and
// annotations.
var podAttributes = []string{"image", "image_pull_policy", "cpu", "memory", "storage", "cpu_limit", "memory_limit",
	"storage_limit", "gpu", "gpu_resource", "extra_resources", "env", "node_selector", "scheduler_name", "privileged",
	"volumes", "volume_mounts", "python_path", "shell_type"}

func (r *nodeLabelResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_node_label"
}

var resourceNameRE = regexp.MustCompile(`^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)

func (r *nodeLabelResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	forPod := func(s string) string { return s + " Only for `type = \"pod\"`, and not with `spec`." }
	resp.Schema = schema.Schema{
		MarkdownDescription: "A node label says what a run's pod looks like, as a Nodepool label does. It is stored as a " +
			"PodTemplate in the provider's `catalog_namespace`, its non-pod attributes (type, python path, shell " +
			"type, dynamic labels) as annotations, so other workspaces can use it by name.\n\nA run's pod is its " +
			"container group's default pod, then the group's `pod_spec_override`, then the label, merged with a " +
			"strategic merge patch: the label's settings go to the `worker` container. Requests the label leaves " +
			"unset come from the group's `default_label_*` attributes; a missing limit falls back, as in " +
			"Nodepool, to the label's limit, the group's default limit, the label's request, then the group's " +
			"default request. `rendered_template` shows the label alone, without a group's defaults.\n\nWith " +
			"`spec`, the pod spec is used verbatim (Nodepool's rule): no other pod attribute and no group default " +
			"applies, and the first container must host the run's shell.\n\nA run's pod, label included, must meet " +
			"its container group's `pod_security_level`: at the default, `baseline`, a label with `privileged = " +
			"true`, a `hostPath` volume, host namespaces or added capabilities fails the run's plan, which names " +
			"each failed check.\n\nA label of `type = \"namespace\"` gives each run a fresh namespace with a " +
			"ServiceAccount, a Role over common workloads (core, `apps`, `batch` and `networking.k8s.io` " +
			"resources, logs as `pods/log`) and a RoleBinding, removed when the run ends. The Role may get, list, " +
			"watch and delete Secrets but not create, update or patch them, may read ServiceAccounts but not " +
			"change them, and has no `serviceaccounts/token`, Roles or RoleBindings. The namespace enforces its " +
			"container group's `pod_security_level` with the Pod Security admission labels. The run's pod stays " +
			"in its group's namespace and its playbook gets the namespace in `KUBEPLAY_NAMESPACE` and a " +
			"kubeconfig for the account, valid for the run, in `KUBECONFIG` and `K8S_AUTH_KUBECONFIG`; the " +
			"group's credential must be allowed to create namespaces, service accounts, roles, role bindings and " +
			"tokens. Its PodTemplate holds a placeholder container the API requires; `rendered_template` shows " +
			"the namespace's objects instead.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The label's name.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": schema.StringAttribute{
				MarkdownDescription: "The label's name, unique in the catalog namespace: a lowercase RFC 1123 label of at " +
					"most 63 characters. Changing it replaces the label.",
				Required:      true,
				Validators:    []validator.String{dnsLabel()},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"type": schema.StringAttribute{
				MarkdownDescription: "`pod` (a run executes in a pod shaped by the label) or `namespace` (a run gets a fresh " +
					"namespace with a service account). Defaults to `pod`. Changing it replaces the label.",
				Optional:      true,
				Computed:      true,
				Default:       stringdefault.StaticString(podspec.TypePod),
				Validators:    []validator.String{stringvalidator.OneOf(podspec.TypePod, podspec.TypeNamespace)},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"image": schema.StringAttribute{
				MarkdownDescription: forPod("The run image. Unset, runs use their container group's `image` (the stored PodTemplate shows `" +
					catalog.GroupImagePlaceholder + "` in its place)."),
				Optional:   true,
				Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
			},
			"image_pull_policy": schema.StringAttribute{
				MarkdownDescription: forPod("The image pull policy: `IfNotPresent`, `Always` or `Never`. Unset keeps the " +
					"group's (`IfNotPresent`)."),
				Optional:   true,
				Validators: []validator.String{stringvalidator.OneOf(podspec.PullPolicies...)},
			},
			"cpu": schema.StringAttribute{
				MarkdownDescription: forPod("The CPU request, a quantity such as `500m` or `2`; also the limit when no " +
					"limit is set."),
				Optional:   true,
				Validators: []validator.String{k8sQuantity()},
			},
			"memory": schema.Int64Attribute{
				MarkdownDescription: forPod("The memory request in MiB; also the limit when no limit is set."),
				Optional:            true,
				Validators:          []validator.Int64{int64validator.AtLeast(0)},
			},
			"storage": schema.Int64Attribute{
				MarkdownDescription: forPod("The ephemeral-storage request in MB; also the limit when no limit is set."),
				Optional:            true,
				Validators:          []validator.Int64{int64validator.AtLeast(0)},
			},
			"cpu_limit": schema.StringAttribute{
				MarkdownDescription: forPod("The CPU limit, a quantity; not below `cpu`."),
				Optional:            true,
				Validators:          []validator.String{k8sQuantity()},
			},
			"memory_limit": schema.Int64Attribute{
				MarkdownDescription: forPod("The memory limit in MiB; not below `memory`."),
				Optional:            true,
				Validators:          []validator.Int64{int64validator.AtLeast(0)},
			},
			"storage_limit": schema.Int64Attribute{
				MarkdownDescription: forPod("The ephemeral-storage limit in MB; not below `storage`."),
				Optional:            true,
				Validators:          []validator.Int64{int64validator.AtLeast(0)},
			},
			"gpu": schema.StringAttribute{
				MarkdownDescription: forPod("The GPUs to allocate, a quantity, set as both request and limit of " +
					"`gpu_resource`, as Kubernetes schedules GPUs. Requires `gpu_resource`."),
				Optional:   true,
				Validators: []validator.String{k8sQuantity()},
			},
			"gpu_resource": schema.StringAttribute{
				MarkdownDescription: forPod("The extended resource of the cluster's GPUs, such as `nvidia.com/gpu`. " +
					"Requires `gpu`."),
				Optional: true,
				Validators: []validator.String{stringvalidator.RegexMatches(resourceNameRE, "must be a resource name such as nvidia.com/gpu"),
					stringvalidator.AlsoRequires(path.MatchRoot("gpu"))},
			},
			"extra_resources": schema.MapAttribute{
				MarkdownDescription: forPod("Other resources to request and limit alike, from resource names to quantities."),
				Optional:            true,
				ElementType:         types.StringType,
				Validators:          []validator.Map{k8sQuantityMap("container")},
			},
			"env": schema.ListNestedAttribute{
				MarkdownDescription: forPod("Environment variables of the `worker` container, in order."),
				Optional:            true,
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name": schema.StringAttribute{
						MarkdownDescription: "The variable's name.",
						Required:            true,
						Validators:          []validator.String{stringvalidator.LengthAtLeast(1)},
					},
					"value": schema.StringAttribute{MarkdownDescription: "The variable's value.", Required: true},
				}},
			},
			"node_selector": schema.MapAttribute{
				MarkdownDescription: forPod("Node labels the pod's node must have."),
				Optional:            true,
				ElementType:         types.StringType,
				Validators:          []validator.Map{k8sLabelMap()},
			},
			"scheduler_name": schema.StringAttribute{
				MarkdownDescription: forPod("The pod's scheduler; unset is the cluster's default scheduler."),
				Optional:            true,
				Validators:          []validator.String{stringvalidator.LengthAtLeast(1)},
			},
			"privileged": schema.BoolAttribute{
				MarkdownDescription: forPod("Whether the `worker` container runs privileged. Runs with it need a container group whose " +
					"`pod_security_level` is `privileged`."),
				Optional: true,
			},
			"volumes": schema.StringAttribute{
				MarkdownDescription: forPod("The pod's volumes: a YAML or JSON list of Kubernetes Volumes, for example " +
					"`yamlencode([{ name = \"cache\", emptyDir = {} }])`."),
				Optional:   true,
				Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
			},
			"volume_mounts": schema.StringAttribute{
				MarkdownDescription: forPod("The `worker` container's volume mounts: a YAML or JSON list of Kubernetes " +
					"VolumeMounts."),
				Optional:   true,
				Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
			},
			"labels": schema.MapAttribute{
				MarkdownDescription: "Labels put on the run's pod (or namespace). A namespace label may not set the Pod " +
					"Security admission labels (`pod-security.kubernetes.io/*`): the namespace enforces, warns and audits the " +
					"`pod_security_level` of the run's container group.",
				Optional:    true,
				ElementType: types.StringType,
				Validators:  []validator.Map{k8sLabelMap()},
			},
			"dynamic_labels": schema.MapAttribute{
				MarkdownDescription: "Labels whose values are templates over the run, expanded when it starts: `{run.id}`, `{run.name}`, " +
					"`{run.group}` and `{run.label}`; `{{` and `}}` are literal braces; unknown placeholders are " +
					"plan-time errors. For the workspace, use `terraform.workspace` in the configuration.",
				Optional:    true,
				ElementType: types.StringType,
				Validators:  []validator.Map{labelTemplateMap()},
			},
			"annotations": schema.MapAttribute{
				MarkdownDescription: "Annotations put on the run's pod (or namespace).",
				Optional:            true,
				ElementType:         types.StringType,
				Validators:          []validator.Map{k8sAnnotationMap()},
			},
			"python_path": schema.StringAttribute{
				MarkdownDescription: forPod("The Python interpreter Ansible uses on the run's pod itself (`ansible_python_interpreter` of the " +
					"default inventory's `localhost`): an absolute path such as `/usr/bin/python3.11`, or a discovery " +
					"mode (`auto`, `auto_silent`, `auto_legacy`, `auto_legacy_silent`). Unset, it is `" +
					bundle.DefaultPythonPath + "`. A run's own `inventory` or `inventories` are used as written, " +
					"without it: set `ansible_python_interpreter` in them. A `kubeplay_node` of the label applies it to " +
					"its runs and puts it in its `inventory`."),
				Optional:   true,
				Validators: []validator.String{pythonPath()},
			},
			"shell_type": schema.StringAttribute{
				MarkdownDescription: forPod("The shell plugin Ansible uses on the run's pod itself " +
					"(`ansible_shell_type` of the default inventory's `localhost`), for an image whose shell is not " +
					"Bourne compatible: one of `" + strings.Join(bundle.ShellTypes, "`, `") + "`. Unset, Ansible's " +
					"default (`sh`). As with `python_path`, a run's own `inventory` or `inventories` are used as written, " +
					"and a `kubeplay_node` of the label applies it to its runs and its `inventory`."),
				Optional:   true,
				Validators: []validator.String{stringvalidator.OneOf(bundle.ShellTypes...)},
			},
			"spec": schema.StringAttribute{
				MarkdownDescription: "A verbatim PodSpec as YAML or JSON, for pods the other attributes cannot describe " +
					"(sidecars, several containers). Exclusive with every attribute but `name`, `type`, `labels`, " +
					"`dynamic_labels` and `annotations`; the first container must host the run's shell. Only for " +
					"`type = \"pod\"`.",
				Optional:   true,
				Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
			},
			"rendered_template": schema.StringAttribute{
				MarkdownDescription: "The label's pod template as YAML (for `namespace`, the namespace's objects), " +
					"known at plan time when its inputs are.",
				Computed: true,
			},
		},
	}
}

func (r *nodeLabelResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = nameIdentitySchema("label")
}

func (r *nodeLabelResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

// setAttributes returns the configured (non-null) attributes among names.
func setAttributes(raw tftypes.Value, names []string) []string {
	var obj map[string]tftypes.Value
	if err := raw.As(&obj); err != nil {
		return nil
	}
	var out []string
	for _, n := range names {
		if v, ok := obj[n]; ok && !v.IsNull() {
			out = append(out, n)
		}
	}
	return out
}

func (r *nodeLabelResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m nodeLabelModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	set := setAttributes(req.Config.Raw, append(append([]string{}, podAttributes...), "spec"))
	if m.Type.ValueString() == podspec.TypeNamespace {
		for _, a := range set {
			resp.Diagnostics.AddAttributeError(path.Root(a), "Attribute Not Allowed For Namespace Labels",
				fmt.Sprintf("A node label of type \"namespace\" gives runs a namespace, not a pod, so %s does not apply. "+
					"Remove it, or use type = \"pod\".", a))
		}
		checkNoPodSecurityLabels(m.Labels, &resp.Diagnostics)
		return
	}
	if !m.Spec.IsNull() {
		for _, a := range set {
			if a != "spec" {
				resp.Diagnostics.AddAttributeError(path.Root(a), "Conflicting Attributes",
					fmt.Sprintf("spec is used verbatim and is exclusive with every attribute but %s; %s is set too. "+
						"Move %s into spec, or remove spec.", strings.Join(podspec.SpecCompatible, ", "), a, a))
			}
		}
		if !m.Spec.IsUnknown() {
			if _, err := podspec.ParsePodSpec(m.Spec.ValueString()); err != nil {
				resp.Diagnostics.AddAttributeError(path.Root("spec"), "Invalid Spec", "spec must be a PodSpec as YAML or JSON: "+err.Error()+".")
			}
		}
		return
	}
	if !m.GPU.IsNull() && m.GPUResource.IsNull() {
		resp.Diagnostics.AddAttributeError(path.Root("gpu"), "Missing GPU Resource",
			"gpu is set but gpu_resource is not: Kubernetes needs the name of the extended resource the cluster's GPUs are "+
				"advertised as. Set gpu_resource, for example to \"nvidia.com/gpu\".")
	}
	checkLabelList(&resp.Diagnostics, "volumes", m.Volumes, &[]corev1.Volume{}, "volumes")
	checkLabelList(&resp.Diagnostics, "volume_mounts", m.VolumeMounts, &[]corev1.VolumeMount{}, "volume mounts")
	checkLimit(&resp.Diagnostics, "cpu_limit", "cpu", knownString(m.CPULimit), knownString(m.CPU))
	checkLimit(&resp.Diagnostics, "memory_limit", "memory", int64Quantity(m.MemoryLimit, "Mi"), int64Quantity(m.Memory, "Mi"))
	checkLimit(&resp.Diagnostics, "storage_limit", "storage", int64Quantity(m.StorageLimit, "M"), int64Quantity(m.Storage, "M"))
}

// checkLabelList checks a YAML or JSON list attribute by decoding it into out.
func checkLabelList(diags *diag.Diagnostics, attrName string, v types.String, out any, what string) {
	if v.IsNull() || v.IsUnknown() {
		return
	}
	if err := podspec.ParseList(v.ValueString(), out, what); err != nil {
		diags.AddAttributeError(path.Root(attrName), "Invalid "+strings.ToUpper(what[:1])+what[1:],
			fmt.Sprintf("%s must be a YAML or JSON list of Kubernetes %s: %v.", attrName, what, err))
	}
}

// checkLimit fails a limit below its request; "" is unset or unknown.
func checkLimit(diags *diag.Diagnostics, limAttr, reqAttr string, lim, req string) {
	if lim == "" || req == "" {
		return
	}
	l, errL := podspec.ParseQuantity(lim)
	q, errQ := podspec.ParseQuantity(req)
	if errL == nil && errQ == nil && l.Cmp(q) < 0 {
		diags.AddAttributeError(path.Root(limAttr), "Limit Below Request",
			fmt.Sprintf("%s (%s) is below %s (%s); Kubernetes refuses such a pod. Raise %s or lower %s.",
				limAttr, lim, reqAttr, req, limAttr, reqAttr))
	}
}

func int64Quantity(v types.Int64, unit string) string {
	if v.IsNull() || v.IsUnknown() {
		return ""
	}
	return fmt.Sprintf("%d%s", v.ValueInt64(), unit)
}

func knownString(v types.String) string {
	if v.IsUnknown() {
		return ""
	}
	return v.ValueString()
}

// labelFromModel builds the stored form; ok is false while inputs are unknown.
func labelFromModel(ctx context.Context, m nodeLabelModel, diags *diag.Diagnostics) (podspec.Label, bool) {
	for _, v := range []attr.Value{m.Name, m.Type, m.Image, m.ImagePullPolicy, m.CPU, m.CPULimit, m.Memory, m.MemoryLimit,
		m.Storage, m.StorageLimit, m.GPU, m.GPUResource, m.ExtraResources, m.Env, m.NodeSelector, m.SchedulerName,
		m.Privileged, m.Volumes, m.VolumeMounts, m.Labels, m.DynamicLabels, m.Annotations, m.PythonPath, m.ShellType, m.Spec} {
		if v.IsUnknown() {
			return podspec.Label{}, false
		}
	}
	var env []podspec.EnvVar
	if !m.Env.IsNull() {
		var em []envModel
		diags.Append(m.Env.ElementsAs(ctx, &em, false)...)
		env = []podspec.EnvVar{}
		for _, e := range em {
			if e.Name.IsUnknown() || e.Value.IsUnknown() {
				return podspec.Label{}, false
			}
			env = append(env, podspec.EnvVar{Name: e.Name.ValueString(), Value: e.Value.ValueString()})
		}
	}
	return podspec.Label{
		Name:            m.Name.ValueString(),
		Type:            m.Type.ValueString(),
		Image:           m.Image.ValueString(),
		ImagePullPolicy: m.ImagePullPolicy.ValueString(),
		Resources: podspec.Resources{
			CPU: m.CPU.ValueString(), CPULimit: m.CPULimit.ValueString(),
			Memory: ptrInt64(m.Memory), MemoryLimit: ptrInt64(m.MemoryLimit),
			Storage: ptrInt64(m.Storage), StorageLimit: ptrInt64(m.StorageLimit),
			ExtraResources: goStringMap(ctx, m.ExtraResources, diags),
		},
		GPU:           m.GPU.ValueString(),
		GPUResource:   m.GPUResource.ValueString(),
		Env:           env,
		NodeSelector:  goStringMap(ctx, m.NodeSelector, diags),
		SchedulerName: m.SchedulerName.ValueString(),
		Privileged:    ptrBool(m.Privileged),
		Volumes:       m.Volumes.ValueString(),
		VolumeMounts:  m.VolumeMounts.ValueString(),
		Labels:        goStringMap(ctx, m.Labels, diags),
		DynamicLabels: goStringMap(ctx, m.DynamicLabels, diags),
		Annotations:   goStringMap(ctx, m.Annotations, diags),
		PythonPath:    m.PythonPath.ValueString(),
		ShellType:     m.ShellType.ValueString(),
		Spec:          m.Spec.ValueString(),
	}, true
}

func fillLabel(ctx context.Context, l podspec.Label, m *nodeLabelModel, rendered string, diags *diag.Diagnostics) {
	m.ID, m.Name, m.Type = types.StringValue(l.Name), types.StringValue(l.Name), types.StringValue(l.Type)
	m.Image, m.ImagePullPolicy = stringOrNull(l.Image), stringOrNull(l.ImagePullPolicy)
	m.CPU, m.CPULimit = stringOrNull(l.CPU), stringOrNull(l.CPULimit)
	m.Memory, m.MemoryLimit = nullableInt64(l.Memory), nullableInt64(l.MemoryLimit)
	m.Storage, m.StorageLimit = nullableInt64(l.Storage), nullableInt64(l.StorageLimit)
	m.GPU, m.GPUResource = stringOrNull(l.GPU), stringOrNull(l.GPUResource)
	m.ExtraResources = nullableStringMap(ctx, l.ExtraResources, diags)
	m.Env = types.ListNull(types.ObjectType{AttrTypes: envAttrTypes})
	if l.Env != nil {
		em := make([]envModel, 0, len(l.Env))
		for _, e := range l.Env {
			em = append(em, envModel{Name: types.StringValue(e.Name), Value: types.StringValue(e.Value)})
		}
		v, d := types.ListValueFrom(ctx, types.ObjectType{AttrTypes: envAttrTypes}, em)
		diags.Append(d...)
		m.Env = v
	}
	m.NodeSelector = nullableStringMap(ctx, l.NodeSelector, diags)
	m.SchedulerName = stringOrNull(l.SchedulerName)
	m.Privileged = nullableBool(l.Privileged)
	m.Volumes, m.VolumeMounts = stringOrNull(l.Volumes), stringOrNull(l.VolumeMounts)
	m.Labels = nullableStringMap(ctx, l.Labels, diags)
	m.DynamicLabels = nullableStringMap(ctx, l.DynamicLabels, diags)
	m.Annotations = nullableStringMap(ctx, l.Annotations, diags)
	m.PythonPath, m.ShellType, m.Spec = stringOrNull(l.PythonPath), stringOrNull(l.ShellType), stringOrNull(l.Spec)
	m.RenderedTemplate = types.StringValue(rendered)
}

func (r *nodeLabelResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	var plan nodeLabelModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if plan.ID.IsUnknown() && !plan.Name.IsUnknown() {
		plan.ID = plan.Name // so that references to id are known at plan, as name is
	}
	plan.RenderedTemplate = types.StringUnknown()
	l, known := labelFromModel(ctx, plan, &resp.Diagnostics)
	if known {
		y, err := catalog.RenderLabel(l)
		if err != nil {
			resp.Diagnostics.AddError("Invalid Node Label", err.Error()+".")
			return
		}
		plan.RenderedTemplate = types.StringValue(y)
	}
	if planDrift(ctx, req, &resp.Diagnostics, catalog.KindLabel, plan.Name.ValueString()) {
		plan.RenderedTemplate = types.StringUnknown() // forces an update
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
	if r.data != nil && !plan.Name.IsUnknown() {
		var v *podspec.Label
		if known {
			v = &l
		}
		r.data.plannedLabels.put(plan.Name.ValueString(), v, req.State.Raw.IsNull() || !resp.Plan.Raw.Equal(req.State.Raw))
	}
}

func (r *nodeLabelResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	defer r.data.writingDefinitions()()
	r.write(ctx, req.Plan.Get, true, &resp.State, &resp.Diagnostics)
	setIdentity(ctx, resp.Identity, &resp.Diagnostics, resp.State)
	resp.Diagnostics.Append(recordDrift(ctx, resp.Private)...)
}

func (r *nodeLabelResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	defer r.data.writingDefinitions()()
	r.write(ctx, req.Plan.Get, false, &resp.State, &resp.Diagnostics)
	setIdentity(ctx, resp.Identity, &resp.Diagnostics, resp.State)
	resp.Diagnostics.Append(recordDrift(ctx, resp.Private)...)
}

func (r *nodeLabelResource) write(ctx context.Context, getPlan getter, create bool, state stateSetter, diags *diag.Diagnostics) {
	var plan nodeLabelModel
	diags.Append(getPlan(ctx, &plan)...)
	if diags.HasError() {
		return
	}
	l, _ := labelFromModel(ctx, plan, diags)
	if _, err := catalog.RenderLabel(l); err != nil {
		diags.AddError("Invalid Node Label", err.Error()+".")
		return
	}
	store := r.data.catalogWriter(ctx, diags)
	if store == nil {
		return
	}
	mode := catalog.CreateOrUpdate
	if create {
		mode = catalog.NewOnly
	}
	e, err := store.PutLabel(ctx, l, mode)
	if err != nil {
		addCatalogError(diags, err)
		return
	}
	fillLabel(ctx, e.Value, &plan, e.Rendered, diags)
	diags.Append(state.Set(ctx, &plan)...)
}

func (r *nodeLabelResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	defer setReadIdentity(ctx, req, resp)
	var state nodeLabelModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := state.Name.ValueString()
	e, ok := readForResource(ctx, r.data, catalog.KindLabel, name, (*catalog.Store).GetLabel, resp)
	if !ok {
		return
	}
	resp.Diagnostics.Append(recordDrift(ctx, resp.Private, e.Drift)...)
	fillLabel(ctx, e.Value, &state, e.Rendered, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *nodeLabelResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	defer r.data.writingDefinitions()()
	var state nodeLabelModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	store := r.data.catalogReader(&resp.Diagnostics)
	if store == nil {
		return
	}
	if err := store.DeleteLabel(ctx, state.Name.ValueString()); err != nil {
		addCatalogError(&resp.Diagnostics, err)
	}
}

func (r *nodeLabelResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importByName(ctx, req, resp)
}

// checkNoPodSecurityLabels refuses Pod Security admission labels among a
// namespace label's labels: the namespace enforces its group's
// pod_security_level, which a label may not lower (kubeplay drops such
// labels from the namespace in any case).
func checkNoPodSecurityLabels(labels types.Map, diags *diag.Diagnostics) {
	if labels.IsNull() || labels.IsUnknown() {
		return
	}
	for k := range labels.Elements() {
		if strings.HasPrefix(k, podsecurity.LabelPrefix) {
			diags.AddAttributeError(path.Root("labels").AtMapKey(k), "Pod Security Label Not Allowed",
				fmt.Sprintf("Label %q would set the Pod Security admission of the run's namespace, which enforces the "+
					"pod_security_level of the run's container group (warn and audit too) so that what the run's account "+
					"creates there meets it. Remove the label, and set pod_security_level on the container group instead.", k))
		}
	}
}
