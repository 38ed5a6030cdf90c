// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/outputtail"
)

// runFilePath accepts a path that bundle.ValidatePath accepts.
func runFilePath() stringCheck {
	return stringCheck{
		desc: "value must be a clean relative path inside the run's bundle",
		check: func(_, s string) (string, string) {
			if err := bundle.ValidatePath(s); err != nil {
				return "Invalid File Path", err.Error() + "."
			}
			return "", ""
		},
	}
}

// envName accepts an environment variable name.
func envName() stringCheck {
	return stringCheck{
		desc: "value must be an environment variable name: letters, digits and _, not starting with a digit",
		check: func(_, s string) (string, string) {
			if err := bundle.ValidateEnvName(s); err != nil {
				return "Invalid Environment Variable Name", err.Error() + "."
			}
			return "", ""
		},
	}
}

// jsonObject accepts a JSON object.
func jsonObject() stringCheck {
	return stringCheck{
		desc: "value must be a JSON object",
		check: func(_, s string) (string, string) {
			var obj map[string]any
			if err := json.Unmarshal([]byte(s), &obj); err != nil || obj == nil {
				return "Invalid Extra Variables", "The value is not a JSON object. Write it with jsonencode({ name = \"value\" })."
			}
			if err := bundle.ValidateVars([]byte(s)); err != nil {
				return "Invalid Extra Variables", err.Error() + ". Set each variable once."
			}
			return "", ""
		},
	}
}

// redactableSecret accepts a write-only secret that output redaction can
// hide: none of its lines may be 1 or 2 bytes long.
func redactableSecret() stringCheck {
	return stringCheck{
		desc: fmt.Sprintf("value must be empty or at least %d bytes long (each line of it)", outputtail.MinSecret),
		check: func(_, s string) (string, string) {
			if outputtail.ShortSecret(s) {
				return "Secret Too Short To Redact", fmt.Sprintf("The value (or a line of it) is shorter than %d bytes: "+
					"kubeplay does not redact values that short from the run's output, since they would blank out "+
					"ordinary text, so it could show in output, logs and state. Use a longer secret.", outputtail.MinSecret)
			}
			return "", ""
		},
	}
}

// redactableVars accepts secret extra variables whose string and number
// values output redaction can hide.
func redactableVars() stringCheck {
	return stringCheck{
		desc: fmt.Sprintf("string and number values must be empty or at least %d bytes long", outputtail.MinSecret),
		check: func(_, s string) (string, string) {
			if at := outputtail.ShortSecretValue(s); at != "" {
				return "Secret Too Short To Redact", fmt.Sprintf("The value of %q (or a line of it) is shorter than %d "+
					"bytes: kubeplay does not redact values that short from the run's output, since they would blank "+
					"out ordinary text, so it could show in output, logs and state. Use a longer value, or pass a "+
					"value that is not secret in extra_vars.", at, outputtail.MinSecret)
			}
			return "", ""
		},
	}
}

// inventoryText accepts an inventory that Ansible reads without silently
// dropping a duplicated key.
func inventoryText() stringCheck {
	return stringCheck{
		desc: "value must be an INI or YAML inventory; a YAML inventory may not set a key twice in one mapping",
		check: func(_, s string) (string, string) {
			if err := bundle.ValidateInventory(s); err != nil {
				return "Invalid Inventory", err.Error() + ". Ansible would keep only the last value: set each key once."
			}
			return "", ""
		},
	}
}

// extraVarsValidator accepts what extraVarsJSON can encode.
type extraVarsValidator struct{}

var _ validator.Dynamic = extraVarsValidator{}

func extraVars() extraVarsValidator { return extraVarsValidator{} }

func (extraVarsValidator) Description(context.Context) string {
	return "value must be an object or a map, or a string holding a JSON object"
}

func (v extraVarsValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (extraVarsValidator) ValidateDynamic(_ context.Context, req validator.DynamicRequest, resp *validator.DynamicResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() || req.ConfigValue.IsUnderlyingValueUnknown() {
		return
	}
	if _, err := extraVarsJSON(req.ConfigValue); err != nil && !errors.Is(err, errUnknownValue) {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid Extra Variables", err.Error())
	}
}

var errUnknownValue = errors.New("the value is known only at apply")

// extraVarsJSON encodes extra variables as the JSON object ansible-playbook
// reads: an object or map is encoded, a string must already be one.
func extraVarsJSON(v types.Dynamic) ([]byte, error) {
	switch u := v.UnderlyingValue().(type) {
	case types.String:
		var obj map[string]any
		if err := json.Unmarshal([]byte(u.ValueString()), &obj); err != nil || obj == nil {
			return nil, errors.New("the string is not a JSON object. Give an object, such as { env = \"prod\" }, " +
				"or a JSON object string, such as jsonencode({ env = \"prod\" })")
		}
		if err := bundle.ValidateVars([]byte(u.ValueString())); err != nil {
			return nil, fmt.Errorf("%w. Set each variable once", err)
		}
		return []byte(u.ValueString()), nil
	case types.Object, types.Map:
		x, err := goValue(u)
		if err != nil {
			return nil, err
		}
		return json.Marshal(x)
	default:
		return nil, fmt.Errorf("the value is %s, not an object. Give an object, such as { env = \"prod\" }, or a "+
			"JSON object string", kindOf(v.UnderlyingValue()))
	}
}

// goValue turns a Terraform value into what encoding/json encodes the same
// way; numbers keep their exact decimal text.
func goValue(v attr.Value) (any, error) {
	if v == nil || v.IsNull() {
		return nil, nil
	}
	if v.IsUnknown() {
		return nil, errUnknownValue
	}
	list := func(elems []attr.Value) (any, error) {
		out := make([]any, 0, len(elems))
		for _, e := range elems {
			x, err := goValue(e)
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		return out, nil
	}
	object := func(attrs map[string]attr.Value) (any, error) {
		out := make(map[string]any, len(attrs))
		for k, e := range attrs {
			x, err := goValue(e)
			if err != nil {
				return nil, err
			}
			out[k] = x
		}
		return out, nil
	}
	switch x := v.(type) {
	case basetypes.StringValue:
		return x.ValueString(), nil
	case basetypes.BoolValue:
		return x.ValueBool(), nil
	case basetypes.NumberValue:
		f := x.ValueBigFloat()
		if f.IsInt() {
			i, _ := f.Int(nil)
			return json.Number(i.String()), nil
		}
		return json.Number(f.Text('g', -1)), nil
	case basetypes.Int64Value:
		return x.ValueInt64(), nil
	case basetypes.Float64Value:
		return x.ValueFloat64(), nil
	case basetypes.ListValue:
		return list(x.Elements())
	case basetypes.SetValue:
		return list(x.Elements())
	case basetypes.TupleValue:
		return list(x.Elements())
	case basetypes.MapValue:
		return object(x.Elements())
	case basetypes.ObjectValue:
		return object(x.Attributes())
	case basetypes.DynamicValue:
		return goValue(x.UnderlyingValue())
	}
	return nil, fmt.Errorf("values of type %s cannot be extra variables", v.Type(context.Background()))
}

// kindOf names a value's type as Terraform's documentation does.
func kindOf(v attr.Value) string {
	switch v.(type) {
	case basetypes.NumberValue, basetypes.Int64Value, basetypes.Float64Value:
		return "a number"
	case basetypes.BoolValue:
		return "a bool"
	case basetypes.ListValue:
		return "a list"
	case basetypes.SetValue:
		return "a set"
	case basetypes.TupleValue:
		return "a tuple"
	}
	return "of type " + v.Type(context.Background()).String()
}

// ansibleListAttribute is limit, tags or skip_tags: a list whose elements
// reach ansible-playbook joined by commas, each a kind ("tag"); unset says
// what happens without it.
func ansibleListAttribute(kind, desc, unset string) schema.ListAttribute {
	return schema.ListAttribute{
		MarkdownDescription: desc + " " + unset,
		Optional:            true, ElementType: types.StringType,
		PlanModifiers: []planmodifier.List{listplanmodifier.RequiresReplace()},
		Validators: []validator.List{listvalidator.SizeAtLeast(1),
			listvalidator.ValueStringsAre(stringvalidator.LengthAtLeast(1), ansibleListItem(kind))},
	}
}

// ansibleListItem accepts one element of limit, tags or skip_tags that
// bundle.ValidateListItem accepts; an empty one is LengthAtLeast's to report.
func ansibleListItem(kind string) stringCheck {
	words := strings.Fields(kind)
	for i, w := range words {
		words[i] = strings.ToUpper(w[:1]) + w[1:]
	}
	summary := "Invalid " + strings.Join(words, " ")
	return stringCheck{
		desc: "value must be a single " + kind + ", without a comma",
		check: func(at, s string) (string, string) {
			switch {
			case s == "":
				return "", ""
			case strings.Contains(s, ","):
				var parts []string
				for p := range strings.SplitSeq(s, ",") {
					if p = strings.TrimSpace(p); p != "" {
						parts = append(parts, fmt.Sprintf("%q", p))
					}
				}
				fix := fmt.Sprintf("Write each %s as an element of its own: [%s].", kind, strings.Join(parts, ", "))
				if len(parts) == 0 {
					fix = "Remove the element."
				}
				return summary, fmt.Sprintf("%s is %q, but Ansible splits %ss on commas, so it would not be one %s. %s",
					at, s, kind, kind, fix)
			case bundle.ValidateListItem(s) != nil:
				return summary, fmt.Sprintf("%s holds a NUL byte, which no command line can. Remove it.", at)
			}
			return "", ""
		},
	}
}

// moduleName accepts an Ansible module's short or fully qualified name.
func moduleName() stringCheck {
	return stringCheck{
		desc: "value must be an Ansible module name, such as ping or ansible.builtin.ping",
		check: func(_, s string) (string, string) {
			if err := bundle.ValidateModuleName(s); err != nil {
				return "Invalid Module Name", err.Error() + "."
			}
			return "", ""
		},
	}
}

// hostPattern accepts an Ansible host pattern on one line.
func hostPattern() stringCheck {
	return stringCheck{
		desc: "value must be an Ansible host pattern, such as all or webservers:!web3",
		check: func(_, s string) (string, string) {
			if err := bundle.ValidateHostPattern(s); err != nil {
				return "Invalid Host Pattern", err.Error() + "."
			}
			return "", ""
		},
	}
}
