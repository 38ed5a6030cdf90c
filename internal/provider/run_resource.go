// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/boolplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/dynamicplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/capacity"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/outputtail"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podsecurity"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/projectdir"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runengine"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
)

var (
	_ resource.Resource                   = (*runResource)(nil)
	_ resource.ResourceWithConfigure      = (*runResource)(nil)
	_ resource.ResourceWithValidateConfig = (*runResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*runResource)(nil)
)

const (
	defaultRunTimeout  = 30 * time.Minute
	defaultOutputLimit = 64 << 10
	runPodGracePeriod  = 1
)

type runResource struct {
	data *providerData
}

func newRunResource() resource.Resource { return &runResource{} }

type runModel struct {
	ID               types.String   `tfsdk:"id"`
	Name             types.String   `tfsdk:"name"`
	ContainerGroup   types.String   `tfsdk:"container_group"`
	ContainerGroups  types.List     `tfsdk:"container_groups"`
	NodeLabel        types.String   `tfsdk:"node_label"`
	Node             types.String   `tfsdk:"node"`
	Playbook         types.String   `tfsdk:"playbook"`
	Command          types.List     `tfsdk:"command"`
	Files            types.Map      `tfsdk:"files"`
	Inventory        types.String   `tfsdk:"inventory"`
	ExtraVars        types.Dynamic  `tfsdk:"extra_vars"`
	ExtraVarsWO      types.String   `tfsdk:"extra_vars_wo"`
	Env              types.Map      `tfsdk:"env"`
	EnvWO            types.Map      `tfsdk:"env_wo"`
	Limit            types.List     `tfsdk:"limit"`
	Tags             types.List     `tfsdk:"tags"`
	SkipTags         types.List     `tfsdk:"skip_tags"`
	Verbosity        types.Int64    `tfsdk:"verbosity"`
	Forks            types.Int64    `tfsdk:"forks"`
	CheckMode        types.Bool     `tfsdk:"check_mode"`
	DiffMode         types.Bool     `tfsdk:"diff_mode"`
	Triggers         types.Map      `tfsdk:"triggers"`
	DestroyPlaybook  types.String   `tfsdk:"destroy_playbook"`
	KeepPodOnFailure types.Bool     `tfsdk:"keep_pod_on_failure"`
	IgnoreFailure    types.Bool     `tfsdk:"ignore_failure"`
	OutputLimit      types.Int64    `tfsdk:"output_limit"`
	RecordAllHosts   types.Bool     `tfsdk:"record_all_hosts"`
	Timeouts         timeouts.Value `tfsdk:"timeouts"`
	// SSH and vault (run_ssh.go).
	SSHPrivateKeysWO   types.List   `tfsdk:"ssh_private_keys_wo"`
	SSHKnownHosts      types.String `tfsdk:"ssh_known_hosts"`
	SSHHostKeyChecking types.Bool   `tfsdk:"ssh_host_key_checking"`
	VaultPasswordWO    types.String `tfsdk:"vault_password_wo"`
	VaultPasswordsWO   types.Map    `tfsdk:"vault_passwords_wo"`

	ProjectDir    types.String `tfsdk:"project_dir"`
	ProjectIgnore types.List   `tfsdk:"project_ignore"`
	PlaybookPath  types.String `tfsdk:"playbook_path"`
	Inventories   types.List   `tfsdk:"inventories"`
	Requirements  types.String `tfsdk:"requirements"`
	ProjectHash   types.String `tfsdk:"project_hash"`
	ProjectFiles  types.Map    `tfsdk:"project_files"`
	// project is project_dir as read for this plan or apply.
	project *projectdir.Manifest `tfsdk:"-"`
	// projectHash is the hash project must ship with, when project was
	// listed rather than scanned (see resolveProject).
	projectHash string `tfsdk:"-"`

	Status       types.String `tfsdk:"status"`
	StatusReason types.String `tfsdk:"status_reason"`
	Timeline     types.List   `tfsdk:"timeline"`
	ExitCode     types.Int64  `tfsdk:"exit_code"`
	HostStats    types.Map    `tfsdk:"host_stats"`
	HostCount    types.Int64  `tfsdk:"host_count"`
	HostCounts   types.Object `tfsdk:"host_counts"`
	Output       types.String `tfsdk:"output"`
	PodName      types.String `tfsdk:"pod_name"`
	NodeName     types.String `tfsdk:"node_name"`
	StartedAt    types.String `tfsdk:"started_at"`
	FinishedAt   types.String `tfsdk:"finished_at"`
	RenderedPod  types.String `tfsdk:"rendered_pod"`
	// PlannedTargets: see run_targets.go.
	PlannedTargets types.List   `tfsdk:"planned_targets"`
	RunNamespace   types.String `tfsdk:"run_namespace"`
	// LaunchAttempts counts the pods the run launched.
	LaunchAttempts types.Int64 `tfsdk:"launch_attempts"`

	// The result beside host_stats: see run_result.go.
	FailedTasks     types.List   `tfsdk:"failed_tasks"`
	FailedTaskCount types.Int64  `tfsdk:"failed_task_count"`
	Artifacts       types.String `tfsdk:"artifacts"`

	// The plan-time check: see run_check.go.
	PlanCheck      types.String `tfsdk:"plan_check"`
	PlanCheckDiffs types.Bool   `tfsdk:"plan_check_diffs"`
	PlannedChanges types.Object `tfsdk:"planned_changes"`

	// Sliced runs and ad hoc commands: see run_slices.go.
	Slices       types.Int64  `tfsdk:"slices"`
	AdHoc        types.Object `tfsdk:"ad_hoc"`
	SliceResults types.List   `tfsdk:"slice_results"`
	// Re-running the hosts that failed: see run_rerun.go.
	RerunFailedHosts types.Bool   `tfsdk:"rerun_failed_hosts"`
	RerunHosts       types.Object `tfsdk:"rerun_hosts"`
	// rerunList is the hosts rerun_hosts stands for, read at apply.
	rerunList []string `tfsdk:"-"`
}

func (r *runResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_run"
}

func (r *runResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replaceStr := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	replaceMap := []planmodifier.Map{mapplanmodifier.RequiresReplace()}
	replaceInt := []planmodifier.Int64{int64planmodifier.RequiresReplace()}
	replaceBool := []planmodifier.Bool{boolplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		MarkdownDescription: "A run executes one Ansible playbook (or a plain command) in an ephemeral pod of a " +
			"`kubeplay_container_group`, as an AWX job does in a container group: apply creates the pod, ships the " +
			"playbook and its inputs into it, runs it, records the result and deletes the pod. A run is the record of " +
			"that execution: refresh keeps it, and a change of what runs or where replaces it (see [Running " +
			"Again](#running-again)). A run whose status is not `successful` fails the apply unless `ignore_failure` " +
			"is set; its record still reaches the state, marked tainted, so the next apply runs it again.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The run's id, a random hex string, also the value of the pod label `kubeplay.io/run`.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": schema.StringAttribute{
				MarkdownDescription: "A name for the run, for people and for node labels' `{run.name}` placeholder.",
				Optional:            true, PlanModifiers: replaceStr,
			},
			"container_group": schema.StringAttribute{
				MarkdownDescription: "The name of the `kubeplay_container_group` to run in; exactly one of `container_group` and " +
					"`container_groups` is required. With `container_groups`, the group the run was placed in.",
				Optional: true, Computed: true,
				Validators: []validator.String{dnsLabel(), stringvalidator.ExactlyOneOf(path.MatchRoot("container_group"), path.MatchRoot("container_groups"))},
				// A placed group changes only with container_groups, which replaces the run itself.
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplaceIf(configured,
					"A change of the configured group replaces the run.", "A change of the configured group replaces the run.")},
			},
			"container_groups": schema.ListAttribute{
				MarkdownDescription: "Container groups the run may run in instead of `container_group` (see [Capacity And " +
					"Waiting](#capacity-and-waiting)).",
				Optional: true, ElementType: types.StringType,
				PlanModifiers: []planmodifier.List{listplanmodifier.RequiresReplace()},
				Validators: []validator.List{listvalidator.SizeAtLeast(1), listvalidator.UniqueValues(),
					listvalidator.ValueStringsAre(dnsLabel())},
			},
			"node_label": schema.StringAttribute{
				MarkdownDescription: "The name of a `kubeplay_node_label` that shapes the run's pod (see " +
					"[`kubeplay_node_label`](node_label.md)).",
				Optional: true, Validators: []validator.String{dnsLabel()}, PlanModifiers: replaceStr,
			},
			"node": schema.StringAttribute{
				MarkdownDescription: "The `name` of a `kubeplay_node` of `container_group` to run on, in turn with its other runs; not " +
					"with `container_groups` or `node_label`.",
				Optional: true, PlanModifiers: replaceStr,
				Validators: []validator.String{dnsLabel(), stringvalidator.ConflictsWith(path.MatchRoot("container_groups"), path.MatchRoot("node_label"))},
			},
			"playbook": schema.StringAttribute{
				MarkdownDescription: "The playbook's YAML content. Exactly one of `playbook`, `playbook_path`, `command` and `ad_hoc` is " +
					"required. With `project_dir`, it runs from the project's root as `" + bundle.InlinePlaybookName + "`.",
				Optional: true, PlanModifiers: replaceStr,
				Validators: []validator.String{
					stringvalidator.ExactlyOneOf(path.MatchRoot("playbook"), path.MatchRoot("playbook_path"), path.MatchRoot("command"), path.MatchRoot("ad_hoc")),
					stringvalidator.LengthAtLeast(1),
				},
			},
			"command": schema.ListAttribute{
				MarkdownDescription: "A command to run instead of a playbook, as an argv list, for images without Ansible.",
				Optional:            true, ElementType: types.StringType,
				PlanModifiers: []planmodifier.List{listplanmodifier.RequiresReplace()},
				Validators:    []validator.List{listvalidator.SizeAtLeast(1)},
			},
			"files": schema.MapAttribute{
				MarkdownDescription: "Extra files shipped beside the playbook, by relative path.",
				Optional:            true, ElementType: types.StringType, PlanModifiers: replaceMap,
				Validators: []validator.Map{mapvalidator.KeysAre(runFilePath())},
			},
			"inventory": schema.StringAttribute{
				MarkdownDescription: "The inventory's content, INI or YAML. Defaults to `localhost` over a local connection." +
					bundle.DefaultPythonPath + "`) and `shell_type`.",
				Optional: true, PlanModifiers: replaceStr, Validators: []validator.String{inventoryText()},
			},
			"extra_vars": schema.DynamicAttribute{
				MarkdownDescription: "Extra variables, passed with `-e @file`: an object or map, or a string holding a JSON object.",
				Optional:            true, PlanModifiers: []planmodifier.Dynamic{dynamicplanmodifier.RequiresReplace()},
				Validators: []validator.Dynamic{extraVars()},
			},
			"extra_vars_wo": schema.StringAttribute{
				MarkdownDescription: "Secret extra variables, as a JSON object. See [Secrets](#secrets).",
				Optional:            true, Sensitive: true, WriteOnly: true, Validators: []validator.String{jsonObject(), redactableVars()},
			},
			"env": schema.MapAttribute{
				MarkdownDescription: "Environment variables for the playbook.",
				Optional:            true, ElementType: types.StringType, PlanModifiers: replaceMap,
				Validators: []validator.Map{mapvalidator.KeysAre(envName())},
			},
			"env_wo": schema.MapAttribute{
				MarkdownDescription: "Secret environment variables for the playbook. See [Secrets](#secrets).",
				Optional:            true, Sensitive: true, WriteOnly: true, ElementType: types.StringType,
				Validators: []validator.Map{mapvalidator.KeysAre(envName()), mapvalidator.ValueStringsAre(redactableSecret())},
			},
			"limit": ansibleListAttribute("host pattern", "Ansible host patterns the run is limited to, one per element, passed as `--limit`.",
				"Unset, each play runs on all the hosts it targets."),
			"tags": ansibleListAttribute("tag", "Runs only the tasks tagged with one of these tags (and `always`), passed as `--tags`.",
				"Unset, every task runs but those tagged `never`."),
			"skip_tags": ansibleListAttribute("tag", "Skips the tasks tagged with any of these tags, passed as `--skip-tags`.",
				"Unset, no task is skipped by its tags."),
			"verbosity": schema.Int64Attribute{
				MarkdownDescription: "Ansible's verbosity, 0 to 6 (`-v` to `-vvvvvv`). Defaults to `0`.",
				Optional:            true, Computed: true, Default: int64default.StaticInt64(0), PlanModifiers: replaceInt,
				Validators: []validator.Int64{int64validator.Between(0, 6)},
			},
			"forks": schema.Int64Attribute{
				MarkdownDescription: "`--forks`, and what the run holds of its group's `max_forks`. Defaults to `5`, " +
					"Ansible's default.",
				Optional: true, Computed: true, Default: int64default.StaticInt64(5), PlanModifiers: replaceInt,
				Validators: []validator.Int64{int64validator.AtLeast(1)},
			},
			"check_mode": schema.BoolAttribute{MarkdownDescription: "`--check`. Defaults to `false`.", Optional: true, Computed: true,
				Default: booldefault.StaticBool(false), PlanModifiers: replaceBool},
			"diff_mode": schema.BoolAttribute{MarkdownDescription: "`--diff`. Defaults to `false`.", Optional: true, Computed: true,
				Default: booldefault.StaticBool(false), PlanModifiers: replaceBool},
			"triggers": schema.MapAttribute{
				MarkdownDescription: "Arbitrary values whose change replaces the run, which runs it again (see [Running " +
					"Again](#running-again)).",
				Optional: true, ElementType: types.StringType, PlanModifiers: replaceMap,
			},
			"destroy_playbook": schema.StringAttribute{
				MarkdownDescription: "A playbook run in a fresh pod when the run is destroyed, with `KUBEPLAY_OPERATION=destroy` and no " +
					"write-only value. A change updates the run in place.",
				Optional: true,
			},
			"keep_pod_on_failure": schema.BoolAttribute{
				MarkdownDescription: "Keep the pod of a run that ended `failed` or `error` ([Keeping a failed run's " +
					"pod](../guides/live-output-and-debugging.md#keeping-a-failed-runs-pod)). Defaults to `false`.",
				Optional: true, Computed: true, Default: booldefault.StaticBool(false),
			},
			"ignore_failure": schema.BoolAttribute{
				MarkdownDescription: "Record a failed or errored run with a warning instead of failing the apply. Defaults to `false`.",
				Optional:            true, Computed: true, Default: booldefault.StaticBool(false),
			},
			"output_limit": schema.Int64Attribute{
				MarkdownDescription: fmt.Sprintf("How many bytes of the output's tail `output` keeps, up to 16 MiB. Defaults to `%d`.", defaultOutputLimit),
				Optional:            true, Computed: true, Default: int64default.StaticInt64(defaultOutputLimit),
				Validators: []validator.Int64{int64validator.Between(0, 16<<20)},
			},
			"record_all_hosts": recordAllHostsAttribute(),

			"status": schema.StringAttribute{
				MarkdownDescription: "`successful`, `failed` (the playbook returned non-zero), `error` (the run could not complete) or " +
					"`canceled` (Terraform was interrupted).",
				Computed: true,
			},
			"status_reason": statusReasonAttribute(),
			"timeline":      timelineAttribute(),
			"exit_code":     schema.Int64Attribute{MarkdownDescription: "The exit code of `ansible-playbook` or the command; `-1` when it never ran.", Computed: true},

			"host_stats":        hostStatsAttribute(),
			"host_counts":       hostCountsAttribute(),
			"failed_tasks":      failedTasksAttribute(),
			"failed_task_count": failedTaskCountAttribute(),
			"host_count":        hostCountAttribute(),
			"artifacts":         artifactsAttribute(),

			"output": schema.StringAttribute{MarkdownDescription: "The output's last `output_limit` bytes, with write-only values redacted and control characters shown " +
				"as Unicode control pictures.", Computed: true},
			"pod_name":    schema.StringAttribute{MarkdownDescription: "The run's pod.", Computed: true},
			"node_name":   schema.StringAttribute{MarkdownDescription: "The node the pod ran on.", Computed: true},
			"started_at":  schema.StringAttribute{MarkdownDescription: "When the run started (RFC 3339).", Computed: true},
			"finished_at": schema.StringAttribute{MarkdownDescription: "When the run's pod was gone (RFC 3339).", Computed: true},
			"run_namespace": schema.StringAttribute{
				MarkdownDescription: "The namespace of a `namespace` label's run, or of a namespace `node`; else null.",
				Computed:            true,
			},
			"launch_attempts": schema.Int64Attribute{
				MarkdownDescription: "How many pods the run launched, retries included.",
				Computed:            true,
			},
			"rendered_pod": schema.StringAttribute{MarkdownDescription: "The pod the run creates, as YAML, which apply holds it to (see [Security " +
				"model](../guides/security-model.md#what-the-plan-shows-and-what-apply-checks)).", Computed: true},
			"planned_targets": plannedTargetsAttribute(),
		},
		Blocks: map[string]schema.Block{
			// A block, as in hashicorp/kubernetes: timeouts { create = "20m" }.
			"timeouts": withPlanTimeout(timeoutsBlock(ctx, timeouts.Opts{Create: true, Delete: true,
				CreateDescription: "How long the run may take, from claiming capacity until its pod is gone, as a duration; its pod's " +
					"`activeDeadlineSeconds` is this plus 2 seconds. Defaults to `30m`.",
				DeleteDescription: "How long the `destroy_playbook` may take, as `create` for the playbook. Defaults to `30m`.",
			})),
		},
	}
	maps.Copy(resp.Schema.Attributes, runSSHAttributes())
	maps.Copy(resp.Schema.Attributes, projectAttributes())
	maps.Copy(resp.Schema.Attributes, planCheckAttributes())
	maps.Copy(resp.Schema.Attributes, sliceAttributes())
	maps.Copy(resp.Schema.Attributes, rerunAttributes())
}

func (r *runResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (r *runResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	validateRunConfig(ctx, req.Config, &resp.Diagnostics)
}

// validateRunConfig checks a run's config (the resource's, or the action's
// as the resource's) beyond what the attributes' validators see.
func validateRunConfig(ctx context.Context, config tfsdk.Config, diags *diag.Diagnostics) {
	var m runModel
	diags.Append(config.Get(ctx, &m)...)
	if !diags.HasError() {
		sshWarnings(ctx, m, diags)
	}
	if m.RerunFailedHosts.ValueBool() && m.Name.IsNull() {
		diags.AddAttributeError(path.Root("rerun_failed_hosts"), "Re-Run Needs A Name", "rerun_failed_hosts keeps the "+
			"hosts that failed for the next run of the same name, and this run has none. Set name to one that stays the "+
			"same across the run's replacements, such as \"fleet-patch\".")
	}
	if diags.HasError() || m.Command.IsNull() {
		return
	}
	if m.Slices.ValueInt64() > 1 || m.RerunFailedHosts.ValueBool() {
		at := path.Root("slices")
		if !m.Slices.IsNull() && m.Slices.ValueInt64() <= 1 {
			at = path.Root("rerun_failed_hosts")
		}
		diags.AddAttributeError(at, "Attribute Needs Hosts", "slices and rerun_failed_hosts split or narrow an "+
			"inventory's hosts, but this run has a command, which has none. Remove them, or use playbook or ad_hoc instead of command.")
	}
	for _, name := range []string{"limit", "tags", "skip_tags", "inventory", "inventories", "requirements", "extra_vars", "destroy_playbook", "plan_check", "plan_check_diffs"} {
		var v attr.Value
		diags.Append(config.GetAttribute(ctx, path.Root(name), &v)...)
		// plan_check_diffs = false is its default, which the action's config carries too.
		if b, isBool := v.(types.Bool); v != nil && !v.IsNull() && (!isBool || !b.IsUnknown() && b.ValueBool()) {
			diags.AddAttributeError(path.Root(name), "Attribute Needs A Playbook",
				name+" applies to ansible-playbook, but this run has a command. Remove it, or use playbook instead of command.")
		}
	}
}

// runTarget is what a run needs from its group and node label, and the
// clients it runs with.
type runTarget struct {
	group   runengine.Group
	label   *podspec.Label      // nil without node_label
	clients *kubeclient.Clients // nil at plan time when the credential is not usable yet
	// changing: the group, label or credential is created or updated by this
	// apply, so the cluster does not show yet what the run will meet.
	changing bool
	// credChanging: the group's credential is, so its cluster is not known.
	credChanging bool
	// at is the attribute that names the group: container_group, or an
	// element of container_groups.
	at       path.Path
	priority *int64
}

// attr is the path diagnostics about the group go to.
func (t *runTarget) attr() path.Path {
	if len(t.at.Steps()) == 0 {
		return path.Root("container_group")
	}
	return t.at
}

// serverPolicyVersion is the Pod Security policy version c's API server
// enforces, so that kubeplay refuses what it refuses; "" (the newest
// checks) when it cannot be read.
func serverPolicyVersion(ctx context.Context, c *kubeclient.Clients) string {
	v, err := podsecurity.ServerVersion(c.Kube.Discovery())
	if err != nil {
		tflog.Debug(ctx, "checking pod security with the newest checks", map[string]any{"reason": err.Error()})
	}
	return v
}

// engineGroup is the run engine's view of a group: the one place that
// converts the catalog's group for runs.
func engineGroup(g *catalog.Group) runengine.Group {
	pending, _ := time.ParseDuration(g.PodPendingTimeout)   // zero or less: the engine's default
	grace, _ := time.ParseDuration(g.DisconnectGracePeriod) // zero: the bundle's default
	return runengine.Group{
		Name: g.Name, Namespace: g.Namespace, Credential: g.Credential,
		MaxConcurrentRuns: g.MaxConcurrentRuns, MaxForks: g.MaxForks, PendingTimeout: pending, DisconnectGrace: grace,
		LaunchRetries:    int(max(g.LaunchRetries, 0)),
		Pod:              g.PodGroup(),
		DefaultLabel:     g.DefaultLabel,
		PodSecurityLevel: g.PodSecurityLevel,
		Warm:             g.Warm(),
		OwnerID:          g.OwnerID,
	}
}

// errKnownAtApply: the group or label depends on values known only at apply.
var errKnownAtApply = errors.New("the run's container group or node label is known only at apply")

// groupFor returns the run's group: at plan time as this plan leaves it,
// at apply as the catalog holds it (the group is applied first). partial:
// its credential is known only at apply.
func (r *runResource) groupFor(ctx context.Context, name string, planning bool) (g *catalog.Group, changing, partial bool, err error) {
	if p, ok := r.data.plannedGroups.get(name); ok && planning {
		if p.value == nil {
			return nil, false, false, errKnownAtApply
		}
		return p.value, p.changing, p.partial, nil
	}
	g, err = readDefinition(ctx, r.data, (*catalog.Store).TrustedGroup, name)
	if err == nil && g == nil {
		err = &missingGroupError{name: name, namespace: r.data.catalogNamespace}
	}
	return g, false, false, err
}

// missingGroupError: the run names a group that is neither in the catalog
// nor planned before the run.
type missingGroupError struct{ name, namespace string }

func (e *missingGroupError) Error() string {
	return fmt.Sprintf("container group %q does not exist in catalog namespace %q; create it with a "+
		"kubeplay_container_group resource, and make the run depend on it", e.name, e.namespace)
}

// labelFor is groupFor for node labels.
func (r *runResource) labelFor(ctx context.Context, name string, planning bool) (*podspec.Label, bool, error) {
	if p, ok := r.data.plannedLabels.get(name); ok && planning {
		if p.value == nil {
			return nil, false, errKnownAtApply
		}
		return p.value, p.changing, nil
	}
	l, err := readDefinition(ctx, r.data, (*catalog.Store).TrustedLabel, name)
	if err == nil && l == nil {
		err = fmt.Errorf("node label %q does not exist in catalog namespace %q; create it with a "+
			"kubeplay_node_label resource, and make the run depend on it", name, r.data.catalogNamespace)
	}
	return l, false, err
}

// target reads the run's group name, named at attribute at, and node
// label, and the group's clients.
func (r *runResource) target(ctx context.Context, name string, at path.Path, m runModel, planning bool) (*runTarget, error) {
	g, changing, partial, err := r.groupFor(ctx, name, planning)
	if err != nil {
		return nil, err
	}
	credChanging := partial
	if planning && g.Credential != "" {
		if _, ok := r.data.changingCredentials.get(g.Credential); ok {
			changing, credChanging = true, true
		}
	}
	var c *kubeclient.Clients
	if partial {
		// The group's credential is known only at apply: render, but no dry run.
		err, changing = errKnownAtApply, true
	} else {
		c, err = r.data.credentialClients(ctx, g.Credential)
	}
	if err != nil {
		if !planning {
			return nil, fmt.Errorf("container group %q: %w", name, err)
		}
		tflog.Debug(ctx, "no dry run of the run's pod: its credential is not usable yet", map[string]any{"reason": err.Error()})
		c = nil
	}
	t := &runTarget{group: engineGroup(g), clients: c, changing: changing, credChanging: credChanging, at: at, priority: g.Priority}
	if c != nil {
		t.group.PodSecurityVersion = serverPolicyVersion(ctx, c)
	}
	if ln := m.NodeLabel.ValueString(); ln != "" {
		l, labelChanging, err := r.labelFor(ctx, ln, planning)
		if err != nil {
			return nil, err
		}
		t.label, t.changing = l, t.changing || labelChanging
	}
	return t, nil
}

// engine returns a run engine with c that shares this walk's orphan sweeps
// and dry runs, and logs to Terraform's log.
func (r *runResource) engine(ctx context.Context, c *kubeclient.Clients) *runengine.Engine {
	return engineFor(ctx, r.data, c)
}

// engineFor is an engine of c that shares the provider's sweeps and dry
// runs and logs with tflog.
func engineFor(ctx context.Context, d *providerData, c *kubeclient.Clients) *runengine.Engine {
	return runengine.New(c, runengine.Options{
		Sweeps: d.sweeps.Do, DryRuns: d.dryRuns.Do, Key: d.signingKey,
		Log: func(level slog.Level, msg string, f map[string]any) {
			switch {
			case level >= slog.LevelWarn:
				tflog.Warn(ctx, msg, f)
			case level >= slog.LevelInfo:
				tflog.Info(ctx, msg, f)
			default:
				tflog.Debug(ctx, msg, f)
			}
		},
	})
}

func (r *runResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return // destroy
	}
	var plan runModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if !req.State.Raw.IsNull() {
		// Terraform plans a replacement as a create, so this is a no-op or an
		// update of settings that do not run anything: the record stays known.
		var state runModel
		resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
		if r.planProject(ctx, &plan, &state, resp); len(resp.RequiresReplace) > 0 || resp.Diagnostics.HasError() {
			return
		}
		plan.Status, plan.ExitCode, plan.Output = state.Status, state.ExitCode, state.Output
		plan.StatusReason, plan.Timeline = state.StatusReason, state.Timeline
		plan.HostCount = state.HostCount
		plan.HostCounts = carriedHostCounts(ctx, state.HostCounts, state.HostStats, &resp.Diagnostics)
		plan.HostStats = keptHostStats(ctx, state.HostStats, state.RecordAllHosts, plan.RecordAllHosts, &resp.Diagnostics)
		plan.PodName, plan.NodeName, plan.StartedAt, plan.FinishedAt = state.PodName, state.NodeName, state.StartedAt, state.FinishedAt
		plan.RenderedPod, plan.RunNamespace, plan.LaunchAttempts = state.RenderedPod, state.RunNamespace, state.LaunchAttempts
		plan.PlannedTargets = state.PlannedTargets
		plan.FailedTasks, plan.FailedTaskCount, plan.Artifacts = state.FailedTasks, state.FailedTaskCount, state.Artifacts
		if plan.ContainerGroup.IsUnknown() {
			plan.ContainerGroup = state.ContainerGroup // where the run was placed
		}
		plan.PlannedChanges = state.PlannedChanges
		plan.SliceResults, plan.RerunHosts = state.SliceResults, state.RerunHosts
		if resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...); !resp.Diagnostics.HasError() {
			r.planDriftCheck(ctx, req, plan, state, resp)
		}
		return
	}
	if r.planProject(ctx, &plan, nil, resp); resp.Diagnostics.HasError() {
		return
	}
	if r.planRerun(ctx, &plan, &resp.Diagnostics); resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("rerun_hosts"), plan.RerunHosts)...)
	if r.planCreateCheck(ctx, req, &plan, resp); resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("planned_changes"), plan.PlannedChanges)...)
	if r.data == nil || plan.ContainerGroup.IsUnknown() && plan.ContainerGroups.IsUnknown() {
		return
	}
	r.planPods(ctx, plan, resp)
}

// planPods renders the run's pod in each of its groups and dry-runs it
// there; the plan gets each group's target, and the pod when it is the same
// in every group.
func (r *runResource) planPods(ctx context.Context, plan runModel, resp *resource.ModifyPlanResponse) {
	if !plan.Node.IsNull() {
		return // the held node's pod, known after apply
	}
	names, paths := groupNames(plan, runengine.OperationCreate)
	var rendered []string
	var targets []attr.Value
	var t *runTarget
	for i, name := range names {
		if name == "" {
			return // known at apply
		}
		var pod string
		t, pod = r.planPod(ctx, plan, name, paths[i], resp)
		targets = append(targets, plannedTarget(name, t, pod))
		if t == nil {
			rendered = append(rendered, "") // no pod known for all groups
			continue
		}
		rendered = append(rendered, pod)
	}
	l, d := types.ListValue(plannedTargetType, targets)
	if resp.Diagnostics.Append(d...); !d.HasError() {
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("planned_targets"), l)...)
	}
	if len(rendered) > 0 && rendered[0] != "" && !slices.ContainsFunc(rendered, func(p string) bool { return p != rendered[0] }) {
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("rendered_pod"), types.StringValue(rendered[0]))...)
	}
	if t != nil && (t.label == nil || t.label.Type != podspec.TypeNamespace) {
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("run_namespace"), types.StringNull())...)
	}
}

// planPod renders the run's pod in group name, named at attribute at, and
// dry-runs it. It returns the group's target (nil when the group is not
// known yet or is missing) and the pod as YAML ("" when rendered at apply).
func (r *runResource) planPod(ctx context.Context, plan runModel, name string, at path.Path, resp *resource.ModifyPlanResponse) (*runTarget, string) {
	create, diags := plan.Timeouts.Create(ctx, defaultRunTimeout)
	resp.Diagnostics.Append(diags...)
	t, err := r.target(ctx, name, at, plan, true)
	var missing *missingGroupError
	if errors.As(err, &missing) && len(at.Steps()) > 1 {
		// A warning, as dry-run refusals are: the pre-destroy refresh plans
		// runs that are not in the state, and must not block a destroy.
		resp.Diagnostics.AddAttributeWarning(at, "Container Group Not Found", err.Error()+" (for example "+
			"container_groups = [kubeplay_container_group.a.name]). The apply fails unless the group exists by then.")
		return nil, ""
	}
	if errors.Is(err, catalog.ErrTampered) {
		// A warning, as above; the apply refuses the run with the same words.
		var d diag.Diagnostics
		addDefinitionRefused(&d, at, err)
		for _, e := range d.Errors() {
			resp.Diagnostics.AddAttributeWarning(at, e.Summary(), e.Detail()+" Until then, applying this run fails.")
		}
		return nil, ""
	}
	if err != nil {
		// The group may be created in this same apply: nothing to check yet.
		tflog.Debug(ctx, "run pod not rendered at plan time", map[string]any{"reason": err.Error()})
		return nil, ""
	}
	pod, err := runengine.RenderPod(t.group, t.label, runengine.RunInfo{Name: plan.Name.ValueString()}, runengine.PodDeadline(create))
	if errors.Is(err, runengine.ErrRenderAtApply) {
		tflog.Debug(ctx, "run pod not rendered at plan time", map[string]any{"reason": err.Error()})
		return t, ""
	}
	if err != nil {
		addRenderError(err, t.attr(), &resp.Diagnostics)
		return nil, ""
	}
	rendered, _ := podspec.ToYAML(pod)
	if t.clients != nil {
		if err := r.engine(ctx, t.clients).DryRun(ctx, t.group, t.label, pod); err != nil {
			refused(ctx, t, err, &resp.Diagnostics)
		}
	}
	return t, rendered
}

// groupNames are the groups a run may run in, with the attribute that
// names each: container_groups for a create that has them, else
// container_group (a destroy runs where its run was placed). An element
// unknown at plan is "".
func groupNames(m runModel, operation string) ([]string, []path.Path) {
	if m.ContainerGroups.IsNull() || m.ContainerGroups.IsUnknown() || operation == runengine.OperationDestroy {
		return []string{m.ContainerGroup.ValueString()}, []path.Path{path.Root("container_group")}
	}
	var names []string
	var paths []path.Path
	for i, v := range m.ContainerGroups.Elements() {
		s, _ := v.(types.String)
		names, paths = append(names, s.ValueString()), append(paths, path.Root("container_groups").AtListIndex(i))
	}
	return names, paths
}

// addRenderError reports a run pod that the group and node label make
// impossible, at the run attribute that names the culprit.
func addRenderError(err error, group path.Path, diags *diag.Diagnostics) {
	if addPodSecurityError(err, group, diags) {
		return
	}
	attr, remedy := group, "Fix the container group's pod_spec_override or labels."
	var rl *podspec.ReservedLabelError
	switch {
	case errors.Is(err, podspec.ErrWorkspacePlaceholder):
		attr, remedy = path.Root("node_label"), workspaceRemedy
	case errors.As(err, &rl) && (rl.Input == podspec.InputLabelLabels || rl.Input == podspec.InputDynamicLabels):
		attr, remedy = path.Root("node_label"), "Fix the node label's labels, dynamic_labels or spec."
	}
	diags.AddAttributeError(attr, "Run Pod Cannot Be Rendered",
		fmt.Sprintf("Rendering the run's pod failed: %v. %s", err, remedy))
}

// refused reports a dry run of the run's pod that the cluster refused. Every
// refusal is a warning: the run is not in the state yet, and Terraform plans
// it in the refresh before a destroy too, where an error would block
// terraform destroy; the apply then fails the same way if nothing changed.
func refused(ctx context.Context, t *runTarget, err error, diags *diag.Diagnostics) {
	re := &runengine.RefusedError{Namespace: t.group.Namespace, Err: err}
	errors.As(err, &re)
	switch {
	case re.Reason == runengine.RefusedQuota:
		diags.AddAttributeWarning(t.attr(), "Container Group Is Full Now",
			fmt.Sprintf("A dry run of the run's pod was refused by the quota of group %q: %v. At apply the run waits up to "+
				"the group's pod_pending_timeout for capacity.", t.group.Name, err))
	case t.changing && re.Reason == runengine.RefusedNotFound:
		tflog.Debug(ctx, "no dry run of the run's pod: its namespace comes with this apply", map[string]any{"reason": err.Error()})
	case t.changing:
		// The group, label or credential this apply changes may be the fix.
		diags.AddAttributeWarning(t.attr(), "Run Pod Refused By The Cluster As It Is Now",
			fmt.Sprintf("A server-side dry run of the run's pod in namespace %q was refused: %v. Container group %q, its "+
				"credential or the run's node label change in this apply, so the run may succeed; if it does not, fix "+
				"them or the cluster's policy.", re.Namespace, err, t.group.Name))
	default:
		summary, detail := clusterProblem(re, t.group)
		if summary == "" {
			summary, detail = "Run Pod Would Be Refused", fmt.Sprintf("A server-side dry run of the run's pod in namespace %q "+
				"was refused: %v. Fix the container group (pod_spec_override, credential permissions) or the cluster's policy.",
				re.Namespace, err)
		}
		diags.AddAttributeWarning(t.attr(), summary, detail+" Until then, applying this run fails "+
			"the same way. (A warning, not an error, so that it never blocks terraform destroy, which plans runs that are "+
			"not in the state too.)")
	}
}

// clusterProblem names a group's credential that its cluster rejects or
// cannot be verified with; "" for other refusals.
func clusterProblem(re *runengine.RefusedError, g runengine.Group) (summary, detail string) {
	cred := g.Credential
	if cred == "" {
		cred = "(the provider's connection)"
	}
	switch re.Reason {
	case runengine.RefusedUnauthorized:
		return "Run Credential Rejected", fmt.Sprintf("The API server at %s answered 401 Unauthorized to credential %s of "+
			"container group %q: its token is wrong, expired or revoked. Give the credential a valid token (set its "+
			"bearer_token_wo and change its bearer_token_wo_version to send it), or recreate it.", re.Host, cred, g.Name)
	case runengine.RefusedTLS:
		return "Run Cluster TLS Verification Failed", fmt.Sprintf("Connecting to %s with credential %s of container group "+
			"%q failed TLS verification: %v. Set the credential's ca_cert to the CA that signed the API server's "+
			"certificate.", re.Host, cred, g.Name, re.Cause)
	case runengine.RefusedUnreachable:
		return "Run Cluster Unreachable", fmt.Sprintf("Credential %s of container group %q could not connect to %s: %v. "+
			"Check that the API server is running and reachable from where Terraform runs.", cred, g.Name, re.Host, re.Cause)
	}
	return "", ""
}

func (r *runResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	r.data.markApplying()
	var plan, config runModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.Config.Get(ctx, &config)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := plan.Timeouts.Create(ctx, defaultRunTimeout)
	resp.Diagnostics.Append(diags...)
	plan.ID = types.StringValue(runengine.NewID())
	if !resolveProject(ctx, &plan, false, &resp.Diagnostics) {
		return
	}
	// The cluster and pod must be the ones the plan showed, where the plan
	// knew them: the group, its credential or the label may have changed
	// since (catalog signatures do not stop whoever holds the key).
	hooks := runHooks{planned: plannedTargets(plan)}
	if r.applyRerun(ctx, &plan, &resp.Diagnostics); resp.Diagnostics.HasError() {
		return
	}
	out, ok := r.execute(ctx, plan, config, runengine.OperationCreate, plan.Playbook.ValueString(), timeout, hooks, &resp.Diagnostics)
	if !ok || projectChanged(ctx, plan, out.Err, &resp.Diagnostics) {
		return
	}
	r.storeRerun(ctx, plan, plan.ID.ValueString(), out.Result, &resp.Diagnostics)
	plan.ContainerGroup = types.StringValue(out.group)
	plan.SliceResults = sliceResultsValue(out.slices, &resp.Diagnostics)
	plan.RenderedPod, plan.RunNamespace = types.StringValue(out.Rendered), stringOrNull(out.Namespace)
	plan.PlannedTargets = targetsValue(out.Targets, &resp.Diagnostics)
	r.record(&plan, out.Result, &resp.Diagnostics)
	if plan.PlannedChanges.IsUnknown() {
		plan.PlannedChanges = types.ObjectNull(plannedChangesType.AttrTypes) // no check ran at plan
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	setIdentity(ctx, resp.Identity, &resp.Diagnostics, resp.State)
	r.deleteCheck(ctx, req.Config, plan)
	r.report(plan, out.Result, "Run", "timeouts.create", &resp.Diagnostics)
}

// runHooks are told of a run's progress besides the Terraform log: the
// kubeplay_run action streams them to Terraform's UI.
type runHooks struct {
	onLine, onEvent func(string)
	// planned are the targets the plan showed, by group (plannedTargets).
	planned map[string]*runengine.Target
}

// runOutcome is what execute gives: the run's outcome (its slices' merged),
// the group it ran in (its first slice's), and each slice's, for a sliced run.
type runOutcome struct {
	runengine.Outcome
	group  string
	slices []sliceOutcome
}

// execute runs playbook (or the command) once in a fresh pod of the run's
// group, or of the first of its container_groups with room (placement), or
// in slices, a pod each (run_slices.go); the resource and the action share
// it. ok is false when the run did not start.
func (r *runResource) execute(ctx context.Context, plan, config runModel, operation, playbook string, timeout time.Duration, hooks runHooks, diags *diag.Diagnostics) (runOutcome, bool) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	targets, cands, groupsAt := r.candidates(ctx, plan, operation, diags)
	b := r.bundle(ctx, plan, config, playbook, diags)
	if diags.HasError() {
		return runOutcome{}, false
	}
	id := plan.ID.ValueString()
	req := runengine.Request{
		RunInfo:   runengine.RunInfo{ID: id, Name: plan.Name.ValueString()},
		Operation: operation, Bundle: b, Forks: plan.Forks.ValueInt64(),
		OutputLimit: int(plan.OutputLimit.ValueInt64()), KeepPodOnFailure: plan.KeepPodOnFailure.ValueBool(), Timeout: timeout,
		OnLine: func(line string) {
			tflog.Info(ctx, line, map[string]any{"run": id, "operation": operation})
			if hooks.onLine != nil {
				hooks.onLine(line)
			}
		},
		OnEvent: hooks.onEvent,
		Node:    plan.Node.ValueString(),
	}
	cands = withPlanned(cands, hooks.planned)
	var out runOutcome
	if n := int(plan.Slices.ValueInt64()); n > 1 && operation == runengine.OperationCreate {
		for _, sl := range runengine.PlaceSlices(ctx, n, req, cands) {
			t := targets[max(sl.Placed, 0)]
			if sl.Err == nil {
				sl.Outcome.Result = r.classified(sl.Outcome.Result, t)
				if out.group == "" {
					out.group = t.group.Name
				}
			}
			out.slices = append(out.slices, sliceOutcome{Slice: sl, group: t.group.Name})
		}
		if out.group == "" {
			notStarted(out.slices[0].Err, groupsAt, diags)
			return out, false
		}
		ss := make([]runengine.Slice, len(out.slices))
		for i, s := range out.slices {
			ss[i] = s.Slice
		}
		out.Outcome = runengine.MergeSlices(ss)
		cleanupWarnings(out.Warnings, diags)
		logSlices(ctx, id, out.slices)
		logTimeline(ctx, id, out.Result)
		return out, true
	}
	o, placed, err := runengine.Place(ctx, req, cands)
	if err != nil {
		notStarted(err, groupsAt, diags)
	}
	t := targets[max(placed, 0)]
	o.Result = r.classified(o.Result, t)
	cleanupWarnings(o.Warnings, diags)
	if err == nil {
		logTimeline(ctx, id, o.Result)
	}
	return runOutcome{Outcome: o, group: t.group.Name}, err == nil
}

// classified words a run's error that the credential or the cluster's
// reachability explains as at plan time.
func (r *runResource) classified(res runner.Result, t *runTarget) runner.Result {
	if res.Err != nil && t.clients != nil {
		re := runengine.Classify(res.Err, t.group.Namespace, t.clients.Config.Host)
		if summary, detail := clusterProblem(re, t.group); summary != "" {
			res.Err = &clusterProblemError{summary: summary, detail: detail, err: res.Err}
			res.Reason = runner.ReasonClusterUnavailable
		}
	}
	return res
}

// candidates are the groups the run may run in, in the order it names
// them, with their clients, and the attribute that names them.
func (r *runResource) candidates(ctx context.Context, m runModel, operation string, diags *diag.Diagnostics) ([]*runTarget, []runengine.Candidate, path.Path) {
	names, paths := groupNames(m, operation)
	groupsAt := path.Root("container_group")
	if len(paths[0].Steps()) > 1 {
		groupsAt = path.Root("container_groups")
	}
	var targets []*runTarget
	var cands []runengine.Candidate
	for i, name := range names {
		t, err := r.target(ctx, name, paths[i], m, false)
		if err != nil {
			if !addDefinitionRefused(diags, paths[i], err) {
				diags.AddAttributeError(paths[i], "Container Group Unavailable", err.Error()+".")
			}
			continue
		}
		targets = append(targets, t)
		cands = append(cands, runengine.Candidate{Engine: r.engine(ctx, t.clients), Group: t.group, Label: t.label, Priority: t.priority})
	}
	return targets, cands, groupsAt
}

// clusterProblemError is a run's error that the credential or the cluster's
// reachability explains, worded as at plan time.
type clusterProblemError struct {
	summary, detail string
	err             error
}

func (e *clusterProblemError) Error() string { return e.err.Error() }
func (e *clusterProblemError) Unwrap() error { return e.err }

// notStarted reports why the engine could not start a run; group is the
// attribute that names the run's group or groups.
func notStarted(err error, group path.Path, diags *diag.Diagnostics) {
	if addPodSecurityError(err, group, diags) {
		return
	}
	var ce *runengine.CapacityError
	var ne *runengine.NamespaceError
	var pe *runengine.PlacementError
	var node *runengine.NodeError
	var pm *runengine.PlanMismatchError
	switch {
	case errors.As(err, &pm) && pm.Cluster:
		diags.AddAttributeError(path.Root("planned_targets"), "Run Target Differs From Plan", fmt.Sprintf("The cluster "+
			"of container group %q, the server or CA of its credential, changed between plan and apply, so the run would "+
			"send its pod, bundle and secrets somewhere the plan did not show. Nothing was created, claimed or sent. "+
			"The difference, from the planned target to the one at apply:\n\n%s\nPlan again (terraform plan), check "+
			"planned_targets, and apply that plan. If you did not make the change, find out who can write the catalog "+
			"namespace before you do.", pm.Group, pm.Diff))
	case errors.As(err, &pm):
		diags.AddAttributeError(path.Root("rendered_pod"), "Run Pod Differs From Plan", fmt.Sprintf("Container group "+
			"%q or the run's node label changed between plan and apply, so the run's pod is not the one the plan "+
			"showed. Nothing was created, claimed or sent to a pod. The difference, from the planned pod to the pod "+
			"at apply:\n\n%s\nPlan again (terraform plan), check rendered_pod and planned_targets, and apply that plan. If you did not "+
			"make the change, find out who can write the catalog namespace before you do.", pm.Group, pm.Diff))
	case errors.As(err, &node) && node.Busy:
		diags.AddAttributeError(path.Root("node"), "Held Node Busy", err.Error()+". Nothing of the run is left, and "+
			"the turns of the runs still on the node are theirs. Apply again, or lengthen the run's create timeout when "+
			"it waits behind long runs.")
	case errors.As(err, &node):
		diags.AddAttributeError(path.Root("node"), "Held Node Unavailable", err.Error()+". Apply the kubeplay_node "+
			"again (a node whose pod went is replaced by the next plan), or run without node.")
	case errors.As(err, &pe):
		diags.AddAttributeError(group, "Container Group Capacity Unavailable", err.Error()+". Raise their "+
			"max_concurrent_runs or max_forks, add a group to container_groups, or lengthen a pod_pending_timeout.")
	case errors.As(err, &ce):
		attr, detail := group, err.Error()
		if ce.Kind == capacity.Forks {
			attr = path.Root("forks")
		}
		if ce.Waited > 0 {
			detail = fmt.Sprintf("container group %q had no room for %d more %s within its pod_pending_timeout of %s", ce.Group, ce.N, ce.Kind, ce.Waited)
		}
		diags.AddAttributeError(attr, "Container Group Capacity Unavailable", detail+".")
	case errors.As(err, &ne):
		diags.AddAttributeError(path.Root("node_label"), "Run Namespace Not Created", fmt.Sprintf("Node label %q gives "+
			"each run a namespace, and making %s failed: %v. The credential of container group %q needs to create "+
			"namespaces, service accounts, roles, role bindings and service account tokens, and to hold the "+
			"permissions the label's Role grants.", ne.Label, ne.Namespace, ne.Err, ne.Group))
	default: // runengine.ErrGroupUnavailable
		diags.AddAttributeError(group, "Container Group Unavailable", err.Error()+".")
	}
}

// addPodSecurityError reports a run pod below its group's pod security
// level, at node_label when the label makes it fail; false for other errors.
func addPodSecurityError(err error, group path.Path, diags *diag.Diagnostics) bool {
	var pe *runengine.PodSecurityError
	if !errors.As(err, &pe) {
		return false
	}
	if pe.Label == "" {
		diags.AddAttributeError(group, "Run Pod Below Pod Security Level",
			fmt.Sprintf("The run pod of container group %q %s\nFix the group's pod_spec_override, or lower its "+
				"pod_security_level.", pe.Group, violationList(pe.Err)))
		return true
	}
	diags.AddAttributeError(path.Root("node_label"), "Run Pod Below Pod Security Level",
		fmt.Sprintf("Container group %q holds its run pods to the Pod Security Standard level %q, and with node label "+
			"%q the run pod %s\nRemove what the checks name from the label (privileged, volumes, spec), use another "+
			"label, or set the group's pod_security_level to a level that allows it.", pe.Group, pe.Err.Level, pe.Label,
			violationList(pe.Err)))
	return true
}

// cleanupWarnings reports what the engine could not give back.
func cleanupWarnings(warnings []error, diags *diag.Diagnostics) {
	for _, w := range warnings {
		var re *runengine.ReleaseError
		var ne *runengine.NamespaceError
		switch {
		case errors.As(w, &re):
			diags.AddWarning("Releasing Capacity Failed", fmt.Sprintf("Container group %q: %v. The claim expires by "+
				"itself at the run's deadline.", re.Group, re.Err))
		case errors.As(w, &ne):
			diags.AddWarning("Run Namespace Not Deleted", fmt.Sprintf("Deleting namespace %s of the run failed: %v. The next "+
				"run of container group %q deletes it once its deadline has passed; or delete it with kubectl.", ne.Namespace, ne.Err, ne.Group))
		default:
			diags.AddWarning("Run Clean-up Failed", w.Error()+".")
		}
	}
}

// bundle assembles the payload; write-only values come from config.
func (r *runResource) bundle(ctx context.Context, plan, config runModel, playbook string, diags *diag.Diagnostics) bundle.Bundle {
	b := bundle.Bundle{
		Playbook: playbook, Inventory: plan.Inventory.ValueString(),
		Limit: goStrings(ctx, plan.Limit, diags), Tags: goStrings(ctx, plan.Tags, diags),
		SkipTags: goStrings(ctx, plan.SkipTags, diags), AdHoc: adHocBundle(ctx, plan, diags), OnlyHosts: plan.rerunList,
		Verbosity: int(plan.Verbosity.ValueInt64()), Forks: int(plan.Forks.ValueInt64()),
		Check: plan.CheckMode.ValueBool(), Diff: plan.DiffMode.ValueBool(),
		Files: goStringMap(ctx, plan.Files, diags), Env: goStringMap(ctx, plan.Env, diags),
		SecretEnv: goStringMap(ctx, config.EnvWO, diags),
	}
	if !plan.Command.IsNull() {
		diags.Append(plan.Command.ElementsAs(ctx, &b.Command, false)...)
		b.Playbook = ""
	}
	if !plan.ExtraVars.IsNull() {
		v, err := extraVarsJSON(plan.ExtraVars)
		if err != nil {
			diags.AddAttributeError(path.Root("extra_vars"), "Invalid Extra Variables", err.Error())
		}
		b.ExtraVars = v
	}
	if v := config.ExtraVarsWO.ValueString(); v != "" {
		b.SecretVars = []byte(v)
	}
	b.SSH, b.Vault = sshSettings(ctx, plan, config, diags)
	projectBundle(ctx, plan, &b, diags)
	return b
}

// record puts a run's result into the model.
func (r *runResource) record(m *runModel, res runner.Result, diags *diag.Diagnostics) {
	m.Status = types.StringValue(res.Status)
	m.StatusReason = types.StringNull()
	if res.Reason != "" {
		m.StatusReason = types.StringValue(string(res.Reason))
	}
	m.Timeline = timelineValue(res.Timeline, diags)
	m.ExitCode = types.Int64Value(int64(res.ExitCode))
	m.Output = types.StringValue(res.Output)
	m.PodName = types.StringValue(res.PodName)
	m.NodeName = types.StringValue(res.NodeName)
	m.StartedAt = types.StringValue(res.StartedAt.Format(time.RFC3339))
	m.FinishedAt = types.StringValue(res.FinishedAt.Format(time.RFC3339))
	m.LaunchAttempts = types.Int64Value(int64(res.LaunchAttempts))
	recordResult(m, res, diags)
}

// report turns a run that did not succeed into an error diagnostic (or a
// warning with ignore_failure) that quotes the output tail and the pod's
// warning events; timeout names the timeouts attribute that bounded it.
func (r *runResource) report(m runModel, res runner.Result, what, timeout string, diags *diag.Diagnostics) {
	if res.Status == runner.StatusSuccessful {
		return
	}
	var detail strings.Builder
	switch res.Status {
	case runner.StatusFailed:
		fmt.Fprintf(&detail, "The playbook in pod %s exited with code %d%s.", res.PodName, res.ExitCode, reasonNote(res.Reason))
		if res.Reason == runner.ReasonOOMKilled {
			detail.WriteString(" The kernel killed a process of the run at the container's memory limit: give the " +
				"pod more memory (the group's or node label's memory), or make the task use less.")
		}
	case runner.StatusCanceled:
		detail.WriteString("The run was canceled")
		if res.Message != "" && res.Message != context.Canceled.Error() {
			detail.WriteString(": " + res.Message)
		}
		// Only Terraform cancels: the run's own timeout ends it as an error.
		detail.WriteString(". Terraform stopped the provider during the run: it was interrupted (Ctrl-C, or the " +
			"SIGINT or SIGTERM that a CI job's cancel or time limit sends), or it exited. A run that passes its own " +
			"timeout (timeouts create, or delete for a destroy playbook) is not canceled but ends with status error. " +
			"The run is not recorded as done, so the next apply (or destroy) runs it again; if nobody interrupted " +
			"Terraform, give the job that runs it more time than its runs' timeouts.")
	default:
		fmt.Fprintf(&detail, "The run could not complete: %s%s.", res.Message, reasonNote(res.Reason))
		if res.Reason == runner.ReasonTimeout {
			fmt.Fprintf(&detail, " Raise %s, or find where the time went in the run's timeline: a pod that waited "+
				"for room on a node or for its image shows it in its warning events.", timeout)
		}
	}
	if res.PodKept {
		fmt.Fprintf(&detail, " The pod %s was kept (keep_pod_on_failure); delete it when done.", res.PodName)
		if ns := m.RunNamespace.ValueString(); ns != "" {
			fmt.Fprintf(&detail, " So was the run's namespace %s.", ns)
		}
	}
	if len(res.Events) > 0 {
		detail.WriteString("\n\nThe pod's last warning events:\n  " + strings.Join(res.Events, "\n  "))
	}
	if tail := lastLines(res.Output, 20); tail != "" {
		detail.WriteString("\n\nThe output's last lines:\n" + tail)
	}
	summary := map[string]string{
		runner.StatusFailed: what + " Failed", runner.StatusError: what + " Error", runner.StatusCanceled: what + " Canceled",
	}[res.Status]
	var cp *clusterProblemError
	if errors.As(res.Err, &cp) {
		summary = cp.summary
		text := detail.String()
		detail.Reset()
		detail.WriteString(cp.detail + "\n\n" + text)
	}
	if m.IgnoreFailure.ValueBool() {
		diags.AddWarning(summary, outputtail.Sanitize(detail.String())+"\n\nignore_failure is set: the apply goes on.")
		return
	}
	diags.AddError(summary, outputtail.Sanitize(detail.String())) // quotes pod output, events and messages
}

// reasonNote names a run's status_reason in its diagnostic, "" for none.
func reasonNote(r runner.Reason) string {
	if r == "" {
		return ""
	}
	return fmt.Sprintf(" (status_reason %s)", r)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func (r *runResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	// A run is a record: what it did does not change afterwards.
	setReadIdentity(ctx, req, resp)
	// This walk refreshed the run: its plan may check it for drift.
	var id types.String
	if resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("id"), &id)...); r.data != nil && !id.IsNull() {
		r.data.markRefreshed(id.ValueString())
	}
}

func (r *runResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	r.data.markApplying()
	// Only attributes that do not change the run (destroy_playbook, keep_pod_on_failure,
	// ignore_failure, output_limit, record_all_hosts, timeouts) reach here: keep
	// the record, but for the hosts record_all_hosts turned off drops.
	var plan, state runModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	state.DestroyPlaybook, state.KeepPodOnFailure, state.IgnoreFailure = plan.DestroyPlaybook, plan.KeepPodOnFailure, plan.IgnoreFailure
	state.OutputLimit, state.Timeouts = plan.OutputLimit, plan.Timeouts
	// Counts first: a record from before host_counts counts the hosts it kept.
	state.HostCounts = carriedHostCounts(ctx, state.HostCounts, state.HostStats, &resp.Diagnostics)
	state.HostStats = keptHostStats(ctx, state.HostStats, state.RecordAllHosts, plan.RecordAllHosts, &resp.Diagnostics)
	state.RecordAllHosts = plan.RecordAllHosts
	state.PlanCheck, state.PlanCheckDiffs = plan.PlanCheck, plan.PlanCheckDiffs
	state.RerunFailedHosts = plan.RerunFailedHosts
	state.ProjectDir, state.ProjectIgnore = plan.ProjectDir, plan.ProjectIgnore // same content, as planned
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
	setIdentity(ctx, resp.Identity, &resp.Diagnostics, resp.State)
}

func (r *runResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	r.data.markApplying()
	var state runModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || state.DestroyPlaybook.IsNull() {
		return
	}
	timeout, diags := state.Timeouts.Delete(ctx, defaultRunTimeout)
	resp.Diagnostics.Append(diags...)
	if !resolveProject(ctx, &state, true, &resp.Diagnostics) {
		return
	}
	// Write-only values are not in state or in a destroy's config: the destroy
	// playbook gets the run's non-secret inputs.
	out, ok := r.execute(ctx, state, runModel{}, runengine.OperationDestroy, state.DestroyPlaybook.ValueString(), timeout, runHooks{}, &resp.Diagnostics)
	if !ok {
		return
	}
	state.RunNamespace = stringOrNull(out.Namespace)
	r.report(state, out.Result, "Destroy Playbook", "timeouts.delete", &resp.Diagnostics)
}

// configured replaces the run when container_group is set in the config and
// changes; the group a run was placed in is computed, and changes only with
// container_groups, which replaces the run itself.
func configured(_ context.Context, req planmodifier.StringRequest, resp *stringplanmodifier.RequiresReplaceIfFuncResponse) {
	resp.RequiresReplace = !req.ConfigValue.IsNull()
}
