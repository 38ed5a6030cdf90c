// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	dschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"

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
		"The name of the container group to read.")
}

func (d *containerGroupDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (d *containerGroupDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m containerGroupModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := m.Name.ValueString()
	e, ok := readForDataSource(ctx, d.data, catalog.KindGroup, name, (*catalog.Store).GetGroup, &resp.Diagnostics)
	if !ok {
		return
	}
	fillGroup(ctx, e.Value, &m, e.Rendered, &resp.Diagnostics)
	m.WarmRevision = warmRevision(ctx, d.data, e.Value, false)
	m.WarmPodsReady, m.WarmPodsStarting = warmCounts(ctx, d.data, e.Value)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// dataSchemaFrom derives a data source schema from a resource's: every
// attribute computed, with its description rewritten for reading
// (dataDescription), except name, which is the required lookup key.
func dataSchemaFrom(ctx context.Context, r resource.Resource, desc, nameDesc string) dschema.Schema {
	var rs resource.SchemaResponse
	r.Schema(ctx, resource.SchemaRequest{}, &rs)
	attrs := map[string]dschema.Attribute{}
	for k, a := range rs.Schema.Attributes {
		if k == "name" {
			attrs[k] = dschema.StringAttribute{MarkdownDescription: nameDesc, Required: true, Validators: []validator.String{dnsLabel()}}
			continue
		}
		attrs[k] = computedAttr(a)
	}
	return dschema.Schema{MarkdownDescription: desc, Attributes: attrs}
}

// resourceOnly are sentences of resource attribute descriptions that say
// what configuring the attribute does (defaults, replacement, validation),
// which a data source, whose attributes are all read, does not have.
var resourceOnly = []*regexp.Regexp{
	regexp.MustCompile(`^Changing .* replaces `),
	regexp.MustCompile(`^Defaults to `),
	regexp.MustCompile(`^Requires `),
	regexp.MustCompile(`plan-time errors?\b`),
	regexp.MustCompile(` is refused\b`),
}

var (
	// sentenceEnd splits a description after each sentence.
	sentenceEnd = regexp.MustCompile("\\. +([A-Z`])")
	// knownAtPlan is a resource's clause about computed values at plan.
	knownAtPlan = regexp.MustCompile(`[;,] known at plan time when [^.]*`)
	// How resources say that an optional attribute is not configured.
	unsetFirst, unsetAfter = regexp.MustCompile(`^Unset\b`), regexp.MustCompile(`; unset\b`)
)

// dataDescription rewrites a resource attribute's description for a data
// source: sentences about configuring it go, and "unset" reads "null".
func dataDescription(d string) string {
	d = knownAtPlan.ReplaceAllString(d, "")
	var kept []string
	for _, s := range strings.Split(sentenceEnd.ReplaceAllString(d, ".\x00$1"), "\x00") {
		if slices.ContainsFunc(resourceOnly, func(re *regexp.Regexp) bool { return re.MatchString(s) }) {
			continue
		}
		s = unsetFirst.ReplaceAllString(s, "Null")
		kept = append(kept, unsetAfter.ReplaceAllString(s, "; null"))
	}
	return strings.Join(kept, " ")
}

func computedAttr(a rschema.Attribute) dschema.Attribute {
	d := dataDescription(a.GetMarkdownDescription())
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
			nested[k] = computedAttr(na)
		}
		return dschema.ListNestedAttribute{MarkdownDescription: d, Computed: true,
			NestedObject: dschema.NestedAttributeObject{Attributes: nested}}
	}
	panic(fmt.Sprintf("dataSchemaFrom: unsupported attribute type %T", a))
}
