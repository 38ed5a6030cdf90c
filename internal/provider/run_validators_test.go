// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"math/big"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

func TestExtraVarsJSON(t *testing.T) {
	obj := func(attrs map[string]attr.Value) types.Object {
		ts := map[string]attr.Type{}
		for k, v := range attrs {
			ts[k] = v.Type(t.Context())
		}
		return types.ObjectValueMust(ts, attrs)
	}
	big20, _ := new(big.Float).SetPrec(512).SetString("12345678901234567890")
	tuple := types.TupleValueMust([]attr.Type{types.NumberType, types.StringType},
		[]attr.Value{types.NumberValue(big.NewFloat(1)), types.StringValue("a")})
	for _, c := range []struct {
		name    string
		in      attr.Value
		want    string
		wantErr string
	}{
		{"object", obj(map[string]attr.Value{
			"s": types.StringValue("x"), "n": types.NumberValue(big.NewFloat(0.25)), "big": types.NumberValue(big20),
			"b": types.BoolValue(true), "null": types.StringNull(), "t": tuple,
			"o": obj(map[string]attr.Value{"k": types.StringValue("v")}),
		}), `{"b":true,"big":12345678901234567890,"n":0.25,"null":null,"o":{"k":"v"},"s":"x","t":[1,"a"]}`, ""},
		{"map", types.MapValueMust(types.StringType, map[string]attr.Value{"a": types.StringValue("1")}), `{"a":"1"}`, ""},
		{"json string kept verbatim", types.StringValue(`{"a": [1, 2]}`), `{"a": [1, 2]}`, ""},
		{"json array string", types.StringValue(`[1, 2]`), "", "not a JSON object"},
		{"null json", types.StringValue(`null`), "", "not a JSON object"},
		{"tuple", tuple, "", "is a tuple"},
		{"number", types.NumberValue(big.NewFloat(1)), "", "not an object"},
		{"unknown inside", obj(map[string]attr.Value{"a": types.StringUnknown()}), "", "known only at apply"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := extraVarsJSON(types.DynamicValue(c.in))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil || string(got) != c.want {
				t.Fatalf("got %s, %v; want %s", got, err, c.want)
			}
		})
	}
}

// TestAnsibleListItem: an element holding a comma is refused with its path,
// and the elements it would split into as the fix.
func TestAnsibleListItem(t *testing.T) {
	for _, c := range []struct {
		kind, in, summary, detail string
	}{
		{"tag", "deploy", "", ""},
		{"tag", "two words", "", ""},
		{"tag", "", "", ""}, // stringvalidator.LengthAtLeast's
		{"host pattern", "web:!db", "", ""},
		{"host pattern", "~(web|db)[0-9]+", "", ""},
		{"tag", "a,b", "Invalid Tag", `x[0] is "a,b", but Ansible splits tags on commas, so it would not be one tag. ` +
			`Write each tag as an element of its own: ["a", "b"].`},
		{"host pattern", "web, !db,", "Invalid Host Pattern", `x[0] is "web, !db,", but Ansible splits host patterns on ` +
			`commas, so it would not be one host pattern. Write each host pattern as an element of its own: ["web", "!db"].`},
		{"tag", ",", "Invalid Tag", `x[0] is ",", but Ansible splits tags on commas, so it would not be one tag. Remove the element.`},
		{"tag", "a\x00", "Invalid Tag", "x[0] holds a NUL byte, which no command line can. Remove it."},
	} {
		summary, detail := ansibleListItem(c.kind).check("x[0]", c.in)
		if summary != c.summary || detail != c.detail {
			t.Errorf("%s %q: got %q, %q; want %q, %q", c.kind, c.in, summary, detail, c.summary, c.detail)
		}
	}
}
