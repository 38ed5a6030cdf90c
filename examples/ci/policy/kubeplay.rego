# The plan-time checks of a saved plan, as a gate before its apply.
#
# input: `terraform show -json tfplan`. data.kubeplay_policy (data.json):
#   protected_hosts          host names that no run of this workspace may change
#   protected_host_patterns  regular expressions (RE2) of such host names
#   protected_groups         container groups whose runs may change no host (one
#                            that was not checked needs an approval)
#   max_hosts                a plan that changes more hosts needs an approval
#
#   opa eval --fail-defined -d ci/policy -i plan.json 'data.kubeplay.deny[_]'
#   opa eval --format raw -d ci/policy -i plan.json 'count(data.kubeplay.approval) > 0'
#   opa eval --format raw -d ci/policy -i plan.json data.kubeplay.markdown >> comment.md
package kubeplay

defaults := {"protected_hosts": [], "protected_host_patterns": [], "protected_groups": [], "max_hosts": 10}

config := object.union(defaults, data.kubeplay_policy) if {
	data.kubeplay_policy
} else := defaults

# The kubeplay_run changes of the plan (a replace is ["delete", "create"]).
runs contains rc if {
	some rc in input.resource_changes
	rc.type == "kubeplay_run"
	not rc.change.actions in {["no-op"], ["read"]}
}

# [run address, host] for each host a run's check says would change.
host_changes contains [rc.address, host] if {
	some rc in runs
	some host in rc.change.after.planned_changes.hosts
}

changed_hosts contains host if some [_, host] in host_changes

protected_host(host) if host in config.protected_hosts

protected_host(host) if {
	some pattern in config.protected_host_patterns
	regex.match(pattern, host)
}

group(rc) := rc.change.after.container_group if rc.change.after.container_group != null
else := rc.change.before.container_group

checked(rc) if is_object(rc.change.after.planned_changes)

# planned_changes lists the first 100 changed tasks, and hosts are theirs.
truncated(rc) if {
	c := rc.change.after.planned_changes
	c.task_count > count(c.tasks)
}

deny contains msg if {
	some [address, host] in host_changes
	protected_host(host)
	msg := sprintf("%s would change the protected host %s", [address, host])
}

deny contains msg if {
	some rc in runs
	group(rc) in config.protected_groups
	rc.change.after.planned_changes.task_count > 0
	msg := sprintf("%s, of the protected group %s, would change %s", [
		rc.address, group(rc),
		concat(", ", rc.change.after.planned_changes.hosts),
	])
}

approval contains msg if {
	count(changed_hosts) > config.max_hosts
	msg := sprintf("%d hosts would change, more than %d: %s", [
		count(changed_hosts), config.max_hosts,
		concat(", ", sort(changed_hosts)),
	])
}

# A run of a protected group that was not checked: the plan cannot show that
# it changes no host.
approval contains msg if {
	some rc in runs
	group(rc) in config.protected_groups
	not checked(rc)
	msg := sprintf("%s, of the protected group %s, was not checked (%s)", [rc.address, group(rc), concat(", ", rc.change.actions)])
}

# A run whose check could not run: a warning in the plan says why.
approval contains msg if {
	some rc in runs
	rc.change.after_unknown.planned_changes == true
	msg := sprintf("%s: its check could not run, so the plan does not show what it would change", [rc.address])
}

approval contains msg if {
	some rc in runs
	truncated(rc)
	msg := sprintf("%s would change %d tasks; the plan lists the first %d, so it may change hosts it does not name", [
		rc.address, rc.change.after.planned_changes.task_count,
		count(rc.change.after.planned_changes.tasks),
	])
}

# The verdict in Markdown, for the pull request's comment.
markdown := concat("\n", array.concat(["", "### Policy", ""], verdict))

verdict := ["No objection: the apply after the merge needs no approval."] if {
	count(deny) == 0
	count(approval) == 0
} else := array.concat(
	[sprintf("- **Denied**: %s", [m]) | some m in sort(deny)],
	[sprintf("- **Needs an approval**: %s", [m]) | some m in sort(approval)],
)
