// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"errors"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
)

// catalogGetter is the catalog.Store method that reads one kind of definition,
// such as (*catalog.Store).GetGroup.
type catalogGetter[T any] func(*catalog.Store, context.Context, string) (catalog.Entry[T], error)

// readForResource reads a definition for a resource's Read. ok is false when
// the caller should stop: the definition is gone (and removed from the
// state, so the next plan creates it again) or the read failed (diagnosed).
func readForResource[T any](ctx context.Context, d *providerData, kind catalog.Kind, name string, get catalogGetter[T], resp *resource.ReadResponse) (catalog.Entry[T], bool) {
	store := d.catalogReader(&resp.Diagnostics)
	if store == nil {
		return catalog.Entry[T]{}, false
	}
	e, err := get(store, ctx, name)
	if errors.Is(err, catalog.ErrNotFound) {
		tflog.Info(ctx, "the "+string(kind)+" is gone from the catalog; removing it from state", map[string]any{"name": name})
		resp.State.RemoveResource(ctx)
		return e, false
	}
	if err != nil {
		addCatalogError(&resp.Diagnostics, err)
		return e, false
	}
	return e, true
}

// readForDataSource reads a definition for a data source through get, a
// Trusted getter: a missing definition is an error, and so is one changed
// outside kubeplay.
func readForDataSource[T any](ctx context.Context, d *providerData, kind catalog.Kind, name string, get catalogGetter[T], diags *diag.Diagnostics) (catalog.Entry[T], bool) {
	store := d.catalogReader(diags)
	if store == nil {
		return catalog.Entry[T]{}, false
	}
	e, err := get(store, ctx, name)
	if errors.Is(err, catalog.ErrNotFound) {
		addNotFound(diags, kind, name, store.Namespace())
		return e, false
	}
	if err != nil {
		addCatalogError(diags, err)
		return e, false
	}
	return e, true
}
