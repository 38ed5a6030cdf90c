// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"slices"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// TestProviderExecBlockSchema: the exec block is optional, and api_version
// and command must be set when it is present. The framework checks Required
// attributes of a single nested block also when the block is absent (its
// value is then null), so marking them Required would make every provider
// configuration without an exec block an error; ValidateConfig requires
// them instead.
func TestProviderExecBlockSchema(t *testing.T) {
	ctx := context.Background()
	srv := providerserver.NewProtocol6(New("test")())()
	sch, err := srv.GetProviderSchema(ctx, &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	typ, ok := sch.Provider.ValueType().(tftypes.Object)
	if !ok {
		t.Fatalf("the provider schema's type is %T, not an object", sch.Provider.ValueType())
	}
	execType, ok := typ.AttributeTypes["exec"].(tftypes.Object)
	if !ok {
		t.Fatalf("the exec block's type is %T, not an object", typ.AttributeTypes["exec"])
	}
	validate := func(exec tftypes.Value) []string {
		vals := map[string]tftypes.Value{}
		for k, at := range typ.AttributeTypes {
			vals[k] = tftypes.NewValue(at, nil)
		}
		vals["exec"] = exec
		dv, err := tfprotov6.NewDynamicValue(typ, tftypes.NewValue(typ, vals))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := srv.ValidateProviderConfig(ctx, &tfprotov6.ValidateProviderConfigRequest{Config: &dv})
		if err != nil {
			t.Fatal(err)
		}
		var summaries []string
		for _, d := range resp.Diagnostics {
			if d.Severity == tfprotov6.DiagnosticSeverityError {
				summaries = append(summaries, d.Summary)
			}
		}
		return summaries
	}
	execWith := func(apiVersion, command any) tftypes.Value {
		vals := map[string]tftypes.Value{}
		for k, at := range execType.AttributeTypes {
			vals[k] = tftypes.NewValue(at, nil)
		}
		vals["api_version"] = tftypes.NewValue(tftypes.String, apiVersion)
		vals["command"] = tftypes.NewValue(tftypes.String, command)
		return tftypes.NewValue(execType, vals)
	}

	if errs := validate(tftypes.NewValue(execType, nil)); len(errs) > 0 {
		t.Errorf("a configuration without an exec block: errors %q, want none", errs)
	}
	if errs := validate(execWith(nil, nil)); !slices.Equal(errs, []string{"Missing Exec Command", "Missing Exec API Version"}) {
		t.Errorf("an exec block without api_version and command: errors %q, want the two Missing Exec errors", errs)
	}
	if errs := validate(execWith("client.authentication.k8s.io/v1", "aws")); len(errs) > 0 {
		t.Errorf("an exec block with api_version and command: errors %q, want none", errs)
	}
}
