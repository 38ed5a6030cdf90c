// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

func validate(v validator.String, s string) string {
	resp := &validator.StringResponse{}
	v.ValidateString(context.Background(), validator.StringRequest{Path: path.Root("x"), ConfigValue: types.StringValue(s)}, resp)
	if resp.Diagnostics.HasError() {
		return resp.Diagnostics.Errors()[0].Detail()
	}
	return ""
}

func TestNodeIDValidator(t *testing.T) {
	for in, wantErr := range map[string]bool{
		"main/debug-node": false, "a/b": false,
		"main": true, "/node": true, "main/": true, "Main/node": true, "main/node/x": true, "main/no_de": true,
	} {
		if got := validate(nodeID(), in); (got != "") != wantErr {
			t.Errorf("nodeID(%q): %q, want an error: %v", in, got, wantErr)
		} else if wantErr && !strings.Contains(got, "kubeplay_node.<name>.id") {
			t.Errorf("nodeID(%q): %q does not say what to pass", in, got)
		}
	}
}

func TestDurationBetween(t *testing.T) {
	v := durationBetween(10*time.Minute, 48*time.Hour)
	for in, wantErr := range map[string]bool{
		"10m": false, "1h": false, "48h": false, "90m": false,
		"9m59s": true, "48h1s": true, "-1h": true, "1d": true, "": true,
	} {
		if got := validate(v, in); (got != "") != wantErr {
			t.Errorf("durationBetween(%q): %q, want an error: %v", in, got, wantErr)
		} else if wantErr && !strings.Contains(got, "from 10m to 48h") {
			t.Errorf("durationBetween(%q): %q does not give the range", in, got)
		}
	}
}

// The kubeconfig is the token's carrier: sensitive even where Terraform
// shows ephemeral values (the console, a provider's log of its config).
func TestNodeKubeconfigSchema(t *testing.T) {
	var resp ephemeral.SchemaResponse
	newNodeKubeconfigEphemeral().Schema(context.Background(), ephemeral.SchemaRequest{}, &resp)
	if a := resp.Schema.Attributes["kubeconfig"]; a == nil || !a.IsSensitive() || !a.IsComputed() {
		t.Fatalf("kubeconfig: %#v, want computed and sensitive", a)
	}
	for name, a := range resp.Schema.Attributes {
		if d := a.GetMarkdownDescription(); !strings.HasSuffix(strings.TrimSpace(d), ".") {
			t.Errorf("%s: description %q is not a full sentence", name, d)
		}
	}
}
