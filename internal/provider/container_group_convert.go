// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// Conversions between Terraform values and the Go values kubeplay stores,
// shared by container groups and node labels. Null maps to nil and back, and
// an empty map stays empty, so that what is read back equals what was written.

func ptrInt64(v types.Int64) *int64 {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	x := v.ValueInt64()
	return &x
}

func nullableInt64(p *int64) types.Int64 {
	if p == nil {
		return types.Int64Null()
	}
	return types.Int64Value(*p)
}

func ptrBool(v types.Bool) *bool {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	x := v.ValueBool()
	return &x
}

func nullableBool(p *bool) types.Bool {
	if p == nil {
		return types.BoolNull()
	}
	return types.BoolValue(*p)
}

func goStringMap(ctx context.Context, v types.Map, diags *diag.Diagnostics) map[string]string {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	out := map[string]string{}
	diags.Append(v.ElementsAs(ctx, &out, false)...)
	return out
}

// goStrings is a list of strings, nil when null or unknown.
func goStrings(ctx context.Context, v types.List, diags *diag.Diagnostics) []string {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	var out []string
	diags.Append(v.ElementsAs(ctx, &out, false)...)
	return out
}

func nullableStringMap(ctx context.Context, m map[string]string, diags *diag.Diagnostics) types.Map {
	if m == nil {
		return types.MapNull(types.StringType)
	}
	v, d := types.MapValueFrom(ctx, types.StringType, m)
	diags.Append(d...)
	return v
}

func goInt64Map(ctx context.Context, v types.Map, diags *diag.Diagnostics) map[string]int64 {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	m := map[string]int64{}
	diags.Append(v.ElementsAs(ctx, &m, false)...)
	return m
}

func nullableInt64Map(ctx context.Context, m map[string]int64, diags *diag.Diagnostics) types.Map {
	if m == nil {
		return types.MapNull(types.Int64Type)
	}
	v, d := types.MapValueFrom(ctx, types.Int64Type, m)
	diags.Append(d...)
	return v
}
