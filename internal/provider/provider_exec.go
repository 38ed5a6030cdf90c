// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"github.com/hashicorp/terraform-plugin-framework-validators/setvalidator"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// execPluginCredentialsAttribute is the provider's opt-in for the exec
// plugins of kubeconfigs read from the catalog: the only thing that lets
// one run, since a flag in the catalog is anyone's who can write it.
func execPluginCredentialsAttribute() schema.SetAttribute {
	return schema.SetAttribute{
		MarkdownDescription: "The names of `kubeplay_credential`s of kind `kubeconfig` whose kubeconfig may run its " +
			"`exec` credential plugin, a program, on the host where Terraform runs; the credential must also set " +
			"`allow_exec_plugin`. Defaults to none. Whoever can write Secrets in `catalog_namespace` can change a " +
			"credential's kubeconfig, so list one only if you trust them to run commands on this host, and only if its " +
			"command exists here (such as `aws eks get-token`). `cluster_api` credentials never run exec plugins, and " +
			"the provider's own `exec` block is not affected.",
		Optional:    true,
		ElementType: types.StringType,
		Validators:  []validator.Set{setvalidator.ValueStringsAre(dnsLabel())},
	}
}

// execPluginCredentials returns the names the configuration lists; a name
// not known yet allows nothing (Configure defers connecting then anyway).
func (m *providerModel) execPluginCredentials() []string {
	var names []string
	for _, v := range m.ExecPluginCredentials.Elements() {
		if s, ok := v.(types.String); ok && !s.IsNull() && !s.IsUnknown() {
			names = append(names, s.ValueString())
		}
	}
	return names
}
