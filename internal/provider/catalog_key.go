// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalogkey"
)

// signingKey is the catalog's key (the provider's catalog_key, or the key
// Secret of the catalog namespace), which signs the warm pods and held
// nodes' pods kubeplay makes and verifies those it claims. The store's key
// source reads it once, so a claim of a warm pod costs no request for it.
func (d *providerData) signingKey(ctx context.Context) (*catalogkey.Key, error) {
	s, err := d.catalog()
	if err != nil {
		return nil, err
	}
	return s.Key(ctx)
}

// previousCatalogKeysAttribute: the keys a rotation replaced, which only
// recognise kubeplay's own pods signed under them, so that they are
// deleted rather than left as strangers.
func previousCatalogKeysAttribute() schema.ListAttribute {
	return schema.ListAttribute{
		MarkdownDescription: "Catalog keys that `catalog_key` (or the key Secret) replaced, kept for a rotation. kubeplay only " +
			"recognises, and deletes, its own pods signed with them. Each is the old key itself, or `base64:` and " +
			"the base64 of its bytes (the key Secret's `data.key`), at least " +
			fmt.Sprint(catalogkey.MinLength) + " bytes. Defaults to none (see [Rotating the catalog " +
			"key](guides/security-model.md#rotating-the-catalog-key)).",
		ElementType: types.StringType,
		Optional:    true,
		Sensitive:   true,
		Validators: []validator.List{listvalidator.ValueStringsAre(stringvalidator.LengthAtLeast(1)),
			listvalidator.SizeAtMost(8)},
	}
}

// previousCatalogKeysFrom reads previous_catalog_keys; a key that is too
// short or not base64 after "base64:" is an error at the attribute.
func previousCatalogKeysFrom(ctx context.Context, v types.List) ([][]byte, diag.Diagnostics) {
	var diags diag.Diagnostics
	if v.IsNull() || v.IsUnknown() {
		return nil, diags
	}
	var keys []string
	if diags.Append(v.ElementsAs(ctx, &keys, false)...); diags.HasError() {
		return nil, diags
	}
	var out [][]byte
	for i, k := range keys {
		b, err := catalogkey.ParsePrevious(k)
		if err != nil {
			diags.AddAttributeError(path.Root("previous_catalog_keys").AtListIndex(i), "Invalid Previous Catalog Key",
				fmt.Sprintf("Entry %d: %v. Give the old key as it was set in catalog_key, or for the key Secret "+
					"\"base64:\" followed by its data.key (kubectl get secret %s -o jsonpath='{.data.key}').",
					i+1, err, catalogkey.SecretName))
			continue
		}
		out = append(out, b)
	}
	return out, diags
}
