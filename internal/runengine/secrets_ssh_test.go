// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"slices"
	"testing"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
)

// TestSecretsSSHAndVault: vault passwords and each long line of an SSH key
// are redacted from the run's output.
func TestSecretsSSHAndVault(t *testing.T) {
	key := "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAE\nc2gtZWQyNTUxOQAAACAG2PPYNjwf9Cb7tLur\n-----END OPENSSH PRIVATE KEY-----\n"
	got := Secrets(bundle.Bundle{
		SSH:   bundle.SSH{PrivateKeys: []string{key}},
		Vault: map[string]string{bundle.DefaultVaultID: "vault\"pw", "ops": "ops-pw"},
	})
	for _, want := range []string{"b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAE", "c2gtZWQyNTUxOQAAACAG2PPYNjwf9Cb7tLur", `vault"pw`, `vault\"pw`, "ops-pw"} {
		if !slices.Contains(got, want) {
			t.Errorf("secrets lack %q: %q", want, got)
		}
	}
}
