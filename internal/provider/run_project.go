// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/projectdir"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/strictyaml"
)

// projectAttributes are the run's project directory, requirements and
// inventories attributes.
func projectAttributes() map[string]schema.Attribute {
	replaceStr := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	needsProject := path.MatchRoot("project_dir")
	return map[string]schema.Attribute{
		"project_dir": schema.StringAttribute{
			MarkdownDescription: "A directory on the machine that runs Terraform, shipped whole into the pod ([Inline Content Or A " +
				"Project Directory](#inline-content-or-a-project-directory)).",
			Optional: true, Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
		},
		"project_ignore": schema.ListAttribute{
			MarkdownDescription: "More paths to leave out of `project_dir`, as `.kubeplayignore` lines: `path.Match` globs; a leading " +
				"`/` anchors at the root, a trailing `/` matches directories.",
			Optional: true, ElementType: types.StringType,
			Validators: []validator.List{listvalidator.AlsoRequires(needsProject), listvalidator.ValueStringsAre(ignorePattern())},
		},
		"playbook_path": schema.StringAttribute{
			MarkdownDescription: "The playbook to run, by its path in `project_dir`.",
			Optional:            true, PlanModifiers: replaceStr,
			Validators: []validator.String{stringvalidator.AlsoRequires(needsProject), projectPath()},
		},
		"inventories": schema.ListAttribute{
			MarkdownDescription: "Inventories in `project_dir`, by path, passed with `-i` in this order, after `inventory`.",
			Optional:            true, ElementType: types.StringType,
			PlanModifiers: []planmodifier.List{listplanmodifier.RequiresReplace()},
			Validators: []validator.List{listvalidator.AlsoRequires(needsProject), listvalidator.SizeAtLeast(1),
				listvalidator.ValueStringsAre(projectPath())},
		},
		"requirements": schema.StringAttribute{
			MarkdownDescription: "A `requirements.yml` that `ansible-galaxy` installs before the playbook; a failed install ends the " +
				"run `failed`.",
			Optional: true, PlanModifiers: replaceStr, Validators: []validator.String{requirementsYAML()},
		},
		"project_hash": schema.StringAttribute{
			MarkdownDescription: "The SHA-256 of `project_dir`'s manifest (every path, type, mode and content hash). Null " +
				"without a project.",
			Computed: true,
		},
		"project_files": schema.MapAttribute{
			MarkdownDescription: "Every file of `project_dir` that was shipped, by path: `<mode> sha256:<hash>`, `symlink -> <target>` " +
				"or `dir <mode>`. Null without a project.",
			Computed: true, ElementType: types.StringType,
		},
	}
}

// projectPath accepts a clean relative path inside a project.
func projectPath() stringCheck {
	return stringCheck{
		desc: "value must be a clean relative path inside project_dir",
		check: func(_, s string) (string, string) {
			if err := projectdir.ValidatePath(s); err != nil {
				return "Invalid Project Path", fmt.Sprintf("%q must be relative, slash-separated, in clean form (no "+
					"\".\" or \"..\" element, no doubled or trailing slash) and inside project_dir.", s)
			}
			return "", ""
		},
	}
}

// ignorePattern accepts a pattern projectdir.NewIgnore accepts.
func ignorePattern() stringCheck {
	return stringCheck{
		desc: "value must be a path.Match pattern",
		check: func(_, s string) (string, string) {
			if _, err := projectdir.NewIgnore([]string{s}); err != nil {
				return "Invalid Ignore Pattern", fmt.Sprintf("%q is not a valid pattern: use *, ? and [...] globs, "+
					"with / between path elements.", s)
			}
			return "", ""
		},
	}
}

// requirementsYAML accepts strict YAML.
func requirementsYAML() stringCheck {
	return stringCheck{
		desc: "value must be a requirements.yml document",
		check: func(_, s string) (string, string) {
			if _, err := strictyaml.ToJSON([]byte(s)); err != nil {
				return "Invalid Requirements", fmt.Sprintf("requirements is not valid YAML: %v.", err)
			}
			return "", ""
		},
	}
}

// scanProject reads m's project directory; nil without one.
func scanProject(ctx context.Context, m runModel, diags *diag.Diagnostics) *projectdir.Manifest {
	return readProject(ctx, m, projectdir.Scan, diags)
}

// readProject reads m's project directory with read (projectdir.Scan or
// projectdir.List); nil without one.
func readProject(ctx context.Context, m runModel, read func(string, []string) (*projectdir.Manifest, error), diags *diag.Diagnostics) *projectdir.Manifest {
	if m.ProjectDir.IsNull() || m.ProjectDir.IsUnknown() {
		return nil
	}
	var extra []string
	diags.Append(m.ProjectIgnore.ElementsAs(ctx, &extra, false)...)
	dir := m.ProjectDir.ValueString()
	man, err := read(dir, extra)
	if err != nil {
		projectError(dir, extra, err, diags)
		return nil
	}
	return man
}

// projectError reports a project that cannot be read.
func projectError(dir string, extra []string, err error, diags *diag.Diagnostics) {
	var pe *projectdir.PathError
	switch {
	case errors.Is(err, projectdir.ErrBadPattern) && errors.As(err, &pe) && slices.Contains(extra, pe.Path):
		diags.AddAttributeError(path.Root("project_ignore"), "Invalid Ignore Pattern", err.Error()+".")
	case errors.Is(err, projectdir.ErrBadPattern):
		diags.AddAttributeError(path.Root("project_dir"), "Invalid Ignore Pattern", fmt.Sprintf("%s in %s: %v. Fix the "+
			"pattern: *, ? and [...] globs, with / between path elements.", projectdir.IgnoreFile, dir, err))
	case errors.Is(err, projectdir.ErrLinkOutside):
		diags.AddAttributeError(path.Root("project_dir"), "Project Link Leaves The Project", fmt.Sprintf("In %s, %v. "+
			"Only links to paths inside the project can be shipped: copy the target in, or ignore the link in "+
			"project_ignore or %s.", dir, err, projectdir.IgnoreFile))
	case errors.Is(err, projectdir.ErrHardLink):
		diags.AddAttributeError(path.Root("project_dir"), "Project File Is A Shared Hard Link", fmt.Sprintf("In %s, %v. "+
			"Replace the file with a copy of its own (cp FILE FILE.tmp && mv FILE.tmp FILE), or ignore it in "+
			"project_ignore or %s.", dir, err, projectdir.IgnoreFile))
	case errors.Is(err, projectdir.ErrSpecial):
		diags.AddAttributeError(path.Root("project_dir"), "Project Holds A Special File", fmt.Sprintf("In %s, %v. "+
			"Remove it or ignore it in project_ignore or %s.", dir, err, projectdir.IgnoreFile))
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, projectdir.ErrNotDir):
		diags.AddAttributeError(path.Root("project_dir"), "Project Directory Not Found", fmt.Sprintf("%v. project_dir "+
			"must name a directory on the machine that runs Terraform, for example \"${path.module}/ansible\".", err))
	default:
		diags.AddAttributeError(path.Root("project_dir"), "Project Directory Unreadable", fmt.Sprintf("Reading %s "+
			"failed: %v.", dir, err))
	}
}

// projectValues are project_hash and project_files for man (null for nil).
func projectValues(man *projectdir.Manifest, diags *diag.Diagnostics) (types.String, types.Map) {
	if man == nil {
		return types.StringNull(), types.MapNull(types.StringType)
	}
	files := map[string]attr.Value{}
	for p, d := range man.Files() {
		files[p] = types.StringValue(d)
	}
	m, d := types.MapValue(types.StringType, files)
	diags.Append(d...)
	return types.StringValue(man.Hash()), m
}

// planProject puts the project's manifest into the plan, checks the paths
// that name its files, and replaces a run whose project changed.
func (r *runResource) planProject(ctx context.Context, plan *runModel, state *runModel, resp *resource.ModifyPlanResponse) {
	if plan.ProjectDir.IsUnknown() || plan.ProjectIgnore.IsUnknown() {
		plan.ProjectHash, plan.ProjectFiles = types.StringUnknown(), types.MapUnknown(types.StringType)
	} else {
		man := scanProject(ctx, *plan, &resp.Diagnostics)
		if resp.Diagnostics.HasError() {
			return
		}
		plan.ProjectHash, plan.ProjectFiles = projectValues(man, &resp.Diagnostics)
		plan.project = man
		if !plan.PlaybookPath.IsUnknown() && !plan.Playbook.IsUnknown() && known(plan.Inventories.Elements()...) && known(slices.Collect(maps.Values(plan.Files.Elements()))...) &&
			!plan.Inventories.IsUnknown() && !plan.Files.IsUnknown() {
			b := bundle.Bundle{Playbook: plan.Playbook.ValueString(), Files: goStringMap(ctx, plan.Files, &resp.Diagnostics)}
			projectBundle(ctx, *plan, &b, &resp.Diagnostics)
			projectPathError(b.ValidateProject(), &resp.Diagnostics)
		}
	}
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("project_hash"), plan.ProjectHash)...)
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("project_files"), plan.ProjectFiles)...)
	if state != nil && !plan.ProjectHash.Equal(state.ProjectHash) {
		resp.RequiresReplace = append(resp.RequiresReplace, path.Root("project_files"))
	}
}

// projectPathError reports a bundle.ProjectPathError at its attribute.
func projectPathError(err error, diags *diag.Diagnostics) {
	var pe *bundle.ProjectPathError
	if !errors.As(err, &pe) {
		return
	}
	attr := map[string]string{"playbook": "playbook_path", "inventories": "inventories", "files": "files"}[pe.Field]
	detail := fmt.Sprintf("%q is not a file of project_dir (after the ignore rules): check the path, relative to "+
		"the project's root, and that no ignore pattern leaves it out.", pe.Path)
	switch {
	case errors.Is(err, bundle.ErrNotAFile):
		detail = fmt.Sprintf("%q is a directory of project_dir; name the playbook file in it.", pe.Path)
	case errors.Is(err, bundle.ErrInProject) && pe.Field == "playbook":
		attr, detail = "playbook", fmt.Sprintf("An inline playbook is written to %s in the project, which already "+
			"holds that path. Rename the project's file, or name it with playbook_path.", pe.Path)
	case errors.Is(err, bundle.ErrInProject):
		detail = fmt.Sprintf("files[%q] would overwrite the project's own %q. Rename one of them.", pe.Path, pe.Path)
	}
	if attr == "" {
		diags.AddError("Invalid Project Path", err.Error()+".")
		return
	}
	diags.AddAttributeError(path.Root(attr), "Invalid Project Path", detail)
}

// resolveProject reads the project at apply. For a create it must be as
// planned: with a planned hash, the files are listed here and read once, as
// they are shipped, and the run's ship checks the hash (projectChanged);
// a destroy playbook runs with the project as it is now.
func resolveProject(ctx context.Context, m *runModel, destroy bool, diags *diag.Diagnostics) bool {
	if !destroy && !m.ProjectHash.IsUnknown() && !m.ProjectHash.IsNull() {
		m.project = readProject(ctx, *m, projectdir.List, diags)
		m.projectHash = m.ProjectHash.ValueString()
		return !diags.HasError()
	}
	man := scanProject(ctx, *m, diags)
	if diags.HasError() {
		return false
	}
	hash, files := projectValues(man, diags)
	switch {
	case m.ProjectHash.IsUnknown() || m.ProjectHash.Equal(hash):
	case destroy:
		diags.AddAttributeWarning(path.Root("project_dir"), "Project Changed Since The Run",
			"The destroy playbook runs with the project as it is now, which differs from the one the run was created with.")
	default:
		changedSincePlan(*m, man, diags)
		return false
	}
	if !destroy {
		m.ProjectHash, m.ProjectFiles = hash, files
	}
	m.project = man
	return true
}

// changedSincePlan reports a project that is not as planned.
func changedSincePlan(m runModel, man *projectdir.Manifest, diags *diag.Diagnostics) {
	diags.AddAttributeError(path.Root("project_dir"), "Project Changed Since Plan", fmt.Sprintf("The files of "+
		"%s changed between plan and apply (paths: %s). Plan again.", m.ProjectDir.ValueString(),
		strings.Join(changedPaths(m.ProjectFiles, man), ", ")))
}

// projectChanged reports a run whose ship found the project changed since
// plan (nothing ran in the pod), naming the paths as they are now.
func projectChanged(ctx context.Context, m runModel, err error, diags *diag.Diagnostics) bool {
	if m.projectHash == "" || !errors.Is(err, projectdir.ErrChanged) {
		return false
	}
	var now diag.Diagnostics
	man := scanProject(ctx, m, &now)
	if now.HasError() {
		diags.Append(now...)
		return true
	}
	changedSincePlan(m, man, diags)
	return true
}

// changedPaths lists the paths whose planned value differs from man's.
func changedPaths(planned types.Map, man *projectdir.Manifest) []string {
	now := map[string]string{}
	if man != nil {
		now = man.Files()
	}
	var out []string
	for p, v := range planned.Elements() {
		if s, ok := v.(types.String); !ok || s.ValueString() != now[p] {
			out = append(out, p)
		}
	}
	for p := range now {
		if _, ok := planned.Elements()[p]; !ok {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	if len(out) > 20 {
		out = append(out[:20], fmt.Sprintf("and %d more", len(out)-20))
	}
	return out
}

// projectBundle adds the project, its paths and the requirements to b.
func projectBundle(ctx context.Context, m runModel, b *bundle.Bundle, diags *diag.Diagnostics) {
	b.Project, b.ProjectHash = m.project, m.projectHash
	b.Requirements = m.Requirements.ValueString()
	if p := m.PlaybookPath.ValueString(); p != "" && b.Playbook == m.Playbook.ValueString() {
		b.ProjectPlaybook, b.Playbook = p, ""
	}
	if !m.Inventories.IsNull() && !m.Inventories.IsUnknown() {
		diags.Append(m.Inventories.ElementsAs(ctx, &b.Inventories, false)...)
	}
}

// known reports whether every element is known.
func known(elems ...attr.Value) bool {
	for _, v := range elems {
		if v.IsUnknown() {
			return false
		}
	}
	return true
}
