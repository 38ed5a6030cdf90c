// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	dschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
)

// A data source reads what it does not take as an argument: the
// descriptions of those attributes must say what the value read is, not
// what configuring it does or how to configure it.
var resourceWording = regexp.MustCompile(`Changing it|replaces the|Defaults to|[Uu]nset\b|plan-time|known at plan|is refused|Requires |Only for |Set it|Put |[Mm]ake the .* depend|must `)

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
