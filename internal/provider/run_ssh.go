// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/boolplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
)

// runSSHAttributes are the run's SSH and vault attributes.
func runSSHAttributes() map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"ssh_private_keys_wo": schema.ListAttribute{
			MarkdownDescription: "SSH private keys for Ansible's `ssh` connection, unencrypted PEM, such as `[file(\"~/.ssh/deploy\")]`, " +
				"loaded into an `ssh-agent`. See [Secrets](#secrets).",
			Optional: true, Sensitive: true, WriteOnly: true, ElementType: types.StringType,
			Validators: []validator.List{listvalidator.ValueStringsAre(sshPrivateKey())},
		},
		"ssh_known_hosts": schema.StringAttribute{
			MarkdownDescription: "`known_hosts` content, as `ssh-keyscan` prints it, checked before the image's own; its " +
				"path is in `KUBEPLAY_SSH_KNOWN_HOSTS`.",
			Optional: true, PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			Validators: []validator.String{knownHostsText()},
		},
		"ssh_host_key_checking": schema.BoolAttribute{
			MarkdownDescription: "Whether Ansible checks SSH host keys. Defaults to `true`; `false` is a warning.",
			Optional:            true, PlanModifiers: []planmodifier.Bool{boolplanmodifier.RequiresReplace()},
		},
		"vault_password_wo": schema.StringAttribute{
			MarkdownDescription: "The vault password for vaulted content without a vault id, passed as `--vault-id default@file`. See " +
				"[Secrets](#secrets).",
			Optional: true, Sensitive: true, WriteOnly: true, Validators: []validator.String{vaultPassword(), redactableSecret()},
		},
		"vault_passwords_wo": schema.MapAttribute{
			MarkdownDescription: "Vault passwords by vault id, each passed as `--vault-id id@file`. See [Secrets](#secrets).",
			Optional:            true, Sensitive: true, WriteOnly: true, ElementType: types.StringType,
			Validators: []validator.Map{
				mapvalidator.KeysAre(vaultIDName()), mapvalidator.ValueStringsAre(vaultPassword(), redactableSecret()),
			},
		},
	}
}

// sshPrivateKey accepts one unencrypted PEM private key, and never quotes it.
func sshPrivateKey() stringCheck {
	return stringCheck{
		desc: "value must be an unencrypted PEM private key",
		check: func(_, s string) (string, string) {
			if err := bundle.ValidateSSHKey(s); err != nil {
				return "Invalid SSH Private Key", "The key is not usable: " + err.Error() + ". The key itself is not shown."
			}
			return "", ""
		},
	}
}

func knownHostsText() stringCheck {
	return stringCheck{
		desc: "value must be known_hosts content",
		check: func(_, s string) (string, string) {
			if err := bundle.ValidateKnownHosts(s); err != nil {
				return "Invalid Known Hosts", err.Error() + ". Write lines as ssh-keyscan prints them."
			}
			return "", ""
		},
	}
}

func vaultIDName() stringCheck {
	return stringCheck{
		desc: "value must be a vault id",
		check: func(_, s string) (string, string) {
			if err := bundle.ValidateVaultID(s); err != nil {
				return "Invalid Vault Id", err.Error() + "."
			}
			return "", ""
		},
	}
}

func vaultPassword() stringCheck {
	return stringCheck{
		desc: "value must be a non-blank vault password",
		check: func(_, s string) (string, string) {
			if err := bundle.ValidateVaultPassword(s); err != nil {
				return "Invalid Vault Password", err.Error() + "."
			}
			return "", ""
		},
	}
}

// sshWarnings warns about host key checking turned off, and refuses a
// vault id given twice.
func sshWarnings(ctx context.Context, m runModel, diags *diag.Diagnostics) {
	if !m.SSHHostKeyChecking.IsNull() && !m.SSHHostKeyChecking.IsUnknown() && !m.SSHHostKeyChecking.ValueBool() {
		diags.AddAttributeWarning(path.Root("ssh_host_key_checking"), "SSH Host Key Checking Is Off",
			"This run accepts any SSH host key, so a machine in the middle can pose as a target and receive what the "+
				"playbook sends. Give the targets' keys in ssh_known_hosts and remove ssh_host_key_checking = false.")
	}
	if m.VaultPasswordWO.IsNull() || m.VaultPasswordsWO.IsNull() || m.VaultPasswordsWO.IsUnknown() {
		return
	}
	ids := map[string]types.String{}
	diags.Append(m.VaultPasswordsWO.ElementsAs(ctx, &ids, false)...)
	if _, ok := ids[bundle.DefaultVaultID]; ok {
		diags.AddAttributeError(path.Root("vault_passwords_wo").AtMapKey(bundle.DefaultVaultID), "Vault Id Given Twice",
			"vault_password_wo is the password of vault id \"default\": remove one of them.")
	}
}

// sshSettings reads the SSH and vault settings; write-only values come
// from config (they are null in a destroy's).
func sshSettings(ctx context.Context, plan, config runModel, diags *diag.Diagnostics) (bundle.SSH, map[string]string) {
	s := bundle.SSH{
		KnownHosts:        plan.SSHKnownHosts.ValueString(),
		NoHostKeyChecking: !plan.SSHHostKeyChecking.IsNull() && !plan.SSHHostKeyChecking.ValueBool(),
	}
	if !config.SSHPrivateKeysWO.IsNull() {
		diags.Append(config.SSHPrivateKeysWO.ElementsAs(ctx, &s.PrivateKeys, false)...)
	}
	vault := goStringMap(ctx, config.VaultPasswordsWO, diags)
	if v := config.VaultPasswordWO.ValueString(); v != "" {
		if vault == nil {
			vault = map[string]string{}
		}
		vault[bundle.DefaultVaultID] = v
	}
	return s, vault
}
