// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/phase"
)

// durationValidator accepts a Go duration of zero or more.
type durationValidator struct{}

func duration() validator.String { return durationValidator{} }

func (durationValidator) Description(context.Context) string {
	return "must be a duration such as 90s, 5m or 1h30m, zero or more"
}

func (v durationValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (durationValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	d, err := time.ParseDuration(req.ConfigValue.ValueString())
	if err != nil || d < 0 {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid Duration",
			fmt.Sprintf("%s must be a duration such as 90s, 5m or 1h30m, zero or more; got %q.", req.Path, req.ConfigValue.ValueString()))
	}
}

// jsonPathValidator accepts a kubectl-style JSONPath expression.
type jsonPathValidator struct{}

func jsonPath() validator.String { return jsonPathValidator{} }

func (jsonPathValidator) Description(context.Context) string {
	return "must be a JSONPath expression such as {.status.phase}"
}

func (v jsonPathValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (jsonPathValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if _, err := phase.ParseJSONPath(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid JSONPath",
			fmt.Sprintf("%s must be a JSONPath expression such as {.status.phase}, as kubectl wait --for=jsonpath takes: %v.", req.Path, err))
	}
}
