# Renders what the plan-time checks of `terraform show -json tfplan` found as
# Markdown, for a pull request's (merge request's) comment: per kubeplay_run,
# the hosts and the tasks that would change, with their sizes only. It never
# prints a diff's text, even for runs with plan_check_diffs = true: the
# comment is read by more people than the plan.
#
#   jq -r -f ci/plan-comment.jq plan.json > comment.md

# A table cell: one line, its pipes escaped.
def cell: tostring | gsub("[\r\n]+"; " ") | gsub("\\|"; "\\|");
def plural($n; $word): "\($n) \($word)\(if $n == 1 then "" else "s" end)";

[.resource_changes[]? | select(.type == "kubeplay_run" and .change.actions != ["no-op"] and .change.actions != ["read"])] as $runs
| ([$runs[] | .change.after.planned_changes.hosts[]?] | unique) as $hosts
| "<!-- kubeplay plan checks -->",
  "## Playbook checks",
  "",
  (if ($runs | length) == 0 then "This plan changes no `kubeplay_run`."
   else "\(plural($hosts | length; "host")) would change (\(plural($runs | length; "run")) in this plan)."
   end),
  ($runs[]
   | .address as $address
   | (.change.actions | join(", ")) as $actions
   | .change.after.planned_changes as $c
   | "",
     if .change.actions == ["delete"] then
       "### `\($address)` (\($actions)): not checked (nothing is checked on destroy)"
     elif .change.after_unknown.planned_changes == true then
       "### `\($address)` (\($actions)): **not checked**: the check could not run (the plan's warnings say why)"
     elif $c == null then
       "### `\($address)` (\($actions)): not checked (`plan_check` off, or checks disabled)"
     elif $c.task_count == 0 then
       "### `\($address)` (\($actions)): no host would change"
     else
       "### `\($address)` (\($actions)): \(plural($c.task_count; "task")) would change, on \(plural($c.hosts | length; "host"))",
       "",
       "Hosts: \($c.hosts | map("`\(cell)`") | join(", "))",
       (if $c.drifted_run then "", "The hosts drifted from run `\($c.drifted_run)`: it runs again." else empty end),
       "",
       "| Host | Task | Module | Lines | Diff size |",
       "|---|---|---|---|---|",
       ($c.tasks[] | "| \(.host | cell) | \(.task | cell)\(if .ran then " (ran for real: `check_mode: false`)" else "" end) | `\(.action | cell)` | +\(.lines_added) -\(.lines_removed) | \(.diff_size) |"),
       (if $c.task_count > ($c.tasks | length) then "", "_The plan lists the first \($c.tasks | length) of \($c.task_count) tasks: hosts past them are not shown._" else empty end)
     end,
     (if ($c.not_checkable // 0) > 0 then "", "_\(plural($c.not_checkable; "task")) skipped (modules without check mode): the plan cannot show what they would do._" else empty end)
  )
