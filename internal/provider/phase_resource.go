// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/resourcevalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/identityschema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/phase"
)

var (
	_ resource.Resource                     = (*phaseResource)(nil)
	_ resource.ResourceWithConfigure        = (*phaseResource)(nil)
	_ resource.ResourceWithImportState      = (*phaseResource)(nil)
	_ resource.ResourceWithIdentity         = (*phaseResource)(nil)
	_ resource.ResourceWithValidateConfig   = (*phaseResource)(nil)
	_ resource.ResourceWithModifyPlan       = (*phaseResource)(nil)
	_ resource.ResourceWithConfigValidators = (*phaseResource)(nil)
)

// privateMembersKey holds, in private state, the resolved members and the
// digest of the fields kubeplay owns in each, which Read compares.
const privateMembersKey = "members"

// driftedDigest replaces an object's digest in state when its live fields
// were changed by another writer, so that plan shows the change.
const driftedDigest = "changed-outside-terraform"

// phaseDryRunTimeout bounds the plan-time dry run.
const phaseDryRunTimeout = 30 * time.Second

// phaseTimeout is the default of each key of a phase's timeouts.
const phaseTimeout = 5 * time.Minute

type phaseResource struct {
	data *providerData
}

func newPhaseResource() resource.Resource { return &phaseResource{} }

type phaseModel struct {
	ID              types.String   `tfsdk:"id"`
	Name            types.String   `tfsdk:"name"`
	Cluster         types.String   `tfsdk:"cluster"`
	Documents       types.List     `tfsdk:"documents"`
	Sensitive       types.List     `tfsdk:"sensitive_documents"`
	Kustomization   types.String   `tfsdk:"kustomization"`
	AllowRemote     types.Bool     `tfsdk:"allow_remote_kustomize"`
	Wait            types.Bool     `tfsdk:"wait"`
	WaitConditions  types.List     `tfsdk:"wait_conditions"`
	Prune           types.Bool     `tfsdk:"prune"`
	InventoryPolicy types.String   `tfsdk:"inventory_policy"`
	ForceConflicts  types.Bool     `tfsdk:"force_conflicts"`
	InventoryID     types.String   `tfsdk:"inventory_id"`
	Objects         types.List     `tfsdk:"objects"`
	Timeouts        timeouts.Value `tfsdk:"timeouts"`
}

type waitConditionModel struct {
	APIVersion types.String `tfsdk:"api_version"`
	Kind       types.String `tfsdk:"kind"`
	JSONPath   types.String `tfsdk:"jsonpath"`
	Value      types.String `tfsdk:"value"`
}

var phaseObjectType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"api_version": types.StringType,
	"kind":        types.StringType,
	"namespace":   types.StringType,
	"name":        types.StringType,
	"digest":      types.StringType,
}}

func (r *phaseResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_phase"
}

func (r *phaseResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "A phase is one step that brings a cluster to a desired state by applying a bundle of Kubernetes " +
			"documents, as an airshipctl phase with the `KubernetesApply` executor does. Order phases with " +
			"`depends_on`: `terraform plan` is then the phase plan and `terraform apply` runs it.\n\nApply is a " +
			"server-side apply with field manager `kubeplay`: Namespaces and CustomResourceDefinitions first, " +
			"then, once the CRDs are established, everything else. Readiness is judged by kstatus, watched rather " +
			"than polled; a resource that reaches a failed status ends the wait at once with its message.\n\nThe " +
			"set of applied objects is an ApplySet: its parent is the ConfigMap `kubeplay-phase-<name>` in the " +
			"provider's `catalog_namespace` on the target cluster, and every member carries the label " +
			"`applyset.kubernetes.io/part-of`. A partial failure orphans nothing. Destroy deletes custom " +
			"resources and other objects first, then CRDs, then namespaces, and waits until they are gone, up to " +
			"`timeouts.delete`; objects still there then fail the destroy, and the next destroy continues.\n\nWhen " +
			"the cluster is reachable, plan runs a server-side dry-run apply of every new or changed document, so " +
			"errors show in `terraform plan` with the document's kind and name. Objects deleted or changed " +
			"outside Terraform show as a diff of `objects`.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The phase's name.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": schema.StringAttribute{
				MarkdownDescription: "The phase's name, unique per cluster: a lowercase RFC 1123 label of at most 48 " +
					"characters, since it names the inventory ConfigMap `kubeplay-phase-<name>`. Changing it replaces the phase.",
				Required:      true,
				Validators:    []validator.String{dnsLabel(), stringvalidator.LengthAtMost(48)},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"cluster": schema.StringAttribute{
				MarkdownDescription: "The name of the `kubeplay_credential` to apply with, as airship's `clusterName` picks " +
					"a kubeconfig context. Unset means the provider's own cluster. Changing it replaces the phase.",
				Optional:      true,
				Validators:    []validator.String{dnsLabel()},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"documents": schema.ListAttribute{
				MarkdownDescription: "The bundle: one or more strings of YAML or JSON, each holding one or more documents " +
					"separated by `---`. Documents labelled `kubeplay.io/apply: \"false\"` or airship's " +
					"`airshipit.org/deploy-k8s: \"false\"` are skipped. Their content shows in plan output, so they may not " +
					"hold a Secret (even an opted-out one): put Secrets in `sensitive_documents`. Set `documents`, " +
					"`sensitive_documents` or both, or `kustomization` alone.",
				Optional:    true,
				ElementType: types.StringType,
				Validators:  []validator.List{listvalidator.SizeAtLeast(1)},
			},
			"sensitive_documents": schema.ListAttribute{
				MarkdownDescription: "More of the bundle, as `documents` but sensitive: Terraform never shows their content " +
					"in plan output or logs, so they may hold Secrets. Their documents follow those of `documents`. Like every " +
					"sensitive value, they are stored in the state in plain text.",
				Optional:    true,
				Sensitive:   true,
				ElementType: types.StringType,
				Validators:  []validator.List{listvalidator.SizeAtLeast(1)},
			},
			"kustomization": schema.StringAttribute{
				MarkdownDescription: "The bundle as a directory holding a `kustomization.yaml`, rendered with the kustomize library as " +
					"airshipctl does; only the path shows in plan output, so it may make Secrets. A remote resource or " +
					"base is a plan-time error unless `allow_remote_kustomize` is set. Conflicts with `documents` and " +
					"`sensitive_documents`.",
				Optional:   true,
				Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
			},
			"allow_remote_kustomize": schema.BoolAttribute{
				MarkdownDescription: "Whether the kustomization may fetch remote content while validate, plan and apply render it. HTTP(S) " +
					"files are fetched with a 30-second timeout and an 8 MiB limit each; git URLs are cloned with the " +
					"`git` program. Defaults to `false`.",
				Optional: true,
				Computed: true,
				Default:  booldefault.StaticBool(false),
			},
			"wait": schema.BoolAttribute{
				MarkdownDescription: "Whether apply waits for the objects to be ready (by kstatus, or by `wait_conditions`), up to " +
					"`timeouts.create` or `timeouts.update`. With `false`, only CRDs are waited for; destroy waits either " +
					"way. Defaults to `true`.",
				Optional: true,
				Computed: true,
				Default:  booldefault.StaticBool(true),
			},
			"wait_conditions": schema.ListNestedAttribute{
				MarkdownDescription: "Readiness rules per kind, used instead of kstatus's `Current` for objects of that " +
					"apiVersion and kind; a kstatus `Failed` status still ends the wait. Every rule of a kind must hold.",
				Optional: true,
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"api_version": schema.StringAttribute{
						MarkdownDescription: "The apiVersion of the objects the rule applies to, for example `batch/v1`.",
						Required:            true,
						Validators:          []validator.String{stringvalidator.LengthAtLeast(1)},
					},
					"kind": schema.StringAttribute{
						MarkdownDescription: "The kind of the objects the rule applies to, for example `Job`.",
						Required:            true,
						Validators:          []validator.String{stringvalidator.LengthAtLeast(1)},
					},
					"jsonpath": schema.StringAttribute{
						MarkdownDescription: "A JSONPath expression, as `kubectl wait --for=jsonpath` takes, for example " +
							"`{.status.succeeded}`.",
						Required:   true,
						Validators: []validator.String{jsonPath()},
					},
					"value": schema.StringAttribute{
						MarkdownDescription: "The value the expression must yield, compared as a string.",
						Required:            true,
					},
				}},
			},
			"prune": schema.BoolAttribute{
				MarkdownDescription: "Whether apply deletes the objects that left the bundle. When `false` they are " +
					"released instead: they stay in the cluster without the phase's membership label. Defaults to `true`.",
				Optional: true,
				Computed: true,
				Default:  booldefault.StaticBool(true),
			},
			"inventory_policy": schema.StringAttribute{
				MarkdownDescription: "Which existing objects the phase may take over, as in airshipctl: `strict` takes over " +
					"none (an object that exists outside this phase is an error), `adopt` takes over objects no inventory owns, " +
					"`force_adopt` takes over any, even another phase's. Defaults to `strict`.",
				Optional:   true,
				Computed:   true,
				Default:    stringdefault.StaticString(string(phase.PolicyStrict)),
				Validators: []validator.String{stringvalidator.OneOf(phase.Policies...)},
			},
			"force_conflicts": schema.BoolAttribute{
				MarkdownDescription: "Whether server-side apply takes over fields that another field manager owns " +
					"(`kubectl apply --server-side --force-conflicts`). When `false`, such a conflict fails the apply. " +
					"Defaults to `false`.",
				Optional: true,
				Computed: true,
				Default:  booldefault.StaticBool(false),
			},
			"inventory_id": schema.StringAttribute{
				MarkdownDescription: "The ApplySet id of the phase, the value of the `applyset.kubernetes.io/part-of` label " +
					"on every member.",
				Computed: true,
			},
			"objects": schema.ListNestedAttribute{
				MarkdownDescription: "The objects of the bundle in document order, known at plan time whenever the " +
					"documents are. `digest` summarizes each document's content; it reads `" + driftedDigest + "` when " +
					"another writer changed fields the phase applied, and `" + notReadyDigest + "` when the last apply's wait " +
					"ended before the object was ready; an object deleted outside Terraform is missing from the list. Each " +
					"shows as a diff, and the next apply applies the object again.",
				Computed: true,
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"api_version": schema.StringAttribute{MarkdownDescription: "The object's apiVersion.", Computed: true},
					"kind":        schema.StringAttribute{MarkdownDescription: "The object's kind.", Computed: true},
					"namespace": schema.StringAttribute{
						MarkdownDescription: "The object's namespace as the document gives it; empty for cluster-scoped " +
							"objects and for namespaced ones that go to `default`.",
						Computed: true,
					},
					"name":   schema.StringAttribute{MarkdownDescription: "The object's name.", Computed: true},
					"digest": schema.StringAttribute{MarkdownDescription: "A hash of the document's content.", Computed: true},
				}},
			},
		},
		Blocks: map[string]schema.Block{
			"timeouts": timeoutsBlock(ctx, timeouts.Opts{Create: true, Update: true, Delete: true,
				CreateDescription: "How long the first apply may take, as a duration: the apply and, with `wait`, the wait for " +
					"readiness. An apply past it fails and keeps what it applied, so the next apply continues. Defaults " +
					"to `5m`.",
				UpdateDescription: "How long a later apply may take, as `create` for the first: the apply, the waits " +
					"and the deletion of pruned objects until they are gone. Defaults to `5m`.",
				DeleteDescription: "How long destroy may take, as a duration: the deletion of every object, wave by wave, until gone. A " +
					"destroy past it fails and the phase stays in the state. Destroy reads it from the state. Defaults to " +
					"`5m`.",
			}),
		},
	}
}

func (r *phaseResource) ConfigValidators(context.Context) []resource.ConfigValidator {
	bundle := []path.Expression{path.MatchRoot("documents"), path.MatchRoot("sensitive_documents"), path.MatchRoot("kustomization")}
	return []resource.ConfigValidator{
		resourcevalidator.AtLeastOneOf(bundle...),
		resourcevalidator.Conflicting(bundle[0], bundle[2]),
		resourcevalidator.Conflicting(bundle[1], bundle[2]),
	}
}

// IdentitySchema: a phase is its name on its cluster, as in the import id
// `<cluster>/<name>`.
func (r *phaseResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = identityschema.Schema{Attributes: map[string]identityschema.Attribute{
		"name": identityschema.StringAttribute{
			Description:       "The phase's name, unique per cluster: its inventory is `kubeplay-phase-<name>` in the `catalog_namespace`.",
			RequiredForImport: true,
		},
		"cluster": identityschema.StringAttribute{
			Description:       "The `kubeplay_credential` the phase applies with; unset for the provider's own cluster.",
			OptionalForImport: true,
		},
	}}
}

func (r *phaseResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (r *phaseResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m phaseModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	// Parse documents already known, so YAML errors point at their element.
	if objs, known := r.bundle(ctx, m, &resp.Diagnostics); known && len(objs) == 0 && !resp.Diagnostics.HasError() {
		resp.Diagnostics.AddAttributeError(bundlePath(m), "Empty Bundle",
			"The phase's bundle holds no document to apply (all are empty or opted out with kubeplay.io/apply or "+
				"airshipit.org/deploy-k8s set to \"false\"). Add a document, or remove the phase.")
	}
	if !m.Wait.IsUnknown() && !m.Wait.IsNull() && !m.Wait.ValueBool() && !m.WaitConditions.IsNull() {
		resp.Diagnostics.AddAttributeWarning(path.Root("wait_conditions"), "Wait Conditions Not Used",
			"wait is false, so apply does not wait for the objects to be ready and wait_conditions have no effect. "+
				"Remove them, or set wait = true.")
	}
}

func bundlePath(m phaseModel) path.Path {
	switch {
	case !m.Kustomization.IsNull():
		return path.Root("kustomization")
	case m.Documents.IsNull() && !m.Sensitive.IsNull():
		return path.Root("sensitive_documents")
	}
	return path.Root("documents")
}

// docPath is the attribute a document came from: bundle elements number
// documents, then sensitive_documents.
func docPath(m phaseModel, doc int) path.Path {
	if !m.Kustomization.IsNull() {
		return path.Root("kustomization")
	}
	if n := len(m.Documents.Elements()); !m.Sensitive.IsNull() && doc >= n {
		return path.Root("sensitive_documents").AtListIndex(doc - n)
	}
	return path.Root("documents").AtListIndex(doc)
}

// docName names the bundle element a document came from.
func docName(m phaseModel, doc int) string {
	if !m.Kustomization.IsNull() {
		return "the rendered kustomization"
	}
	if n := len(m.Documents.Elements()); !m.Sensitive.IsNull() && doc >= n {
		return fmt.Sprintf("sensitive_documents[%d]", doc-n)
	}
	return fmt.Sprintf("documents[%d]", doc)
}

// bundle parses the documents or renders the kustomization; known is false
// while any input is unknown.
func (r *phaseResource) bundle(ctx context.Context, m phaseModel, diags *diag.Diagnostics) ([]phase.Object, bool) {
	var b phase.Bundle
	switch {
	case !m.Kustomization.IsNull():
		if m.Kustomization.IsUnknown() || m.AllowRemote.IsUnknown() {
			return nil, false
		}
		y, ok := renderKustomization(m, diags)
		if !ok {
			return nil, true
		}
		// Only the path shows in plan output: the rendering may hold Secrets.
		b.Sensitive = []string{y}
	case m.Documents.IsNull() && m.Sensitive.IsNull():
		return nil, false
	default:
		var known, sknown bool
		b.Documents, known = listStrings(ctx, m.Documents, diags)
		b.Sensitive, sknown = listStrings(ctx, m.Sensitive, diags)
		if !known || !sknown {
			return nil, false
		}
	}
	objs, err := b.Parse()
	if err != nil {
		addParseError(m, err, diags)
		return nil, true
	}
	return objs, true
}

// listStrings reads a list of strings; known is false while it or an
// element is unknown.
func listStrings(ctx context.Context, l types.List, diags *diag.Diagnostics) ([]string, bool) {
	if l.IsUnknown() {
		return nil, false
	}
	var elems []types.String
	diags.Append(l.ElementsAs(ctx, &elems, false)...)
	out := make([]string, 0, len(elems))
	for _, e := range elems {
		if e.IsUnknown() {
			return nil, false
		}
		out = append(out, e.ValueString())
	}
	return out, true
}

// renderKustomization renders the kustomization, offline unless the phase
// allows remote content.
func renderKustomization(m phaseModel, diags *diag.Diagnostics) (string, bool) {
	at := path.Root("kustomization")
	y, err := phase.Render(m.Kustomization.ValueString(), phase.RenderOptions{
		AllowRemote: m.AllowRemote.ValueBool(), Fetch: phase.DefaultFetchLimits,
	})
	var fe *phase.FetchError
	switch {
	case err == nil:
		return y, true
	case errors.As(err, new(*phase.RemoteError)):
		for _, e := range joined(err) {
			var re *phase.RemoteError
			if errors.As(e, &re) {
				diags.AddAttributeError(at, "Remote Kustomization Refused", fmt.Sprintf("%s: %s refers to remote %q. "+
					"The phase renders kustomizations offline: vendor the content into the kustomization's directory, or "+
					"set allow_remote_kustomize = true to fetch it at every validate, plan and apply.", re.File, re.Field, re.URL))
			}
		}
	case errors.As(err, &fe):
		diags.AddAttributeError(at, "Remote Kustomization Unavailable", fmt.Sprintf("%v. HTTP(S) files are fetched "+
			"within %s and %d MiB each: vendor a larger or slower one into the kustomization's directory.",
			err, phase.DefaultFetchLimits.Timeout, phase.DefaultFetchLimits.MaxBytes>>20))
	default:
		diags.AddAttributeError(at, "Invalid Kustomization", err.Error()+".")
	}
	return "", false
}

// joined returns the errors of a join, or err alone.
func joined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// addParseError reports a document the engine cannot read on its element.
func addParseError(m phaseModel, err error, diags *diag.Diagnostics) {
	var (
		pe  *phase.ParseError
		dup *phase.DuplicateError
		sec *phase.SecretError
	)
	at, detail := bundlePath(m), err.Error()
	switch {
	case errors.As(err, &sec):
		diags.AddAttributeError(docPath(m, sec.Doc), "Secret In Documents", fmt.Sprintf("%s, YAML document %d: %s is a "+
			"Secret, and documents show in plan output. Move it to sensitive_documents, whose content Terraform never shows.",
			docName(m, sec.Doc), sec.Part, sec.Ref))
		return
	case errors.As(err, &pe):
		at, detail = docPath(m, pe.Doc), fmt.Sprintf("%s, YAML document %d: %v", docName(m, pe.Doc), pe.Part, pe.Err)
	case errors.As(err, &dup):
		at, detail = docPath(m, dup.Doc), fmt.Sprintf("%s: %s is also in %s; each object may appear once in a phase",
			docName(m, dup.Doc), dup.Ref, docName(m, dup.First))
	}
	diags.AddAttributeError(at, "Invalid Document", "The phase's bundle cannot be read: "+detail+".")
}

func objectsValue(objs []phase.Object) (types.List, diag.Diagnostics) {
	vals := make([]attr.Value, 0, len(objs))
	for _, o := range objs {
		vals = append(vals, objectValue(o.Ref, o.Digest))
	}
	return types.ListValue(phaseObjectType, vals)
}

func objectValue(r phase.Ref, digest string) attr.Value {
	return types.ObjectValueMust(phaseObjectType.AttrTypes, map[string]attr.Value{
		"api_version": types.StringValue(r.APIVersion()),
		"kind":        types.StringValue(r.GroupKind.Kind),
		"namespace":   types.StringValue(r.Namespace),
		"name":        types.StringValue(r.Name),
		"digest":      types.StringValue(digest),
	})
}

// stateObject is one element of the objects attribute.
type stateObject struct {
	ref    phase.Ref
	digest string
}

// stateObjects reads the objects attribute.
func stateObjects(l types.List) []stateObject {
	if l.IsNull() || l.IsUnknown() {
		return nil
	}
	var out []stateObject
	for _, v := range l.Elements() {
		o, ok := v.(types.Object)
		if !ok {
			continue
		}
		a := o.Attributes()
		str := func(k string) string {
			s, _ := a[k].(types.String)
			return s.ValueString()
		}
		out = append(out, stateObject{
			ref:    phase.RefFromAPIVersion(str("api_version"), str("kind"), str("namespace"), str("name")),
			digest: str("digest"),
		})
	}
	return out
}

// objectDigests reads the objects attribute as digests by phase.Ref.DocKey.
func objectDigests(l types.List) map[string]string {
	out := map[string]string{}
	for _, o := range stateObjects(l) {
		out[o.ref.DocKey()] = o.digest
	}
	return out
}

func (r *phaseResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return // destroy
	}
	var plan, state phaseModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if !req.State.Raw.IsNull() {
		resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	}
	if resp.Diagnostics.HasError() {
		return
	}
	if !plan.Name.IsUnknown() {
		plan.ID = plan.Name
		if r.data != nil {
			plan.InventoryID = types.StringValue(phase.ApplySetID(phase.InventoryName(plan.Name.ValueString()), r.data.catalogNamespace))
		}
	}
	objs, known := r.bundle(ctx, plan, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	plan.Objects = types.ListUnknown(phaseObjectType)
	if known {
		var d diag.Diagnostics
		plan.Objects, d = objectsValue(objs)
		resp.Diagnostics.Append(d...)
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
	if !known || r.data == nil || plan.Cluster.IsUnknown() || plan.Name.IsUnknown() {
		return
	}
	// Dry-run only what is new or changed, so an unchanged phase plans
	// without a single write request.
	if changed := phase.Changed(objs, objectDigests(state.Objects)); len(changed) > 0 {
		r.dryRun(ctx, plan, changed, &resp.Diagnostics)
	}
}

// dryRun reports the documents the API server refuses. A cluster that
// cannot be reached, or a credential not created yet, skips the check.
func (r *phaseResource) dryRun(ctx context.Context, plan phaseModel, objs []phase.Object, diags *diag.Diagnostics) {
	ctx, cancel := context.WithTimeout(ctx, phaseDryRunTimeout)
	defer cancel()
	e, err := r.newEngine(ctx, plan)
	if err != nil {
		tflog.Info(ctx, "phase dry run skipped: cluster not available at plan", map[string]any{"phase": plan.Name.ValueString(), "error": err.Error()})
		return
	}
	for _, de := range e.DryRun(ctx, objs, plan.ForceConflicts.ValueBool()) {
		if de.Unchecked {
			tflog.Info(ctx, "document not checked at plan", map[string]any{"object": de.Obj.String(), "reason": de.Err.Error()})
			continue
		}
		diags.AddAttributeError(docPath(plan, de.Obj.Doc), "Document Refused By The Cluster",
			fmt.Sprintf("The API server refused %s (%s) in a server-side dry-run apply: %s. Fix the document, "+
				"or give the credential the permissions it lacks.", de.Obj.Ref, docName(plan, de.Obj.Doc), phaseErrorText(de.Err, nil)))
	}
}

// memberState is what private state keeps between apply and Read.
type memberState struct {
	Members []phase.Ref       `json:"members"`
	Fields  map[string]string `json:"fields"`
}

type phasePrivateGetter interface {
	GetKey(context.Context, string) ([]byte, diag.Diagnostics)
}

type phasePrivateSetter interface {
	SetKey(context.Context, string, []byte) diag.Diagnostics
}

func loadMembers(ctx context.Context, p phasePrivateGetter, diags *diag.Diagnostics) memberState {
	var ms memberState
	b, d := p.GetKey(ctx, privateMembersKey)
	diags.Append(d...)
	if len(b) > 0 {
		if err := json.Unmarshal(b, &ms); err != nil {
			tflog.Warn(ctx, "ignoring unreadable private phase state", map[string]any{"error": err.Error()})
		}
	}
	if ms.Fields == nil {
		ms.Fields = map[string]string{}
	}
	return ms
}

func saveMembers(ctx context.Context, p phasePrivateSetter, ms memberState, diags *diag.Diagnostics) {
	b, err := json.Marshal(ms)
	if err != nil {
		diags.AddError("Saving Phase State Failed", err.Error())
		return
	}
	diags.Append(p.SetKey(ctx, privateMembersKey, b)...)
}

func (r *phaseResource) options(ctx context.Context, m phaseModel, diags *diag.Diagnostics) phase.Options {
	var conds []waitConditionModel
	if !m.WaitConditions.IsNull() && !m.WaitConditions.IsUnknown() {
		diags.Append(m.WaitConditions.ElementsAs(ctx, &conds, false)...)
	}
	opts := phase.Options{
		Policy: phase.Policy(m.InventoryPolicy.ValueString()),
		Force:  m.ForceConflicts.ValueBool(),
		Prune:  m.Prune.ValueBool(),
		Wait:   m.Wait.ValueBool(),
	}
	for _, c := range conds {
		opts.Conditions = append(opts.Conditions, phase.Condition{
			APIVersion: c.APIVersion.ValueString(), Kind: c.Kind.ValueString(),
			JSONPath: c.JSONPath.ValueString(), Value: c.Value.ValueString(),
		})
	}
	return opts
}

// newEngine returns the engine of the phase m in its cluster.
func (r *phaseResource) newEngine(ctx context.Context, m phaseModel) (*phase.Engine, error) {
	c, err := r.data.credentialClients(ctx, m.Cluster.ValueString())
	if err != nil {
		return nil, err
	}
	return phase.NewEngine(c, m.Name.ValueString(), r.data.catalogNamespace)
}

func (r *phaseResource) engine(ctx context.Context, m phaseModel, diags *diag.Diagnostics) *phase.Engine {
	e, err := r.newEngine(ctx, m)
	if err != nil {
		diags.AddAttributeError(path.Root("cluster"), "Cluster Unavailable",
			fmt.Sprintf("Phase %q cannot reach its cluster: %v.", m.Name.ValueString(), err))
		return nil
	}
	return e
}

func (r *phaseResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan phaseModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	limit, diags := plan.Timeouts.Create(ctx, phaseTimeout)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	r.apply(ctx, plan, memberState{}, phaseLimit{"create", limit}, &resp.State, resp.Private, &resp.Diagnostics)
	setIdentity(ctx, resp.Identity, &resp.Diagnostics, resp.State)
}

func (r *phaseResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state phaseModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	limit, diags := plan.Timeouts.Update(ctx, phaseTimeout)
	resp.Diagnostics.Append(diags...)
	prev := loadMembers(ctx, req.Private, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	r.apply(ctx, plan, prev, phaseLimit{"update", limit}, &resp.State, resp.Private, &resp.Diagnostics)
	setIdentity(ctx, resp.Identity, &resp.Diagnostics, resp.State)
}

// phaseLimit is the timeouts key that bounds an operation, and its value.
type phaseLimit struct {
	key string // create, update or delete
	d   time.Duration
}

func (l phaseLimit) String() string { return fmt.Sprintf("timeouts.%s (%s)", l.key, l.d) }

// apply runs the phase within limit and records what it applied, also when
// it failed part-way, so that the next apply continues and destroy finds
// everything.
func (r *phaseResource) apply(ctx context.Context, plan phaseModel, prev memberState, limit phaseLimit, state stateSetter, priv phasePrivateSetter, diags *diag.Diagnostics) {
	objs, known := r.bundle(ctx, plan, diags)
	if diags.HasError() {
		return
	}
	if !known {
		diags.AddError("Bundle Unknown", "The phase's documents are still unknown at apply time. This is a bug in the provider; please report it.")
		return
	}
	e := r.engine(ctx, plan, diags)
	if e == nil {
		return
	}
	opts := r.options(ctx, plan, diags)
	start := time.Now()
	actx, cancel := context.WithTimeout(ctx, limit.d)
	res, err := e.Apply(actx, objs, prev.Members, opts)
	cancel()
	tflog.Info(ctx, "phase applied", map[string]any{"phase": plan.Name.ValueString(), "objects": len(objs),
		"members": len(res.Members), "seconds": time.Since(start).Seconds(), "failed": err != nil})
	saveMembers(ctx, priv, memberState{Members: res.Members, Fields: res.MergeFields(prev.Fields)}, diags)
	plan.ID = plan.Name
	plan.InventoryID = types.StringValue(e.Inv.ID)
	if err != nil {
		// State keeps only the objects that are members now; those that did
		// not become ready keep a digest that makes the next plan apply and
		// wait for them again.
		plan.Objects = outcomesValue(phase.Outcomes(objs, res.Members, err), diags)
		addApplyErrors(plan, err, limit, diags)
	}
	diags.Append(state.Set(ctx, &plan)...)
}

// notReadyDigest replaces the digest of an object that did not become ready.
const notReadyDigest = "not-ready"

// outcomesValue is the objects attribute after a failed apply.
func outcomesValue(outs []phase.Outcome, diags *diag.Diagnostics) types.List {
	keep := make([]phase.Object, 0, len(outs))
	for _, o := range outs {
		if o.NotReady {
			o.Digest = notReadyDigest
		}
		keep = append(keep, o.Object)
	}
	l, d := objectsValue(keep)
	diags.Append(d...)
	return l
}

// phaseErrorText words an engine error for the user, with the remedy in
// terms of the phase's attributes; limit bounded the operation, if any.
func phaseErrorText(err error, limit *phaseLimit) string {
	var (
		owned    *phase.OwnedError
		conflict *phase.ConflictError
		wait     *phase.WaitError
	)
	switch {
	case errors.As(err, &owned) && owned.Owner == "" && owned.OwnerID == "":
		return fmt.Sprintf("the object exists and no phase owns it; inventory_policy %q does not take it over: "+
			"set inventory_policy = \"adopt\" to adopt it", owned.Policy)
	case errors.As(err, &owned):
		who := "ApplySet " + owned.OwnerID
		if owned.Owner != "" {
			who = fmt.Sprintf("phase %q", owned.Owner)
		}
		return fmt.Sprintf("the object belongs to %s; inventory_policy %q never takes over another inventory's object: "+
			"remove it from one of the phases, or set inventory_policy = \"force_adopt\"", who, owned.Policy)
	case errors.As(err, &conflict):
		return err.Error() + ": set force_conflicts = true to take them over"
	case errors.As(err, &wait) && !wait.Failed && limit != nil:
		return fmt.Sprintf("%v. The %s may take up to %s: raise it, or fix what keeps them from being %s",
			err, phaseOperation[limit.key], limit, wait.Want)
	case errors.Is(err, context.DeadlineExceeded) && limit != nil:
		return fmt.Sprintf("%v: the %s did not finish within %s. Raise it", err, phaseOperation[limit.key], limit)
	}
	return err.Error()
}

// phaseOperation names what each timeouts key bounds, for messages.
var phaseOperation = map[string]string{"create": "apply", "update": "apply", "delete": "destroy"}

// addApplyErrors reports each refused document on its attribute.
func addApplyErrors(m phaseModel, err error, limit phaseLimit, diags *diag.Diagnostics) {
	const remedy = "The objects applied so far are recorded in the phase's inventory and state; fix the cause and apply again."
	docs, rest := phase.DocErrors(err)
	for _, de := range docs {
		diags.AddAttributeError(docPath(m, de.Obj.Doc), "Phase Apply Failed",
			fmt.Sprintf("Phase %q could not apply %s (%s): %s. %s", m.Name.ValueString(), de.Obj.Ref, docName(m, de.Obj.Doc),
				phaseErrorText(de.Err, &limit), remedy))
	}
	for _, e := range rest {
		diags.AddError("Phase Apply Failed", fmt.Sprintf("Phase %q: %s. %s", m.Name.ValueString(), phaseErrorText(e, &limit), remedy))
	}
}

func (r *phaseResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	defer setReadIdentity(ctx, req, resp)
	var state phaseModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	e := r.engine(ctx, state, &resp.Diagnostics)
	if e == nil {
		return
	}
	recorded, found, err := e.Inv.Load(ctx)
	if err != nil {
		resp.Diagnostics.AddError("Reading Phase Inventory Failed", err.Error()+".")
		return
	}
	if !found {
		tflog.Info(ctx, "phase inventory is gone; removing the phase from state", map[string]any{"phase": state.Name.ValueString()})
		resp.State.RemoveResource(ctx)
		return
	}
	ms := loadMembers(ctx, req.Private, &resp.Diagnostics)
	obs, err := e.Observe(ctx, phase.Union(recorded, ms.Members), ms.Fields)
	if err != nil {
		resp.Diagnostics.AddError("Reading Phase Objects Failed", fmt.Sprintf("Phase %q: %v.", state.Name.ValueString(), err))
		return
	}
	l, d := types.ListValue(phaseObjectType, observedObjects(state.Objects, recorded, obs))
	resp.Diagnostics.Append(d...)
	state.Objects = l
	state.ID = state.Name
	state.InventoryID = types.StringValue(e.Inv.ID)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// observedObjects is the objects attribute as Read finds it: objects
// deleted outside Terraform drop out (plan adds them back) and drifted ones
// get driftedDigest. An imported phase, whose documents are unknown, lists
// the recorded members that exist.
func observedObjects(objects types.List, recorded []phase.Ref, obs *phase.Observation) []attr.Value {
	vals := []attr.Value{}
	if objects.IsNull() {
		for _, m := range recorded {
			if obs.Exists(m) {
				vals = append(vals, objectValue(m, "imported"))
			}
		}
	}
	for _, o := range stateObjects(objects) {
		exists, drifted := obs.Check(o.ref)
		if !exists {
			continue
		}
		if drifted {
			o.digest = driftedDigest
		}
		vals = append(vals, objectValue(o.ref, o.digest))
	}
	return vals
}

func (r *phaseResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state phaseModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	e := r.engine(ctx, state, &resp.Diagnostics)
	if e == nil {
		return
	}
	ms := loadMembers(ctx, req.Private, &resp.Diagnostics)
	d, diags := state.Timeouts.Delete(ctx, phaseTimeout)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	start := time.Now()
	dctx, cancel := context.WithTimeout(ctx, d)
	err := e.Destroy(dctx, ms.Members)
	cancel()
	if err != nil {
		addDestroyError(state.Name.ValueString(), err, phaseLimit{"delete", d}, &resp.Diagnostics)
		return
	}
	tflog.Info(ctx, "phase destroyed", map[string]any{"phase": state.Name.ValueString(), "members": len(ms.Members), "seconds": time.Since(start).Seconds()})
}

// addDestroyError reports a failed destroy. What it deleted stays in the
// inventory and the state until it is gone, so destroying again continues.
func addDestroyError(name string, err error, limit phaseLimit, diags *diag.Diagnostics) {
	var wait *phase.WaitError
	switch {
	case errors.As(err, &wait):
		diags.AddError("Phase Destroy Timed Out", fmt.Sprintf("Phase %q: %v. The destroy may take up to %s. They "+
			"were deleted but are still there: usually a finalizer that no controller removes (its controller is gone "+
			"or not running), or a controller still cleaning up. The phase keeps them in its inventory and the state, "+
			"and what destroy deletes after them (CRDs after other objects, namespaces last) is still there. Remove "+
			"what holds them (see their metadata.finalizers), or raise timeouts.delete (apply it first: destroy "+
			"reads it from the state), and destroy again: it continues where this one stopped.", name, err, limit))
	case errors.Is(err, context.DeadlineExceeded):
		diags.AddError("Phase Destroy Timed Out", fmt.Sprintf("Phase %q: %v: the destroy did not finish within %s. "+
			"Raise timeouts.delete (apply it first: destroy reads it from the state), and destroy again to delete "+
			"what is left.", name, err, limit))
	default:
		diags.AddError("Phase Destroy Failed", fmt.Sprintf("Phase %q: %v. Destroy again to delete what is left.", name, err))
	}
}

// ImportState takes `<name>` (the provider's cluster) or `<cluster>/<name>`,
// or an identity.
func (r *phaseResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	name, cluster := req.ID, ""
	if req.ID == "" {
		var id phaseIdentityModel
		resp.Diagnostics.Append(req.Identity.Get(ctx, &id)...)
		name, cluster = id.Name.ValueString(), id.Cluster.ValueString()
	} else if c, n, ok := strings.Cut(req.ID, "/"); ok {
		cluster, name = c, n
	}
	if resp.Diagnostics.HasError() {
		return
	}
	if name == "" {
		resp.Diagnostics.AddError("Invalid Import ID", fmt.Sprintf("Expected <name> or <cluster>/<name>, got %q.", req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), name)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("cluster"), stringOrNull(cluster))...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("wait"), true)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("prune"), true)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("inventory_policy"), string(phase.PolicyStrict))...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("force_conflicts"), false)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("allow_remote_kustomize"), false)...)
}
