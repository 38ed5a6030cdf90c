// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import "github.com/hashicorp/terraform-plugin-framework/resource/schema"

// runActionDescriptions describe the action's inputs as an action has them:
// one sentence each, the details being on the resource's page, which the
// action's description links. The resource's descriptions speak of what an
// action does not have (its state, replacement, triggers, sections of the
// resource's page). An input missing here keeps the resource's description,
// but for the sentence on triggers (actionDescription).
var runActionDescriptions = map[string]string{
	"name":             "A name for the run, for node labels' `{run.name}` placeholder.",
	"container_group":  "The name of the `kubeplay_container_group` to run in; exactly one of `container_group` and `container_groups` is required.",
	"container_groups": "Container groups to run in instead of `container_group`: the first with room, by `priority`, then in this order.",
	"node_label":       "The name of a `kubeplay_node_label` that shapes the run's pod.",
	"node":             "The name of a `kubeplay_node` of `container_group` to run on, in turn with its other runs.",
	"playbook":         "The playbook's YAML content; exactly one of `playbook`, `playbook_path`, `command` and `ad_hoc` is required.",
	"slices":           "Into how many slices, a pod each, the run's hosts are split, as AWX's job slicing does; each output line names its slice. Defaults to `1`.",
	"ad_hoc":           "An ad hoc command instead of a playbook: one Ansible `module` with its `args` against the hosts of `pattern`.",
	"command":          "A command to run instead of a playbook, as an argv list, for images without Ansible.",
	"files":            "Extra files shipped beside the playbook, as a map of relative path to content.",
	"inventory":        "The inventory's content, INI or YAML; by default, `localhost` inside the pod.",
	"extra_vars":       "Extra variables: an object or map, or a string holding a JSON object.",
	"extra_vars_wo":    "Secret extra variables, as a JSON object, redacted from the progress and errors.",
	"env":              "Environment variables for the playbook.",
	"env_wo":           "Secret environment variables, redacted from the progress and errors.",
	"limit":            "Ansible host patterns the run is limited to, passed as `--limit`.",
	"tags":             "Run only the tasks and roles tagged with one of these tags, passed as `--tags`.",
	"skip_tags":        "Skip the tasks and roles tagged with one of these tags, passed as `--skip-tags`.",
	"verbosity":        "Ansible's verbosity, 0 to 6 (`-v` to `-vvvvvv`). Defaults to `0`.",
	"forks":            "`--forks`, and what the run holds of its group's `max_forks`. Defaults to `5`.",
	"check_mode":       "Run with `--check`. Defaults to `false`.",
	"diff_mode":        "Run with `--diff`. Defaults to `false`.",
	"keep_pod_on_failure": "Keep the pod of a run that ended `failed` or `error` for inspection; the error names it. " +
		"Defaults to `false`.",
	"ignore_failure": "Report a run that is not `successful` as a warning instead of an error. Defaults to `false`.",
	"output_limit":   "How many bytes of the output's tail the run keeps, whose last lines the error quotes. Defaults to `65536`.",
	"record_all_hosts": "Whether the play recap the action shows at the end lists every host, not only those that " +
		"failed or were unreachable. Defaults to `false`.",
	"ssh_private_keys_wo":   "SSH private keys for Ansible's `ssh` connection, as unencrypted PEM.",
	"ssh_known_hosts":       "`known_hosts` content that SSH host keys are checked against.",
	"ssh_host_key_checking": "Whether Ansible checks SSH host keys. Defaults to `true`.",
	"vault_password_wo":     "The vault password for vaulted content without a vault id.",
	"vault_passwords_wo":    "Vault passwords by vault id.",
	"project_dir":           "A directory on the machine that runs Terraform, shipped whole into the pod for the playbook to run from.",
	"project_ignore":        "More paths to leave out of `project_dir`, as in `.kubeplayignore`.",
	"playbook_path":         "The playbook to run, by its path in `project_dir`.",
	"inventories":           "Inventories in `project_dir`, by path, passed with `-i` in this order.",
	"requirements":          "A `requirements.yml` that `ansible-galaxy` installs before the playbook.",
}

// runActionAttributeDescription is the action's description of the
// resource's input name: its own sentence and a link to the resource's.
func runActionAttributeDescription(name string, a schema.Attribute) string {
	d, ok := runActionDescriptions[name]
	if !ok {
		return actionDescription(a.GetMarkdownDescription())
	}
	return d + " As on [`kubeplay_run`](../resources/run.md#" + name + ")."
}
