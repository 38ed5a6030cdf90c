// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	dschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
)

// A data source reads what it does not take as an argument: the
// descriptions of those attributes must not say what configuring them does.
var resourceWording = regexp.MustCompile(`Changing it|replaces the|Defaults to|[Uu]nset\b|plan-time|known at plan|is refused|Requires `)

func TestDataSourceDescriptions(t *testing.T) {
	ctx := context.Background()
	for _, newDS := range New("test")().DataSources(ctx) {
		ds := newDS()
		var meta datasource.MetadataResponse
		ds.Metadata(ctx, datasource.MetadataRequest{ProviderTypeName: "kubeplay"}, &meta)
		var resp datasource.SchemaResponse
		ds.Schema(ctx, datasource.SchemaRequest{}, &resp)
		var walk func(prefix string, attrs map[string]dschema.Attribute)
		walk = func(prefix string, attrs map[string]dschema.Attribute) {
			for name, a := range attrs {
				if a.IsRequired() || a.IsOptional() {
					continue // the data source's own arguments, such as name
				}
				if m := resourceWording.FindString(a.GetMarkdownDescription()); m != "" {
					t.Errorf("%s.%s%s says %q, which is about configuring a resource: %s", meta.TypeName, prefix, name, m, a.GetMarkdownDescription())
				}
				if n, ok := a.(dschema.ListNestedAttribute); ok {
					walk(prefix+name+".", n.NestedObject.Attributes)
				}
			}
		}
		walk("", resp.Schema.Attributes)
	}
}

func TestDataDescription(t *testing.T) {
	for in, want := range map[string]string{
		"The cluster's credential. Unset means the provider's own. Changing it replaces the group.":                   "The cluster's credential. Null means the provider's own.",
		"Whether it is managed. A namespace that already exists is refused. Defaults to `false`: then it must exist.": "Whether it is managed.",
		"The limit. At least 1; unset is unlimited.":                                                                  "The limit. At least 1; null is unlimited.",
		"The pod as YAML, after `image`; known at plan time when they are. Each run adds its name.":                   "The pod as YAML, after `image`. Each run adds its name.",
		"The GPUs, a quantity. Requires `gpu_resource`. Only for `type = \"pod\"`.":                                   "The GPUs, a quantity. Only for `type = \"pod\"`.",
		"Templates: `{run.id}`. Unknown placeholders are plan-time errors. `{{` is a literal brace.":                  "Templates: `{run.id}`. `{{` is a literal brace.",
		"Labels put on every run pod of the group.":                                                                   "Labels put on every run pod of the group.",
	} {
		if got := dataDescription(in); got != want {
			t.Errorf("dataDescription(%q)\n = %q\nwant %q", in, got, want)
		}
	}
	// The resources keep their wording.
	var rs resource.SchemaResponse
	newContainerGroupResource().Schema(context.Background(), resource.SchemaRequest{}, &rs)
	if d := rs.Schema.Attributes["credential"].GetMarkdownDescription(); !strings.Contains(d, "Changing it replaces the group") {
		t.Errorf("the resource's description changed: %s", d)
	}
}
