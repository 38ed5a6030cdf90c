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
	"id":                            "The container group's name.",
	"annotations":                   "The annotations the group puts on every run pod; null when none.",
	"credential":                    "The `kubeplay_credential` the group's runs use; null for the provider's own connection.",
	"default_plan_check":            "The `plan_check` of the group's runs that set none: `off`, `changes` or `drift`.",
	"default_label_cpu":             "The CPU request of runs whose node label sets no `cpu`; null when none.",
	"default_label_cpu_limit":       "The CPU limit of runs whose node label sets no `cpu_limit`; null when none.",
	"default_label_extra_resources": "The extra resources of runs whose node label sets none; null when none.",
	"default_label_memory":          "The memory request, in MiB, of runs whose node label sets no `memory`; null when none.",
	"default_label_memory_limit":    "The memory limit, in MiB, of runs whose node label sets none; null when none.",
	"default_label_storage":         "The ephemeral-storage request, in MB, of runs whose node label sets none; null when none.",
	"default_label_storage_limit":   "The ephemeral-storage limit, in MB, of runs whose node label sets none; null when none.",
	"image":                         "The `worker` container's image, where a node label sets none.",
	"labels":                        "The labels the group puts on every run pod; null when none.",
	"launch_retries":                "How many times a run launches a fresh pod after a launch failure that can pass.",
	"manage_namespace":              "Whether the group created `namespace` and deletes it when destroyed.",
	"max_concurrent_runs":           "The most run pods that may exist at once in the group's namespace; null when unlimited.",
	"max_cores":                     "The most CPU the group's run pods may request together; null when unlimited.",
	"max_forks":                     "The most Ansible forks the group's live runs may use together; null when unlimited.",
	"max_ram":                       "The most memory, in MiB, the group's run pods may request together; null when unlimited.",
	"max_resources":                 "The group's other quota limits; null when none.",
	"namespace":                     "The namespace of the group's run pods, quota and ledgers.",
	"owner_id":                      "The random id the group's namespace, quota and ledgers carry (`kubeplay.io/owner-id`); null for an older group.",
	"disconnect_grace_period":       "How long a run goes on in its pod without hearing from the provider.",
	"pod_pending_timeout":           "How long a run waits for its pod to start.",
	"pod_security_level":            "The Pod Security Standard level of the group's run pods: `privileged`, `baseline` or `restricted`.",
	"pod_spec_override":             "The Pod or PodSpec merged over the group's default run pod; null when none.",
	"priority":                      "The group's priority among a run's `container_groups`, lower first; null counts as `0`.",
	"rendered_pod":                  "The group's default run pod as YAML; each run adds its name, labels and node label.",
	"warm_labels":                   "How many warm pods of each node label the group keeps ready; null when none.",
	"warm_pods":                     "How many pods of its own run pod the group keeps ready; `0` when none.",
	"warm_pods_ready":               "How many of the group's warm pods were ready when the data source was read.",
	"warm_pods_starting":            "How many of the group's warm pods were still starting when the data source was read.",
	"warm_revision":                 "A hash of the specs the group's warm pods start from; empty without warm pods.",
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
