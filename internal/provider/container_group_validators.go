// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
)

// Validators shared by kubeplay_container_group and kubeplay_node_label.

// k8sQuantity accepts a non-negative Kubernetes quantity ("500m", "2", "1Gi").
func k8sQuantity() validator.String {
	return stringCheck{
		desc: "value must be a non-negative Kubernetes quantity",
		check: func(path, s string) (string, string) {
			if _, err := podspec.ParseQuantity(s); err != nil {
				return "Invalid Quantity", fmt.Sprintf("%s: %s. Write a non-negative Kubernetes quantity.", path, err)
			}
			return "", ""
		},
	}
}

type k8sQuantityMapValidator struct{ keys string }

// quantityMap accepts a map of resource names to non-negative quantities;
// keys is "quota" for ResourceQuota names, "resource" for container resources.
func k8sQuantityMap(keys string) validator.Map { return k8sQuantityMapValidator{keys: keys} }

func (v k8sQuantityMapValidator) Description(context.Context) string {
	return "keys must be " + v.keys + " resource names and values non-negative Kubernetes quantities"
}

func (v k8sQuantityMapValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (v k8sQuantityMapValidator) ValidateMap(_ context.Context, req validator.MapRequest, resp *validator.MapResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	for k, e := range req.ConfigValue.Elements() {
		p := req.Path.AtMapKey(k)
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			resp.Diagnostics.AddAttributeError(p, "Invalid Resource Name",
				fmt.Sprintf("%q is not a valid %s resource name: %s.", k, v.keys, strings.Join(errs, "; ")))
		}
		s, ok := e.(types.String)
		if !ok || s.IsNull() || s.IsUnknown() {
			continue
		}
		if _, err := podspec.ParseQuantity(s.ValueString()); err != nil {
			resp.Diagnostics.AddAttributeError(p, "Invalid Quantity",
				fmt.Sprintf("%s: %s. Write a non-negative Kubernetes quantity.", p, err))
		}
	}
}

type k8sMetadataMapValidator struct{ annotations bool }

// labelMap checks Kubernetes label keys and values; annotationMap only keys.
func k8sLabelMap() validator.Map      { return k8sMetadataMapValidator{} }
func k8sAnnotationMap() validator.Map { return k8sMetadataMapValidator{annotations: true} }

func (v k8sMetadataMapValidator) Description(context.Context) string {
	if v.annotations {
		return "keys must be valid Kubernetes annotation keys"
	}
	return "keys and values must be valid Kubernetes label keys and values"
}

func (v k8sMetadataMapValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (v k8sMetadataMapValidator) ValidateMap(_ context.Context, req validator.MapRequest, resp *validator.MapResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	for k, e := range req.ConfigValue.Elements() {
		p := req.Path.AtMapKey(k)
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			resp.Diagnostics.AddAttributeError(p, "Invalid Metadata Key",
				fmt.Sprintf("%q is not a valid Kubernetes label or annotation key: %s.", k, strings.Join(errs, "; ")))
		}
		s, ok := e.(types.String)
		if v.annotations || !ok || s.IsNull() || s.IsUnknown() {
			continue
		}
		if errs := validation.IsValidLabelValue(s.ValueString()); len(errs) > 0 {
			resp.Diagnostics.AddAttributeError(p, "Invalid Label Value",
				fmt.Sprintf("%q is not a valid Kubernetes label value: %s.", s.ValueString(), strings.Join(errs, "; ")))
		}
	}
}

// groupDuration accepts a Go duration greater than zero ("5m", "90s").
func groupDuration() validator.String {
	return stringCheck{
		desc: "value must be a positive duration such as 90s or 5m",
		check: func(_, s string) (string, string) {
			if d, err := time.ParseDuration(s); err == nil && d > 0 {
				return "", ""
			}
			return "Invalid Duration", fmt.Sprintf("%q is not a positive duration. Write it as a number with a unit: 90s, 5m, 1h30m.", s)
		},
	}
}

// defaultDisconnectGrace is disconnect_grace_period's default, and what a
// group stored before the attribute reads as: the pod's own default.
var defaultDisconnectGrace = bundle.DefaultLeaseGrace.String()

// graceDuration checks disconnect_grace_period: long enough for a few
// beats, short enough that an abandoned run does not hold its pod for long.
func graceDuration() validator.String {
	return stringCheck{
		desc: "value must be a duration from 10s to 1h",
		check: func(_, s string) (string, string) {
			d, err := time.ParseDuration(s)
			if err == nil && d >= bundle.MinLeaseGrace && d <= time.Hour {
				return "", ""
			}
			return "Invalid Disconnect Grace Period", fmt.Sprintf("%q is not a duration from 10s to 1h. The pod must hear from "+
				"the provider (a beat every 5 seconds) for at least 10 seconds to tell a short cut from a gone provider. "+
				"Write it as a number with a unit: 30s, 2m.", s)
		},
	}
}

// workspaceRemedy says how to label runs with the workspace.
const workspaceRemedy = "Terraform does not tell providers which workspace is selected, so a run cannot fill " +
	"{run.workspace} (after terraform workspace select it would still read \"default\"). Pass the workspace from " +
	"the configuration instead: labels = { workspace = terraform.workspace }, or in a template, " +
	"dynamic_labels = { id = \"${terraform.workspace}-{run.id}\" }."

type labelTemplateMapValidator struct{}

// templateMap checks dynamic label templates' placeholders.
func labelTemplateMap() validator.Map { return labelTemplateMapValidator{} }

func (labelTemplateMapValidator) Description(context.Context) string {
	return "values must be templates whose placeholders are {" + strings.Join(podspec.Placeholders, "}, {") + "}"
}

func (v labelTemplateMapValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (labelTemplateMapValidator) ValidateMap(_ context.Context, req validator.MapRequest, resp *validator.MapResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	for k, e := range req.ConfigValue.Elements() {
		p := req.Path.AtMapKey(k)
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			resp.Diagnostics.AddAttributeError(p, "Invalid Metadata Key",
				fmt.Sprintf("%q is not a valid Kubernetes label key: %s.", k, strings.Join(errs, "; ")))
		}
		s, ok := e.(types.String)
		if !ok || s.IsNull() || s.IsUnknown() {
			continue
		}
		switch err := podspec.ValidateTemplate(s.ValueString()); {
		case errors.Is(err, podspec.ErrWorkspacePlaceholder):
			resp.Diagnostics.AddAttributeError(p, "Workspace Placeholder Not Supported", fmt.Sprintf("%q uses "+
				"{run.workspace}. %s", s.ValueString(), workspaceRemedy))
		case err != nil:
			resp.Diagnostics.AddAttributeError(p, "Invalid Label Template", err.Error()+".")
		}
	}
}
