// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
)

// dnsLabel accepts an RFC 1123 label, the form of namespace and object names
// that also appear in label values.
func dnsLabel() validator.String {
	return stringvalidator.All(
		stringvalidator.LengthBetween(1, 63),
		stringvalidator.RegexMatches(regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`),
			"must be a lowercase RFC 1123 label: letters, digits and '-', starting and ending with a letter or digit"),
	)
}

type urlValidator struct{ schemes []string }

// httpURL accepts an absolute http or https URL.
func httpURL() validator.String { return urlValidator{schemes: []string{"https", "http"}} }

// httpsURL accepts only an absolute https URL.
func httpsURL() validator.String { return urlValidator{schemes: []string{"https"}} }

func (v urlValidator) Description(context.Context) string {
	return "value must be an absolute URL with scheme " + strings.Join(v.schemes, " or ")
}

func (v urlValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v urlValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	s := req.ConfigValue.ValueString()
	u, err := url.Parse(s)
	ok := err == nil && u.Host != ""
	if ok {
		ok = false
		for _, sc := range v.schemes {
			ok = ok || u.Scheme == sc
		}
	}
	if !ok {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid URL",
			fmt.Sprintf("%q is not an absolute URL with scheme %s. Write it as https://HOST[:PORT].", s, strings.Join(v.schemes, " or ")))
	}
}

type pemValidator struct{ blockSuffix string }

// pemBlock accepts PEM text whose first block's type ends with suffix
// ("CERTIFICATE", "PRIVATE KEY").
func pemBlock(suffix string) validator.String { return pemValidator{blockSuffix: suffix} }

func (v pemValidator) Description(context.Context) string {
	return "value must be PEM-encoded text with a " + v.blockSuffix + " block"
}

func (v pemValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v pemValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	block, _ := pem.Decode([]byte(req.ConfigValue.ValueString()))
	if block == nil || !strings.HasSuffix(block.Type, v.blockSuffix) {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid PEM",
			"The value is not PEM-encoded text with a "+v.blockSuffix+" block (-----BEGIN "+v.blockSuffix+"-----). "+
				"Pass the file's content, for example with file(\"ca.crt\"), not its path or base64 of it.")
	}
}
