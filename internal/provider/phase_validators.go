// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"fmt"
	"strings"
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

// durationBetween accepts a Go duration from lo to hi.
func durationBetween(lo, hi time.Duration) validator.String {
	want := fmt.Sprintf("a duration from %s to %s, such as 30m or 2h", short(lo), short(hi))
	return stringCheck{
		desc: "must be " + want,
		check: func(path, s string) (string, string) {
			if d, err := time.ParseDuration(s); err == nil && d >= lo && d <= hi {
				return "", ""
			}
			return "Invalid Duration", fmt.Sprintf("%s must be %s; got %q.", path, want, s)
		},
	}
}

// short writes d without zero minutes and seconds: 10m, 48h.
func short(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
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
