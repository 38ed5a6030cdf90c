// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/config"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
)

// restrictedOverride runs the worker as OpenShift's restricted SCC would: an
// arbitrary UID with no entry in the image's /etc/passwd, group 0, a
// read-only root file system, no capabilities.
const restrictedOverride = `spec:
  securityContext:
    runAsUser: 1000680000
    runAsGroup: 0
    runAsNonRoot: true
    seccompProfile: {type: RuntimeDefault}
  containers:
  - name: worker
    securityContext:
      allowPrivilegeEscalation: false
      readOnlyRootFilesystem: true
      capabilities: {drop: [ALL]}
`

// TestAccRun_restrictedUID: at pod_security_level "restricted", a run pod
// with an arbitrary UID and a read-only root file system runs, in the
// default execution environment, an inline playbook that proves both on
// localhost and configures an SSH target with a key, known hosts and
// vaulted variables; then a project whose collection requirements.yml
// installs. kubeplay gives the run its /tmp, a home and a passwd entry.
func TestAccRun_restrictedUID(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-restricted")
	key, pub := acctest.SSHKey(t)
	targets := acctest.SSHTargets(t, e.kube, ns, 1, pub)
	vaultPW, opsPW := "vault-pw-"+randName("v"), "ops-pw-"+randName("o")

	var inventory, known strings.Builder
	for i, tg := range targets {
		fmt.Fprintf(&inventory, "t%d ansible_host=%s\n", i, tg.IP)
		known.WriteString(tg.KnownHosts + "\n")
	}
	inventory.WriteString("[all:vars]\nansible_user=" + acctest.SSHUser + "\nansible_python_interpreter=/usr/bin/python3\nansible_ssh_timeout=60\nansible_ssh_retries=3\n")
	playbook := `- hosts: localhost
  gather_facts: false
  tasks:
    - command: id -u
      register: uid
    - command: touch /kubeplay-probe
      register: probe
      failed_when: false
    - assert:
        that:
          - uid.stdout == "1000680000"
          - "'Read-only file system' in probe.stderr"
- hosts: all
  gather_facts: false
  vars:
    secret_word: !vault |
` + indent(acctest.VaultEncrypt(t, "vaulted-word-71c3", vaultPW, ""), 6) +
		"    ops_word: !vault |\n" + indent(acctest.VaultEncrypt(t, "ops-word-2b9d", opsPW, "ops"), 6) +
		"  tasks:\n    - name: write proof\n" +
		"      copy: {dest: /home/" + acctest.SSHUser + "/proof, mode: \"0600\", content: \"{{ secret_word }} {{ ops_word }} {{ inventory_hostname }}\\n\"}\n"
	project := sshProject(t, e, ns, inventory.String(), vaultPW, opsPW)

	group := e.providerBlock() + fmt.Sprintf(`
resource "kubeplay_container_group" "g" {
  name               = %q
  namespace          = %q
  image              = %q
  pod_security_level = "restricted"
  pod_spec_override  = %q
}
`, randName("restricted"), ns, acctest.TestImage(), restrictedOverride)
	inline := group + sshSecretVariables + `
variable "playbook" { type = string }
variable "inventory" { type = string }

resource "kubeplay_run" "test" {
  container_group     = kubeplay_container_group.g.name
  playbook            = var.playbook
  inventory           = var.inventory
  ssh_private_keys_wo = var.keys
  ssh_known_hosts     = ` + fmt.Sprintf("%q", known.String()) + `
  vault_password_wo   = var.vault_pw
  vault_passwords_wo  = { ops = var.ops_pw }
}
`
	fromProject := group + sshProjectRun(known.String(), "")
	secretVars := config.Variables{
		"keys": config.ListVariable(config.StringVariable(key)), "vault_pw": config.StringVariable(vaultPW),
		"ops_pw": config.StringVariable(opsPW),
	}
	with := func(k string, v config.Variable) config.Variables {
		out := config.Variables{k: v}
		for name, val := range secretVars {
			out[name] = val
		}
		return out
	}
	inlineVars := with("playbook", config.StringVariable(playbook))
	inlineVars["inventory"] = config.StringVariable(inventory.String())
	// changed hosts (t0, and localhost of the inline playbook) are counted, not listed.
	successful := func(changed int64) []statecheck.StateCheck {
		return []statecheck.StateCheck{
			statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("successful")),
			statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_counts"), hostCounts(0, changed, 0, 0, 0, 0)),
			statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_stats"), knownvalue.MapSizeExact(0)),
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		TerraformVersionChecks:   writeOnlyVersions,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{
			{
				Config: inline, ConfigVariables: inlineVars,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue(runAddr, tfjsonpath.New("rendered_pod"),
						knownvalue.StringRegexp(regexp.MustCompile(`(?s)readOnlyRootFilesystem: true.*mountPath: /tmp\s+name: kubeplay-tmp.*emptyDir:\s+sizeLimit: 1Gi\s+name: kubeplay-tmp`))),
				}},
				ConfigStateChecks: successful(2),
				Check:             resource.ComposeAggregateTestCheckFunc(e.checkProofs(ns, targets, ""), e.checkNoRunPods(ns)),
			},
			{
				Config: fromProject, ConfigVariables: with("project", config.StringVariable(project)),
				ConfigStateChecks: successful(1),
				Check:             resource.ComposeAggregateTestCheckFunc(e.checkProofs(ns, targets, " via kubeplay_test.ssh"), e.checkNoRunPods(ns)),
			},
		},
	})
}
