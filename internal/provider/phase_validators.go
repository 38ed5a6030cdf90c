// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/phase"
)

// duration accepts a Go duration of zero or more.
func duration() validator.String {
	return stringCheck{
		desc: "must be a duration such as 90s, 5m or 1h30m, zero or more",
		check: func(path, s string) (string, string) {
			if d, err := time.ParseDuration(s); err == nil && d >= 0 {
				return "", ""
			}
			return "Invalid Duration", fmt.Sprintf("%s must be a duration such as 90s, 5m or 1h30m, zero or more; got %q.", path, s)
		},
	}
}

// jsonPath accepts a kubectl-style JSONPath expression.
func jsonPath() validator.String {
	return stringCheck{
		desc: "must be a JSONPath expression such as {.status.phase}",
		check: func(path, s string) (string, string) {
			if _, err := phase.ParseJSONPath(s); err != nil {
				return "Invalid JSONPath", fmt.Sprintf("%s must be a JSONPath expression such as {.status.phase}, as kubectl wait "+
					"--for=jsonpath takes: %v.", path, err)
			}
			return "", ""
		},
	}
}
