// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	dschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
)

var (
	_ datasource.DataSource              = (*containerGroupDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*containerGroupDataSource)(nil)
)

type containerGroupDataSource struct {
	data *providerData
}

func newContainerGroupDataSource() datasource.DataSource { return &containerGroupDataSource{} }

func (d *containerGroupDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_container_group"
}

func (d *containerGroupDataSource) Schema(ctx context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = dataSchemaFrom(ctx, newContainerGroupResource(),
		"Reads a `kubeplay_container_group` from the catalog namespace by name, for example one that another "+
			"workspace manages, with its rendered default run pod.",
		"The name of the container group to read.", containerGroupReadDescriptions)
	resp.Schema.Attributes["start_figures"] = startFiguresAttribute()
}

// containerGroupDataModel is the group as read, and its runs' figures.
type containerGroupDataModel struct {
	containerGroupModel
	StartFigures types.Object `tfsdk:"start_figures"`
}

// containerGroupReadDescriptions say what each attribute of the container
// group data source holds, as read from the catalog.
var containerGroupReadDescriptions = map[string]string{
	"id":          "The container group's name.",
	"annotations": "The annotations the group puts on every run pod; null when it sets none.",
	"credential": "The name of the `kubeplay_credential` the group's runs reach their cluster with; null when the " +
		"group uses the provider's own connection.",
	"default_plan_check": "The `plan_check` of the group's runs that set none: `off`, `changes` or `drift`.",
	"default_label_cpu": "The CPU request, a quantity, that the group gives runs whose node label sets no `cpu` " +
		"(Nodepool's `default-label-cpu`); null when the group has none.",
	"default_label_cpu_limit": "The CPU limit that the group gives runs whose node label sets no `cpu_limit`; null " +
		"when the group has none.",
	"default_label_extra_resources": "The extra resources, requested and limited alike, from resource names to " +
		"quantities, that the group gives runs whose node label sets no `extra_resources`; null when the group has none.",
	"default_label_memory": "The memory request, in MiB, that the group gives runs whose node label sets no `memory`; " +
		"null when the group has none.",
	"default_label_memory_limit": "The memory limit, in MiB, that the group gives runs whose node label sets no " +
		"`memory_limit`; null when the group has none.",
	"default_label_storage": "The ephemeral-storage request, in MB, that the group gives runs whose node label sets " +
		"no `storage`; null when the group has none.",
	"default_label_storage_limit": "The ephemeral-storage limit, in MB, that the group gives runs whose node label " +
		"sets no `storage_limit`; null when the group has none.",
	"image":  "The image of the `worker` container of the group's run pods, where a node label sets none.",
	"labels": "The labels the group puts on every run pod; null when it sets none.",
	"launch_retries": "How many times a run of the group launches a fresh pod after a launch failure that can pass " +
		"(Nodepool's `launch-retries`); `0` when it launches one pod only.",
	"manage_namespace": "Whether the group manages `namespace`: it created the namespace, and deletes it with " +
		"everything in it when the group is destroyed.",
	"max_concurrent_runs": "The most run pods that may exist at once in the group's namespace (AWX's " +
		"`max_concurrent_jobs`, Nodepool's `max-servers`): its quota's `pods` and the size of its runs ledger; null " +
		"when there is no such limit.",
	"max_cores": "The most CPU that the group's run pods may request together, a quantity (the quota's " +
		"`requests.cpu`); null when there is no such limit.",
	"max_forks": "The most Ansible forks that the group's live runs may use together (AWX's `max_forks`); null when " +
		"there is no such limit.",
	"max_ram": "The most memory, in MiB, that the group's run pods may request together (the quota's " +
		"`requests.memory`); null when there is no such limit.",
	"max_resources": "The group's other quota limits, from ResourceQuota resource names to quantities; null when it " +
		"has none.",
	"namespace": "The namespace the group's run pods are created in, where its quota and ledgers live.",
	"owner_id": "The random id kubeplay gave the group when it created it, which the group's managed namespace, " +
		"quota and ledgers carry in the annotation `kubeplay.io/owner-id`; null for a group stored before owner ids.",
	"disconnect_grace_period": "How long a run of the group goes on in its pod without hearing from the provider, " +
		"as a duration, before the pod ends it.",
	"pod_pending_timeout": "How long a run of the group waits for its pod to start, as a duration, including " +
		"waits for quota, for room on a node, for a preemption and for a node that a cluster autoscaler adds.",
	"pod_security_level": "The Pod Security Standard level the group holds every run pod to: `privileged`, " +
		"`baseline` or `restricted`.",
	"pod_spec_override": "The Pod or bare PodSpec, as YAML or JSON, that the group merges over its default run pod " +
		"with a strategic merge patch; null when it has none.",
	"priority": "The group's priority among the groups of a run's `container_groups`, lower first; null when it has " +
		"none, which counts as `0`.",
	"rendered_pod": "The group's default run pod as YAML, after `image`, `labels`, `annotations` and " +
		"`pod_spec_override`. Each run adds its name, labels and node label.",
	"warm_labels": "How many warm pods of each node label the group keeps ready, from a `kubeplay_node_label`'s name " +
		"to a count; null when it keeps none.",
	"warm_pods": "How many pods of its own run pod the group keeps started and ready ahead of runs, as Nodepool's " +
		"`min-ready`; `0` when none.",
	"warm_pods_ready": "How many of the group's warm pods, of its own pod and of its labels, were ready to be claimed " +
		"when the data source was read.",
	"warm_pods_starting": "How many of the group's warm pods were still starting when the data source was read.",
	"warm_revision": "A hash of the pod specs the group's warm pods are started from, its own and its " +
		"`warm_labels`'; empty when the group has no warm pods, or when a label of `warm_labels` cannot be read.",
}

func (d *containerGroupDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (d *containerGroupDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var dm containerGroupDataModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &dm)...)
	if resp.Diagnostics.HasError() {
		return
	}
	m := &dm.containerGroupModel
	name := m.Name.ValueString()
	// A group changed outside kubeplay is refused, as it is for runs.
	e, ok := readForDataSource(ctx, d.data, catalog.KindGroup, name, (*catalog.Store).TrustedGroup, &resp.Diagnostics)
	if !ok {
		return
	}
	fillGroup(ctx, e.Value, m, e.Rendered, &resp.Diagnostics)
	m.WarmRevision = warmRevision(ctx, d.data, e.Value, false)
	m.WarmPodsReady, m.WarmPodsStarting = warmCounts(ctx, d.data, e.Value)
	dm.StartFigures = startFigures(ctx, d.data, e.Value, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &dm)...)
}

// dataSchemaFrom derives a data source schema from a resource's: every
// attribute computed, with the description reads gives it (a resource's
// says how to configure the attribute, which a data source only reads),
// except name, which is the required lookup key. reads holds nested
// attributes as "parent.child"; it must describe every attribute, and
// nothing else.
func dataSchemaFrom(ctx context.Context, r resource.Resource, desc, nameDesc string, reads map[string]string) dschema.Schema {
	var rs resource.SchemaResponse
	r.Schema(ctx, resource.SchemaRequest{}, &rs)
	used := map[string]bool{}
	attrs := map[string]dschema.Attribute{}
	for k, a := range rs.Schema.Attributes {
		if k == "name" {
			attrs[k] = dschema.StringAttribute{MarkdownDescription: nameDesc, Required: true, Validators: []validator.String{dnsLabel()}}
			continue
		}
		attrs[k] = computedAttr(k, a, reads, used)
	}
	for k := range reads {
		if !used[k] {
			panic(fmt.Sprintf("dataSchemaFrom: %q has a description but is not an attribute", k))
		}
	}
	return dschema.Schema{MarkdownDescription: desc, Attributes: attrs}
}

func computedAttr(key string, a rschema.Attribute, reads map[string]string, used map[string]bool) dschema.Attribute {
	d, ok := reads[key]
	if !ok {
		panic(fmt.Sprintf("dataSchemaFrom: attribute %q has no data source description", key))
	}
	used[key] = true
	switch t := a.(type) {
	case rschema.StringAttribute:
		return dschema.StringAttribute{MarkdownDescription: d, Computed: true, Sensitive: t.Sensitive}
	case rschema.Int64Attribute:
		return dschema.Int64Attribute{MarkdownDescription: d, Computed: true}
	case rschema.BoolAttribute:
		return dschema.BoolAttribute{MarkdownDescription: d, Computed: true}
	case rschema.MapAttribute:
		return dschema.MapAttribute{MarkdownDescription: d, Computed: true, ElementType: t.ElementType}
	case rschema.ListNestedAttribute:
		nested := map[string]dschema.Attribute{}
		for k, na := range t.NestedObject.Attributes {
			nested[k] = computedAttr(key+"."+k, na, reads, used)
		}
		return dschema.ListNestedAttribute{MarkdownDescription: d, Computed: true,
			NestedObject: dschema.NestedAttributeObject{Attributes: nested}}
	}
	panic(fmt.Sprintf("dataSchemaFrom: unsupported attribute type %T", a))
}
