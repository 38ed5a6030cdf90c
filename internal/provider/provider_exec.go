// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"regexp"

	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// execPluginCredentialsAttribute is the provider's opt-in for the exec
// plugins of kubeconfigs read from the catalog: the only thing that lets
// one run, since a flag in the catalog is anyone's who can write it, and
// its signature anyone's who holds the catalog key: so it pins the content.
func execPluginCredentialsAttribute() schema.MapAttribute {
	return schema.MapAttribute{
		MarkdownDescription: "The `kubeplay_credential`s of kind `kubeconfig` whose kubeconfig may run its `exec` credential " +
			"plugin on the host where Terraform runs: a map from credential name to its `exec_sha256`; the " +
			"credential must also set `allow_exec_plugin`. A plugin that no longer matches is refused, even when " +
			"signed. Take the digest from the credential's owner, not from the catalog. Defaults to none.",
		Optional:    true,
		ElementType: types.StringType,
		Validators: []validator.Map{
			mapvalidator.KeysAre(dnsLabel()),
			mapvalidator.ValueStringsAre(stringvalidator.RegexMatches(regexp.MustCompile(`^[0-9a-f]{64}$`),
				"must be the credential's exec_sha256: 64 lowercase hex digits")),
		},
	}
}

// execPluginCredentials returns the credentials the configuration allows,
// with their pinned digests; one not known yet allows nothing (Configure
// defers connecting then anyway).
func (m *providerModel) execPluginCredentials() map[string]string {
	pins := map[string]string{}
	for name, v := range m.ExecPluginCredentials.Elements() {
		if s, ok := v.(types.String); ok && !s.IsNull() && !s.IsUnknown() {
			pins[name] = s.ValueString()
		}
	}
	return pins
}
