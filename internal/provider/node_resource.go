// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runengine"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/warmpool"
)

var (
	_ resource.Resource                = (*nodeResource)(nil)
	_ resource.ResourceWithConfigure   = (*nodeResource)(nil)
	_ resource.ResourceWithModifyPlan  = (*nodeResource)(nil)
	_ resource.ResourceWithImportState = (*nodeResource)(nil)
)

// The statuses of a held node.
const (
	nodeRunning = "running"
	nodeGone    = "gone"
)

// The kinds of held node.
const (
	nodeKindPod       = runengine.NodeKindPod
	nodeKindNamespace = runengine.NodeKindNamespace
)

// nodeReleaseTimeout bounds a node's destroy.
const nodeReleaseTimeout = 2 * time.Minute

type nodeResource struct {
	data *providerData
}

func newNodeResource() resource.Resource { return &nodeResource{} }

type nodeModel struct {
	ID             types.String `tfsdk:"id"`
	Name           types.String `tfsdk:"name"`
	ContainerGroup types.String `tfsdk:"container_group"`
	NodeLabel      types.String `tfsdk:"node_label"`
	Kind           types.String `tfsdk:"kind"`
	Namespace      types.String `tfsdk:"namespace"`
	NodeName       types.String `tfsdk:"node_name"`
	PodIP          types.String `tfsdk:"pod_ip"`
	Status         types.String `tfsdk:"status"`
	Inventory      types.String `tfsdk:"inventory"`
	RenderedPod    types.String `tfsdk:"rendered_pod"`
}

func (r *nodeResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_node"
}

func (r *nodeResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		MarkdownDescription: "A held node: a pod of a container group, with a node label or the group's own pod, that " +
			"lives from create to destroy, as a Nodepool node held for its user; or, for a node label of " +
			"`type = \"namespace\"`, a namespace with its service account. Runs name it in `node`; runs on one node " +
			"take turns, each waiting for the one before it to end.\n\n" +
			"**Pod nodes.** A run execs into the node's pod instead of a pod of its own, taking turns with a `flock` in the " +
			"pod; each run's files are removed when it ends. `inventory` reaches the pod from elsewhere with the " +
			"`kubernetes.core.kubectl` connection. The pod is the group's run pod with the label composed over it, named " +
			"`name`, labelled `kubeplay.io/node=<name>`, without a deadline; it counts against the group's quota while it " +
			"lives. A label's `python_path` and `shell_type` go into the worker's environment as `" + runengine.EnvPythonPath +
			"` and `" + runengine.EnvShellType + "`, part of the signed spec. kubeplay signs the pod with the catalog key, so a pod someone else made " +
			"or changed is refused (replace the node); signing needs `update` on pods. A destroy deletes only the " +
			"node's own pod.\n\n**Namespace nodes.** The namespace is named `name` and holds a ServiceAccount " +
			"`kubeplay` with the Role a namespace label's run gets (Nodepool's namespace node). A run naming it " +
			"gets a pod of its own with a kubeconfig for that account, records the namespace in `run_namespace`, " +
			"and takes its turn with an annotation `kubeplay.io/held-by` that ends at the run's deadline. " +
			"`kubeplay_node_kubeconfig` issues a kubeconfig for access from elsewhere; none is kept in the state. " +
			"Making one needs a credential that may create namespaces and RBAC objects; runs on it also update " +
			"the namespace and request tokens.\n\nA pod or namespace deleted out of band shows as `status = \"gone\"` " +
			"after a refresh, and the next plan replaces the node.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "`<container_group>/<name>`, which `terraform import` takes.",
				Computed:            true,
				PlanModifiers:       keep,
			},
			"name": schema.StringAttribute{
				MarkdownDescription: "The node's name, which is its pod's name in the group's namespace: a lowercase " +
					"RFC 1123 label of at most 63 characters. Changing it replaces the node.",
				Required:      true,
				Validators:    []validator.String{dnsLabel()},
				PlanModifiers: replace,
			},
			"container_group": schema.StringAttribute{
				MarkdownDescription: "The container group whose pod, namespace and credential the node uses. Changing it " +
					"replaces the node.",
				Required:      true,
				Validators:    []validator.String{dnsLabel()},
				PlanModifiers: replace,
			},
			"node_label": schema.StringAttribute{
				MarkdownDescription: "A `kubeplay_node_label`: of type `pod`, composed over the group's pod as for a run; " +
					"of type `namespace`, the node is a namespace. Unset, the node is the group's own run pod. Changing it " +
					"replaces the node.",
				Optional:      true,
				Validators:    []validator.String{dnsLabel()},
				PlanModifiers: replace,
			},
			"kind": schema.StringAttribute{
				MarkdownDescription: "`pod`, or `namespace` for a node of a namespace label.",
				Computed:            true, PlanModifiers: keep,
			},
			"namespace": schema.StringAttribute{
				MarkdownDescription: "For a pod node, the namespace of its pod: the group's. For a namespace node, the " +
					"node's namespace: `name`.",
				Computed: true, PlanModifiers: keep,
			},
			"node_name":    schema.StringAttribute{MarkdownDescription: "The Kubernetes node the pod was scheduled on; null for a namespace node.", Computed: true, PlanModifiers: keep},
			"pod_ip":       schema.StringAttribute{MarkdownDescription: "The pod's IP address; null for a namespace node.", Computed: true, PlanModifiers: keep},
			"rendered_pod": schema.StringAttribute{MarkdownDescription: "The node's pod as it was created, as YAML; null for a namespace node.", Computed: true, PlanModifiers: keep},
			"status": schema.StringAttribute{
				MarkdownDescription: "`running` while the pod lives; `gone` once a refresh found it deleted or ended, " +
					"which the next plan turns into a replacement.",
				Computed: true,
			},
			"inventory": schema.StringAttribute{
				MarkdownDescription: "An inventory line that reaches the node from another Ansible with the " +
					"`kubernetes.core.kubectl` connection: `<name> ansible_connection=kubernetes.core.kubectl " +
					"ansible_kubectl_namespace=<namespace> ansible_kubectl_pod=<name> ansible_kubectl_container=<container>`, " +
					"then `ansible_python_interpreter` and `ansible_shell_type` when the node's label sets `python_path` " +
					"and `shell_type`. The connection needs a kubeconfig that may exec into the pod, as the group's " +
					"credential may. Null for a namespace node.",
				Computed:      true,
				PlanModifiers: keep,
			},
		},
	}
}

func (r *nodeResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

// ModifyPlan replaces a node whose pod a refresh found gone.
func (r *nodeResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	var plan nodeModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if req.State.Raw.IsNull() {
		plan.Status = types.StringValue(nodeRunning)
		resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
		return
	}
	var state nodeModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	plan.Status = types.StringValue(nodeRunning)
	if state.Status.ValueString() == nodeGone {
		resp.RequiresReplace = append(resp.RequiresReplace, path.Root("status"))
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

// target is the group's and node label's definitions ("" for no label),
// and an engine of the group's cluster.
func (r *nodeResource) target(ctx context.Context, group, label string) (runengine.Group, *podspec.Label, *runengine.Engine, error) {
	return nodeTarget(ctx, r.data, group, label)
}

// nodeTarget is what a held node needs from the catalog and the cluster:
// the group and label ("" for none) and an engine of the group's cluster.
func nodeTarget(ctx context.Context, d *providerData, group, label string) (runengine.Group, *podspec.Label, *runengine.Engine, error) {
	g, err := readDefinition(ctx, d, (*catalog.Store).TrustedGroup, group)
	if err == nil && g == nil {
		err = &missingGroupError{name: group, namespace: d.catalogNamespace}
	}
	if err != nil {
		return runengine.Group{}, nil, nil, err
	}
	var l *podspec.Label
	if label != "" {
		if l, err = readDefinition(ctx, d, (*catalog.Store).TrustedLabel, label); err == nil && l == nil {
			err = fmt.Errorf("node label %q does not exist in catalog namespace %q; create it with a kubeplay_node_label "+
				"resource, and make the node depend on it", label, d.catalogNamespace)
		}
		if err != nil {
			return runengine.Group{}, nil, nil, err
		}
	}
	var c *kubeclient.Clients
	if c, err = d.credentialClients(ctx, g.Credential); err != nil {
		return runengine.Group{}, nil, nil, fmt.Errorf("container group %q: %w", g.Name, err)
	}
	eg := engineGroup(g)
	eg.PodSecurityVersion = serverPolicyVersion(ctx, c)
	return eg, l, engineFor(ctx, d, c), nil
}

func (r *nodeResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan nodeModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	g, l, e, err := r.target(ctx, plan.ContainerGroup.ValueString(), plan.NodeLabel.ValueString())
	if addDefinitionRefused(&resp.Diagnostics, path.Root("container_group"), err) {
		return
	}
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("container_group"), "Node Target Unavailable", err.Error()+
			". Make the node depend on its kubeplay_container_group (and kubeplay_node_label), and check the group's credential.")
		return
	}
	if l != nil && l.Type == podspec.TypeNamespace {
		ns, err := e.HoldNamespace(ctx, g, runengine.NodeNamespace(g, l, plan.Name.ValueString()))
		if err != nil {
			resp.Diagnostics.AddError("Node Not Created", fmt.Sprintf("The namespace %s of held node %q was not made: %v. "+
				"Nothing is left behind. Check that no namespace of that name exists, and that the group's credential may "+
				"create namespaces, service accounts, roles and role bindings.", plan.Name.ValueString(), plan.Name.ValueString(), err))
			return
		}
		fillNamespaceNode(&plan, g, ns)
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
		return
	}
	pod, err := runengine.NodePod(g, l, plan.Name.ValueString())
	if err != nil {
		at := path.Root("container_group")
		if l != nil {
			at = path.Root("node_label")
		}
		addRenderError(err, at, &resp.Diagnostics)
		return
	}
	started, err := e.Hold(ctx, g, pod)
	if err != nil {
		resp.Diagnostics.AddError("Node Not Started", fmt.Sprintf("The pod %s/%s of held node %q did not start: %v. "+
			"Nothing is left behind. Check the group's image and quota, and the label's resources.", g.Namespace, pod.Name,
			plan.Name.ValueString(), err))
		return
	}
	fillNode(&plan, g, started)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// fillNamespaceNode records the node's namespace ns in m.
func fillNamespaceNode(m *nodeModel, g runengine.Group, ns *corev1.Namespace) {
	m.ID = types.StringValue(g.Name + "/" + ns.Name)
	m.Kind = types.StringValue(nodeKindNamespace)
	m.Namespace = types.StringValue(ns.Name)
	m.Status = types.StringValue(nodeRunning)
	m.NodeName, m.PodIP, m.RenderedPod, m.Inventory = types.StringNull(), types.StringNull(), types.StringNull(), types.StringNull()
	if l := ns.Labels[managed.LabelNodeLabel]; l != "" {
		m.NodeLabel = types.StringValue(l)
	}
}

// fillNode records the node's pod p in m.
func fillNode(m *nodeModel, g runengine.Group, p *corev1.Pod) {
	m.ID = types.StringValue(g.Name + "/" + p.Name)
	m.Kind = types.StringValue(nodeKindPod)
	m.Namespace = types.StringValue(p.Namespace)
	m.NodeName = types.StringValue(p.Spec.NodeName)
	m.PodIP = types.StringValue(p.Status.PodIP)
	m.Status = types.StringValue(nodeRunning)
	inv := fmt.Sprintf("%s ansible_connection=kubernetes.core.kubectl ansible_kubectl_namespace=%s "+
		"ansible_kubectl_pod=%s ansible_kubectl_container=%s", p.Name, p.Namespace, p.Name, p.Spec.Containers[0].Name)
	if vars := runengine.PodLocal(p).HostVars(); vars != "" {
		inv += " " + vars // the label's python_path and shell_type, as the pod carries them
	}
	m.Inventory = types.StringValue(inv)
	if l := p.Labels[managed.LabelNodeLabel]; l != "" {
		m.NodeLabel = types.StringValue(l)
	}
	if y, err := podspec.ToYAML(runengine.CleanPod(p)); err == nil {
		m.RenderedPod = types.StringValue(y)
	}
}

func (r *nodeResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state nodeModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	g, _, e, err := r.target(ctx, state.ContainerGroup.ValueString(), "")
	var missing *missingGroupError
	switch {
	case errors.As(err, &missing):
		// The group went, and its namespace with it, most likely.
		state.Status = types.StringValue(nodeGone)
		resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
		return
	case err != nil:
		resp.Diagnostics.AddWarning("Node Not Refreshed", fmt.Sprintf("Held node %q: %v. Its state is kept as it was.",
			state.Name.ValueString(), err))
		return
	}
	name := state.Name.ValueString()
	p, ns, err := e.FindNode(ctx, g, name, state.Kind.ValueString())
	switch {
	case err != nil && !errors.Is(err, runengine.ErrNotNode):
		resp.Diagnostics.AddWarning("Node Not Refreshed", fmt.Sprintf("Reading held node %q (pod %s/%s or namespace %s): "+
			"%v. Its state is kept as it was.", name, g.Namespace, name, name, err))
		return
	case p != nil && e.NodeSignedBefore(ctx, g, p):
		// Signed under a previous catalog key: no run uses it, so the plan
		// replaces it, and the destroy deletes the old pod.
		state.Status = types.StringValue(nodeGone)
	case p != nil:
		fillNode(&state, g, p)
	case ns != nil:
		fillNamespaceNode(&state, g, ns)
	case state.Status.IsNull(): // an import
		resp.Diagnostics.AddError("Node Not Found", fmt.Sprintf("Container group %q has no held node %q: no pod "+
			"%s/%s and no namespace %s of the group carry the label kubeplay.io/node=%s. Check the import id "+
			"(<container_group>/<name>).", g.Name, name, g.Namespace, name, name, name))
		return
	default:
		state.Status = types.StringValue(nodeGone)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *nodeResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	// Every input replaces the node: only computed values reach here.
	var plan nodeModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *nodeResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state nodeModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	g, _, e, err := r.target(ctx, state.ContainerGroup.ValueString(), "")
	var missing *missingGroupError
	if errors.As(err, &missing) {
		what := "pod " + state.Namespace.ValueString() + "/" + state.Name.ValueString()
		if state.Kind.ValueString() == nodeKindNamespace {
			what = "namespace " + state.Name.ValueString()
		}
		resp.Diagnostics.AddWarning("Node's Container Group Not Found", fmt.Sprintf("%v. The %s of held node %q "+
			"was not deleted: delete it by hand if it still exists.", err, what, state.Name.ValueString()))
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Node Target Unavailable", err.Error()+". Check that the group's credential still "+
			"reaches its cluster, and destroy again.")
		return
	}
	ctx, cancel := context.WithTimeout(ctx, nodeReleaseTimeout)
	defer cancel()
	if state.Kind.ValueString() == nodeKindNamespace {
		if err := e.ReleaseNamespace(ctx, g, state.Name.ValueString()); err != nil {
			resp.Diagnostics.AddError("Deleting Node Failed", fmt.Sprintf("Deleting namespace %s of held node %q: %v. "+
				"Check that the group's credential may delete namespaces, and destroy again.", state.Name.ValueString(),
				state.Name.ValueString(), err))
		}
		return
	}
	err = e.Release(ctx, g, state.Name.ValueString())
	var refused *warmpool.RefusedError
	switch {
	case errors.Is(err, runengine.ErrNotNode), errors.As(err, &refused):
		// A pod of the name, live or ended, that is not the node kubeplay made.
		resp.Diagnostics.AddWarning("Node Pod Left in Place", fmt.Sprintf("Held node %q: %v. It is not the node's pod, so "+
			"the destroy left it. Delete it by hand if it is yours (an earlier kubeplay, before node pods were signed, "+
			"made pods that are left this way).", state.Name.ValueString(), err))
	case err != nil:
		resp.Diagnostics.AddError("Deleting Node Failed", fmt.Sprintf("Deleting pod %s/%s of held node %q: %v. Check "+
			"that the group's credential may delete pods, and destroy again.", g.Namespace, state.Name.ValueString(),
			state.Name.ValueString(), err))
	}
}

func (r *nodeResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	group, name, ok := strings.Cut(req.ID, "/")
	if !ok || group == "" || name == "" {
		resp.Diagnostics.AddError("Invalid Import ID", fmt.Sprintf("Import a held node as <container_group>/<name>, "+
			"for example main/debug-node; got %q.", req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("container_group"), group)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
}
