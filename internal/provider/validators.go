// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
)

// stringCheck is a string validator made of a description and a check that
// returns the summary and detail of the error for a bad value ("" if good).
// The check gets the attribute path, for details that name it.
type stringCheck struct {
	desc  string
	check func(path, value string) (summary, detail string)
}

var _ validator.String = stringCheck{}

func (c stringCheck) Description(context.Context) string { return c.desc }

func (c stringCheck) MarkdownDescription(context.Context) string { return c.desc }

func (c stringCheck) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if summary, detail := c.check(req.Path.String(), req.ConfigValue.ValueString()); summary != "" {
		resp.Diagnostics.AddAttributeError(req.Path, summary, detail)
	}
}

// dnsLabel accepts an RFC 1123 label, the form of namespace and object names
// that also appear in label values.
func dnsLabel() validator.String {
	return stringvalidator.All(
		stringvalidator.LengthBetween(1, 63),
		stringvalidator.RegexMatches(regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`),
			"must be a lowercase RFC 1123 label: letters, digits and '-', starting and ending with a letter or digit"),
	)
}

// pythonPath accepts a node label's python_path (bundle.PythonPathPattern):
// it goes into an INI inventory line as one value.
func pythonPath() validator.String {
	return stringvalidator.RegexMatches(bundle.PythonPathPattern, "must be an absolute path without whitespace, "+
		"quotes, backslashes or '#' (such as /usr/bin/python3.11), or one of auto, auto_silent, auto_legacy and "+
		"auto_legacy_silent")
}

// httpURL accepts an absolute http or https URL.
func httpURL() validator.String { return urlCheck("https", "http") }

// httpsURL accepts only an absolute https URL.
func httpsURL() validator.String { return urlCheck("https") }

func urlCheck(schemes ...string) stringCheck {
	list := strings.Join(schemes, " or ")
	return stringCheck{
		desc: "value must be an absolute URL with scheme " + list,
		check: func(_, s string) (string, string) {
			u, err := url.Parse(s)
			if err == nil && u.Host != "" && slices.Contains(schemes, u.Scheme) {
				return "", ""
			}
			return "Invalid URL", fmt.Sprintf("%q is not an absolute URL with scheme %s. Write it as https://HOST[:PORT].", s, list)
		},
	}
}

// pemBlock accepts PEM text whose first block's type ends with suffix
// ("CERTIFICATE", "PRIVATE KEY").
func pemBlock(suffix string) validator.String {
	return stringCheck{
		desc: "value must be PEM-encoded text with a " + suffix + " block",
		check: func(_, s string) (string, string) {
			if block, _ := pem.Decode([]byte(s)); block != nil && strings.HasSuffix(block.Type, suffix) {
				return "", ""
			}
			return "Invalid PEM", "The value is not PEM-encoded text with a " + suffix + " block (-----BEGIN " + suffix + "-----). " +
				"Pass the file's content, for example with file(\"ca.crt\"), not its path or base64 of it."
		},
	}
}
