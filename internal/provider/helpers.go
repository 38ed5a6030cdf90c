// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// getter reads a plan, state or config into a model.
type getter func(context.Context, any) diag.Diagnostics

type stateSetter interface {
	Set(context.Context, any) diag.Diagnostics
}

func stringOrNull(s string) types.String {
	if s == "" {
		return types.StringNull()
	}
	return types.StringValue(s)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func contains(list []string, s string) bool { return slices.Contains(list, s) }

func listOrNone(list []string) string {
	if len(list) == 0 {
		return "no kind-specific attribute"
	}
	return strings.Join(list, ", ")
}
