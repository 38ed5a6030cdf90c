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
			"`exec` credential plugin on the host where Terraform runs. Defaults to none. A kubeconfig that kubeplay reads " +
			"back from the catalog is cluster data: whoever can write Secrets in `catalog_namespace` can change it, and an " +
			"exec plugin is a program that the provider runs on this host with Terraform's privileges whenever it connects. " +
			"So an exec plugin in a credential read from the catalog runs only when the credential's definition sets " +
			"`allow_exec_plugin = true` and its name is listed here; any other credential whose kubeconfig has an `exec` " +
			"user is refused. List a credential only when you trust everyone who can write Secrets in `catalog_namespace` " +
			"to run commands on this host, and when its command exists here (such as `aws eks get-token`). Kubeconfigs of " +
			"`cluster_api` credentials never run exec plugins, whatever this lists. The provider's own `exec` block is " +
			"written in this configuration and is not affected.",
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
