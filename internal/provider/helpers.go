// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/types"
)

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
