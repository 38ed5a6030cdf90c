// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"encoding/json"

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
)

// runFilePath accepts a path that bundle.ValidatePath accepts.
type runFilePath struct{}

func (runFilePath) Description(context.Context) string {
	return "value must be a clean relative path inside the run's bundle"
}
func (v runFilePath) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (runFilePath) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if err := bundle.ValidatePath(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid File Path", err.Error()+".")
	}
}

// envName accepts an environment variable name.
type envName struct{}

func (envName) Description(context.Context) string {
	return "value must be an environment variable name: letters, digits and _, not starting with a digit"
}
func (v envName) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (envName) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if err := bundle.ValidateEnvName(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid Environment Variable Name", err.Error()+".")
	}
}

// jsonObject accepts a JSON object.
type jsonObject struct{}

func (jsonObject) Description(context.Context) string               { return "value must be a JSON object" }
func (v jsonObject) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (jsonObject) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(req.ConfigValue.ValueString()), &obj); err != nil || obj == nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid Extra Variables",
			"The value is not a JSON object. Write it with jsonencode({ name = \"value\" }).")
	}
}
