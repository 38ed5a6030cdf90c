// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/outputtail"
)

// Secrets returns the values to redact from a run's output, in every form a
// playbook may print them: the leaf values of its secret variables (numbers
// as Python prints them, strings raw and JSON-escaped) and its secret
// environment's values, its SSH keys (line by line) and vault passwords. A secret variables document that is not JSON is
// redacted whole.
func Secrets(b bundle.Bundle) []string {
	var out []string
	if len(b.SecretVars) > 0 {
		out = append(out, outputtail.SecretValues(string(b.SecretVars))...)
	}
	for _, k := range managed.SortedKeys(b.SecretEnv) {
		out = append(out, outputtail.SecretForms(b.SecretEnv[k])...)
	}
	for _, v := range b.SecretStrings() {
		out = append(out, outputtail.SecretForms(v)...)
	}
	return out
}
