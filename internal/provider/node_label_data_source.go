// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
)

var (
	_ datasource.DataSource              = (*nodeLabelDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*nodeLabelDataSource)(nil)
)

type nodeLabelDataSource struct {
	data *providerData
}

func newNodeLabelDataSource() datasource.DataSource { return &nodeLabelDataSource{} }

func (d *nodeLabelDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_node_label"
}

func (d *nodeLabelDataSource) Schema(ctx context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = dataSchemaFrom(ctx, newNodeLabelResource(),
		"Reads a `kubeplay_node_label` from the catalog namespace by name, for example one that another workspace "+
			"manages, with its rendered pod template.",
		"The name of the node label to read.", nodeLabelReadDescriptions)
}

// nodeLabelReadDescriptions say what each attribute of the node label data
// source holds, as read from the catalog.
var nodeLabelReadDescriptions = map[string]string{
	"id":   "The label's name.",
	"type": "`pod` (a run executes in a pod shaped by the label) or `namespace` (each run gets a fresh namespace with a service account).",
	"annotations": "The annotations the label puts on the run's pod (with `type = \"namespace\"`, on the run's " +
		"namespace); null when it sets none.",
	"labels": "The labels the label puts on the run's pod (with `type = \"namespace\"`, on the run's namespace); " +
		"null when it sets none.",
	"dynamic_labels": "Labels whose values are templates over the run (`{run.id}`, `{run.name}`, `{run.group}`, " +
		"`{run.label}`), expanded when a run starts; null when the label has none.",
	"image": "The run image; null when runs use their container group's `image`.",
	"image_pull_policy": "The `worker` container's image pull policy, `IfNotPresent`, `Always` or `Never`; null when " +
		"the group's applies.",
	"cpu":             "The `worker` container's CPU request, a quantity; null when the label sets none.",
	"cpu_limit":       "The `worker` container's CPU limit, a quantity; null when the label sets none.",
	"memory":          "The `worker` container's memory request, in MiB; null when the label sets none.",
	"memory_limit":    "The `worker` container's memory limit, in MiB; null when the label sets none.",
	"storage":         "The `worker` container's ephemeral-storage request, in MB; null when the label sets none.",
	"storage_limit":   "The `worker` container's ephemeral-storage limit, in MB; null when the label sets none.",
	"gpu":             "The GPUs the `worker` container requests and is limited to, a quantity of `gpu_resource`; null when the label sets none.",
	"gpu_resource":    "The extended resource of the GPUs, such as `nvidia.com/gpu`; null when the label sets none.",
	"extra_resources": "Other resources the `worker` container requests and is limited to alike, from resource names to quantities; null when the label sets none.",
	"env":             "The `worker` container's environment variables, in order; null when the label sets none.",
	"env.name":        "The variable's name.",
	"env.value":       "The variable's value.",
	"node_selector":   "Node labels that the run pod's node has to have; null when the label sets none.",
	"scheduler_name":  "The run pod's scheduler; null for the cluster's default scheduler.",
	"privileged":      "Whether the `worker` container runs privileged; null when the label does not say.",
	"volumes":         "The run pod's volumes, a YAML or JSON list of Kubernetes Volumes; null when the label sets none.",
	"volume_mounts":   "The `worker` container's volume mounts, a YAML or JSON list of Kubernetes VolumeMounts; null when the label sets none.",
	"python_path":     "The Python interpreter the label names for Ansible (Nodepool's `python-path`); null when it names none.",
	"shell_type":      "The shell type the label names for Ansible (Nodepool's `shell-type`); null when it names none.",
	"spec":            "The verbatim PodSpec, as YAML or JSON, that the label gives run pods in place of the other settings; null when it has none.",
	"rendered_template": "The label's pod template as YAML (with `type = \"namespace\"`, the objects of the run's " +
		"namespace).",
}

func (d *nodeLabelDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (d *nodeLabelDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m nodeLabelModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := m.Name.ValueString()
	// A label changed outside kubeplay is refused, as it is for runs.
	e, ok := readForDataSource(ctx, d.data, catalog.KindLabel, name, (*catalog.Store).TrustedLabel, &resp.Diagnostics)
	if !ok {
		return
	}
	fillLabel(ctx, e.Value, &m, e.Rendered, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
