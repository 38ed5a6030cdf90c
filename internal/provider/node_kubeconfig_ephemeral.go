// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/clientcmd"
)

var (
	_ ephemeral.EphemeralResource              = (*nodeKubeconfigEphemeral)(nil)
	_ ephemeral.EphemeralResourceWithConfigure = (*nodeKubeconfigEphemeral)(nil)
)

// nodeKubeconfigTTL is a node kubeconfig's default lifetime.
const nodeKubeconfigTTL = time.Hour

type nodeKubeconfigEphemeral struct {
	data *providerData
}

func newNodeKubeconfigEphemeral() ephemeral.EphemeralResource { return &nodeKubeconfigEphemeral{} }

type nodeKubeconfigModel struct {
	NodeID     types.String `tfsdk:"node_id"`
	TTL        types.String `tfsdk:"ttl"`
	Server     types.String `tfsdk:"server"`
	Kubeconfig types.String `tfsdk:"kubeconfig"`
	Namespace  types.String `tfsdk:"namespace"`
	ExpiresAt  types.String `tfsdk:"expires_at"`
}

func (r *nodeKubeconfigEphemeral) Metadata(_ context.Context, req ephemeral.MetadataRequest, resp *ephemeral.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_node_kubeconfig"
}

func (r *nodeKubeconfigEphemeral) Schema(_ context.Context, _ ephemeral.SchemaRequest, resp *ephemeral.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "A kubeconfig for a held namespace node (a `kubeplay_node` of a `namespace` node label), as Nodepool " +
			"gives Zuul for a namespace node: the node's service account `kubeplay`, in the node's namespace, " +
			"with a token from the TokenRequest API that expires after `ttl`. Ephemeral: Terraform opens it for " +
			"each plan and apply and never keeps it in the plan or the state, so pass it on to write-only " +
			"attributes, provider configurations or other ephemeral values. Each open issues a fresh token, which " +
			"ends at `expires_at` or when the node is destroyed. A pod node has no kubeconfig of its own (see its " +
			"`inventory`).",
		Attributes: map[string]schema.Attribute{
			"node_id": schema.StringAttribute{
				MarkdownDescription: "The `id` of the `kubeplay_node`: `<container_group>/<name>`. The group's credential " +
					"issues the token. Pass the resource's `id` (`kubeplay_node.x.id`) rather than writing it out: it is " +
					"known once the node exists, so Terraform opens this after the node is made, not in a plan before.",
				Required:   true,
				Validators: []validator.String{nodeID()},
			},
			"ttl": schema.StringAttribute{
				MarkdownDescription: "How long the token is valid: a duration from `10m` (the shortest the TokenRequest " +
					"API issues) to `48h`. Default `1h`. The API server may cap it (`--service-account-max-token-expiration`).",
				Optional:   true,
				Validators: []validator.String{durationBetween(10*time.Minute, 48*time.Hour)},
			},
			"server": schema.StringAttribute{
				MarkdownDescription: "The API server URL the kubeconfig names, for a client that reaches the cluster by " +
					"another address. Default: the group's credential's server, with its CA.",
				Optional: true,
			},
			"kubeconfig": schema.StringAttribute{
				MarkdownDescription: "The kubeconfig, as YAML, with one context (`kubeplay`) whose namespace is the node's.",
				Computed:            true,
				Sensitive:           true,
			},
			"namespace": schema.StringAttribute{MarkdownDescription: "The node's namespace.", Computed: true},
			"expires_at": schema.StringAttribute{MarkdownDescription: "When the token expires (RFC 3339), as the API server " +
				"issued it: earlier than `ttl` asks when the server caps tokens (`--service-account-max-token-expiration`).", Computed: true},
		},
	}
}

func (r *nodeKubeconfigEphemeral) Configure(_ context.Context, req ephemeral.ConfigureRequest, resp *ephemeral.ConfigureResponse) {
	r.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (r *nodeKubeconfigEphemeral) Open(ctx context.Context, req ephemeral.OpenRequest, resp *ephemeral.OpenResponse) {
	var m nodeKubeconfigModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ttl := nodeKubeconfigTTL
	if !m.TTL.IsNull() {
		ttl, _ = time.ParseDuration(m.TTL.ValueString()) // validated
	}
	group, node, _ := strings.Cut(m.NodeID.ValueString(), "/") // validated
	g, _, e, err := nodeTarget(ctx, r.data, group, "")
	if addDefinitionRefused(&resp.Diagnostics, path.Root("node_id"), err) {
		return
	}
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("node_id"), "Node Target Unavailable", err.Error()+
			". Check the group's name and that its credential reaches its cluster.")
		return
	}
	grant, err := e.NodeAccess(ctx, g, node, ttl)
	if err == nil && grant.Expires.IsZero() {
		err = errors.New("the API server issued a token without an expiry")
	}
	raw := grant.Kubeconfig
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("node_id"), "Node Kubeconfig Not Issued", fmt.Sprintf("Held node %q "+
			"of container group %q: %v. Name a kubeplay_node of a namespace node label, make this depend on it, and "+
			"check that the group's credential may create service account tokens.", node, g.Name, err))
		return
	}
	if !m.Server.IsNull() {
		kc, err := clientcmd.Load(raw)
		if err == nil {
			for _, c := range kc.Clusters {
				c.Server = m.Server.ValueString()
			}
			raw, err = clientcmd.Write(*kc)
		}
		if err != nil {
			resp.Diagnostics.AddError("Node Kubeconfig Not Issued", fmt.Sprintf("Setting the server of the kubeconfig: %v. "+
				"This is a bug in the provider; please report it.", err))
			return
		}
	}
	m.Kubeconfig = types.StringValue(string(raw))
	m.Namespace = types.StringValue(node)
	// The token's own expiry: the API server may cap the ttl asked for.
	m.ExpiresAt = types.StringValue(grant.Expires.UTC().Format(time.RFC3339))
	resp.Diagnostics.Append(resp.Result.Set(ctx, &m)...)
}

// nodeID accepts a held node's id: <container_group>/<name>, each an RFC
// 1123 label.
func nodeID() validator.String {
	return stringCheck{
		desc: "must be <container_group>/<name>",
		check: func(path, s string) (string, string) {
			group, name, ok := strings.Cut(s, "/")
			if ok && len(validation.IsDNS1123Label(group)) == 0 && len(validation.IsDNS1123Label(name)) == 0 {
				return "", ""
			}
			return "Invalid Node ID", fmt.Sprintf("%s must be a kubeplay_node's id, <container_group>/<name>, such as "+
				"main/debug-node; pass kubeplay_node.<name>.id. Got %q.", path, s)
		},
	}
}
