package bundle

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/projectdir"
)

// Names of a run with a project or requirements.
const (
	// ProjectDir holds the project in the bundle; the playbook runs there,
	// so the project's ansible.cfg applies.
	ProjectDir = "project"
	// InlinePlaybookName is where an inline playbook goes inside a project,
	// beside the project's roles and group_vars.
	InlinePlaybookName = ".kubeplay-playbook.yml"
	// requirementsName holds the inline requirements.
	requirementsName = "galaxy-requirements.yml"
	// galaxyDir receives what ansible-galaxy installs for the run: first in
	// ANSIBLE_COLLECTIONS_PATH and ANSIBLE_ROLES_PATH.
	galaxyDir = "galaxy"
)

// ProjectRequirements are the requirement files a project may hold, as AWX
// reads them, each with the ansible-galaxy subcommand that installs it.
var ProjectRequirements = [][2]string{
	{"requirements.yml", "install"},
	{"collections/requirements.yml", "collection install"},
	{"roles/requirements.yml", "role install"},
}

// Errors about project paths; wrapped in a *ProjectPathError.
var (
	ErrNotInProject = errors.New("the project has no such path (or it is ignored)")
	ErrNotAFile     = errors.New("the path is a directory, not a file")
	ErrNeedsProject = errors.New("the path names a project file, but the run has no project")
	ErrInProject    = errors.New("the project already holds this path")
)

// ProjectPathError names the bundle field ("playbook", "inventories",
// "files") and the path at fault.
type ProjectPathError struct {
	Field, Path string
	Err         error
}

func (e *ProjectPathError) Error() string { return fmt.Sprintf("%s: %q: %v", e.Field, e.Path, e.Err) }
func (e *ProjectPathError) Unwrap() error { return e.Err }

// ValidateProject checks the project paths b names against b.Project.
func (b *Bundle) ValidateProject() error {
	m := b.Project
	if b.ProjectPlaybook != "" {
		if err := needEntry(m, "playbook", b.ProjectPlaybook, true); err != nil {
			return err
		}
	}
	for _, inv := range b.Inventories {
		if err := needEntry(m, "inventories", inv, false); err != nil {
			return err
		}
	}
	if m == nil {
		return nil
	}
	for p := range b.Files {
		for d := p; d != "."; d = parentDir(d) {
			if e, ok := m.Find(d); ok && (d == p || e.Kind != projectdir.Dir) {
				return &ProjectPathError{Field: "files", Path: p, Err: ErrInProject}
			}
		}
	}
	if b.hasInline() {
		if _, ok := m.Find(InlinePlaybookName); ok {
			return &ProjectPathError{Field: "playbook", Path: InlinePlaybookName, Err: ErrInProject}
		}
	}
	return nil
}

func parentDir(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return "."
}

func needEntry(m *projectdir.Manifest, field, p string, file bool) error {
	if err := projectdir.ValidatePath(p); err != nil {
		return &ProjectPathError{Field: field, Path: p, Err: err}
	}
	if m == nil {
		return &ProjectPathError{Field: field, Path: p, Err: ErrNeedsProject}
	}
	e, ok := m.Find(p)
	switch {
	case !ok:
		return &ProjectPathError{Field: field, Path: p, Err: ErrNotInProject}
	case file && e.Kind == projectdir.Dir:
		return &ProjectPathError{Field: field, Path: p, Err: ErrNotAFile}
	}
	return nil
}

// up is the way from where the playbook runs to kubeplay's own files.
func (b *Bundle) up() string {
	if b.Project != nil {
		return "../"
	}
	return ""
}

// filesPrefix is where Files go: inside the project when there is one.
func (b *Bundle) filesPrefix() string {
	if b.Project != nil {
		return ProjectDir + "/"
	}
	return ""
}

// inventoryArgs are the -i options: the inline (or default) inventory
// unless project inventories replace it, then those in order.
func (b *Bundle) inventoryArgs(inline string) []string {
	var args []string
	if b.Inventory != "" || len(b.Inventories) == 0 {
		args = append(args, "-i", b.up()+inline)
	}
	for _, inv := range b.Inventories {
		args = append(args, "-i", inv)
	}
	return args
}

// playbookArg names the playbook for ansible-playbook.
func (b *Bundle) playbookArg() string {
	switch {
	case b.ProjectPlaybook != "":
		return b.ProjectPlaybook
	case b.Project != nil:
		return InlinePlaybookName
	}
	return PlaybookName
}

// requirements returns the ansible-galaxy commands (subcommand, file as
// seen from where the playbook runs) the run starts with.
func (b *Bundle) requirements() [][2]string {
	var out [][2]string
	if b.Requirements != "" {
		out = append(out, [2]string{"install", b.up() + requirementsName})
	}
	if b.Project != nil {
		for _, r := range ProjectRequirements {
			if e, ok := b.Project.Find(r[0]); ok && e.Kind != projectdir.Dir {
				out = append(out, [2]string{r[1], r[0]})
			}
		}
	}
	return out
}

// playCommand is ansible-playbook's command line. With a project,
// requirements or a host step, a shell first moves into the project,
// installs the requirements with ansible-galaxy, ending the run with its
// exit code when one fails, and takes the run's hosts (hostStepScript,
// which gets want).
func (b *Bundle) playCommand(inventory, want string) []string {
	args := b.Args(inventory)
	reqs := b.requirements()
	if b.Project == nil && len(reqs) == 0 && !b.hostStep() {
		return append([]string{"ansible-playbook"}, args...)
	}
	var sb strings.Builder
	sb.WriteString("top=$PWD\n")
	if b.Project != nil {
		sb.WriteString("cd " + ProjectDir + " || exit 125\n")
	}
	if len(reqs) > 0 {
		// The run's own paths first, then the project's, then the image's defaults.
		sb.WriteString(`export ANSIBLE_COLLECTIONS_PATH="$top/` + galaxyDir + `/collections:$PWD/collections:$HOME/.ansible/collections:/usr/share/ansible/collections"` + "\n")
		sb.WriteString(`export ANSIBLE_ROLES_PATH="$top/` + galaxyDir + `/roles:$PWD/roles:$HOME/.ansible/roles:/usr/share/ansible/roles:/etc/ansible/roles"` + "\n")
		for _, r := range reqs {
			fmt.Fprintf(&sb, "echo %s\nansible-galaxy %s -r %s || { rc=$?; echo %s; exit $rc; }\n",
				Quote("kubeplay: ansible-galaxy "+r[0]+" -r "+r[1]), r[0], Quote(r[1]),
				Quote("kubeplay: ansible-galaxy could not install "+r[1]))
		}
	}
	if b.hostStep() {
		sb.WriteString(b.hostStepScript(inventory, want))
	}
	sb.WriteString(`exec ansible-playbook "$@"`)
	return append([]string{"sh", "-c", sb.String(), "ansible-playbook"}, args...)
}

// writeProject writes the project and the inline requirements: from disk,
// or with zeros for content when shape is set.
func (b *Bundle) writeProject(tw *tar.Writer, shape bool) error {
	if b.Requirements != "" {
		if err := addFile(tw, requirementsName, 0o644, []byte(b.Requirements)); err != nil {
			return err
		}
	}
	if b.Project == nil {
		return nil
	}
	if err := tw.WriteHeader(&tar.Header{Name: ProjectDir + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: epoch}); err != nil {
		return err
	}
	if shape {
		return b.Project.WriteShape(tw, ProjectDir+"/")
	}
	if err := b.Project.WriteTar(tw, ProjectDir+"/"); err != nil {
		return err
	}
	// The script comes after the project: a mismatch here ends the stream
	// before anything can run.
	if b.ProjectHash != "" && b.Project.Hash() != b.ProjectHash {
		return &projectdir.PathError{Path: b.Project.Root, Err: projectdir.ErrChanged}
	}
	return nil
}

// Size is the length of the stream Write writes, found without reading
// the project's files.
func (b *Bundle) Size() (int64, error) {
	var c counter
	err := b.write(&c, true)
	return int64(c), err
}

type counter int64

func (c *counter) Write(p []byte) (int, error) {
	*c += counter(len(p))
	return len(p), nil
}

var _ io.Writer = (*counter)(nil)

// projectEntry finds p in the project, if any.
func (b *Bundle) projectEntry(p string) (projectdir.Entry, bool) {
	if b.Project == nil {
		return projectdir.Entry{}, false
	}
	return b.Project.Find(p)
}
