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
