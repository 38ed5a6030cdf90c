package bundle

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/projectdir"
)

func testProject(t *testing.T) *projectdir.Manifest {
	t.Helper()
	root := t.TempDir()
	for name, content := range map[string]string{
		"site.yml": "- hosts: all\n", "bin/tool": "\x00\x01\x02", "inv/hosts.ini": "[web]\nweb1\n", "inv/c.yml": "plugin: constructed\n",
		"requirements.yml": "roles: []\n", "collections/requirements.yml": "collections: []\n", "roles/requirements.yml": "[]\n",
		".git/HEAD": "x", "old.retry": "x",
	} {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(root, "bin/tool"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("site.yml", filepath.Join(root, "link.yml")); err != nil {
		t.Fatal(err)
	}
	m, err := projectdir.Scan(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// untar unpacks the bundle with the system's tar, as the pod does.
func untar(t *testing.T, b *Bundle) string {
	t.Helper()
	if _, err := exec.LookPath("tar"); err != nil {
		t.Skip("tar is not installed")
	}
	var buf bytes.Buffer
	if err := b.Write(&buf); err != nil {
		t.Fatal(err)
	}
	size, err := b.Size()
	if err != nil || size != int64(buf.Len()) {
		t.Fatalf("Size() = %d, %v; Write wrote %d bytes", size, err, buf.Len())
	}
	dir := t.TempDir()
	cmd := exec.Command("tar", "-xf", "-", "-C", dir)
	cmd.Stdin = &buf
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tar: %v: %s", err, out)
	}
	return dir
}

const fakeGalaxy = `#!/bin/sh
printf '%s|%s\n' "$PWD" "$*" >> "$KP_LOG/galaxy.log"
case "${KP_FAIL:-none}|$*" in none\|*) ;; *"|"*"$KP_FAIL"*) echo "ERROR! cannot reach galaxy.example"; exit 3;; esac
`

const fakePlaybook = `#!/bin/sh
printf '%s\n' "$PWD" "$ANSIBLE_COLLECTIONS_PATH" "$ANSIBLE_ROLES_PATH" "$@" > "$KP_LOG/playbook.log"
`

// fakeAnsible puts a fake ansible-galaxy and the given ansible-playbook in
// a directory for PATH, and points their KP_LOG at another.
func fakeAnsible(t *testing.T, playbook string) (bin, logs string) {
	bin, logs = t.TempDir(), t.TempDir()
	for name, script := range map[string]string{"ansible-galaxy": fakeGalaxy, "ansible-playbook": playbook} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("KP_LOG", logs)
	return bin, logs
}

func TestProjectScript(t *testing.T) {
	m := testProject(t)
	bin, logs := fakeAnsible(t, fakePlaybook)
	b := Bundle{
		Project: m, ProjectPlaybook: "link.yml", Inventories: []string{"inv/hosts.ini", "inv/c.yml"},
		Requirements: "collections: []\n", ExtraVars: []byte(`{"a":1}`), Files: map[string]string{"extra/x.txt": "x"},
		Limit: []string{"web"}, Marker: testMarker,
	}
	dir := untar(t, &b)
	info, err := os.Stat(filepath.Join(dir, ProjectDir, "bin", "tool"))
	if err != nil || info.Mode().Perm() != 0o755 {
		t.Fatalf("bin/tool: %v %v", info, err)
	}
	if target, err := os.Readlink(filepath.Join(dir, ProjectDir, "link.yml")); err != nil || target != "site.yml" {
		t.Errorf("link.yml -> %q, %v", target, err)
	}
	for _, gone := range []string{".git", "old.retry"} {
		if _, err := os.Lstat(filepath.Join(dir, ProjectDir, gone)); err == nil {
			t.Errorf("%s was shipped", gone)
		}
	}
	if c, err := os.ReadFile(filepath.Join(dir, ProjectDir, "extra", "x.txt")); err != nil || string(c) != "x" {
		t.Errorf("files go into the project: %q %v", c, err)
	}
	stdout, stderr, code := runScript(t, dir, bin)
	if code != 0 || report(t, stderr).ExitCode != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	project := filepath.Join(dir, ProjectDir)
	galaxy, _ := os.ReadFile(filepath.Join(logs, "galaxy.log"))
	want := project + "|install -r ../" + requirementsName + "\n" + project + "|install -r requirements.yml\n" +
		project + "|collection install -r collections/requirements.yml\n" + project + "|role install -r roles/requirements.yml\n"
	if string(galaxy) != want {
		t.Errorf("ansible-galaxy ran\n%s\nwant\n%s", galaxy, want)
	}
	play, _ := os.ReadFile(filepath.Join(logs, "playbook.log"))
	lines := strings.Split(strings.TrimSpace(string(play)), "\n")
	wantArgs := []string{"-i", "inv/hosts.ini", "-i", "inv/c.yml", "-e", "@../" + varsName, "--limit", "web", "--forks"}
	if len(lines) < 3 || lines[0] != project || !strings.HasPrefix(lines[1], dir+"/"+galaxyDir+"/collections:"+project+"/collections:") ||
		!strings.HasPrefix(lines[2], dir+"/"+galaxyDir+"/roles:"+project+"/roles:") {
		t.Fatalf("ansible-playbook ran with\n%s", play)
	}
	if got := strings.Join(lines[3:], " "); !strings.HasPrefix(got, strings.Join(wantArgs[:8], " ")) || !strings.HasSuffix(got, " link.yml") {
		t.Errorf("ansible-playbook args %q", got)
	}
}

func TestProjectGalaxyFails(t *testing.T) {
	m := testProject(t)
	bin, logs := fakeAnsible(t, fakePlaybook)
	t.Setenv("KP_FAIL", "collection install")
	b := Bundle{Project: m, Playbook: "- hosts: all\n", Marker: testMarker}
	dir := untar(t, &b)
	if c, err := os.ReadFile(filepath.Join(dir, ProjectDir, InlinePlaybookName)); err != nil || string(c) != b.Playbook {
		t.Fatalf("the inline playbook is not in the project: %q %v", c, err)
	}
	stdout, stderr, code := runScript(t, dir, bin)
	if code != 3 || report(t, stderr).ExitCode != 3 {
		t.Errorf("exit %d, want 3\n%s", code, stderr)
	}
	if !strings.Contains(stdout, "cannot reach galaxy.example") || !strings.Contains(stdout, "ansible-galaxy could not install collections/requirements.yml") {
		t.Errorf("output %q", stdout)
	}
	if _, err := os.Stat(filepath.Join(logs, "playbook.log")); err == nil {
		t.Error("the playbook ran after a failed install")
	}
}

func TestValidateProject(t *testing.T) {
	m := testProject(t)
	cases := []struct {
		name  string
		b     Bundle
		field string
		err   error
	}{
		{"missing playbook", Bundle{Project: m, ProjectPlaybook: "nope.yml"}, "playbook", ErrNotInProject},
		{"ignored playbook", Bundle{Project: m, ProjectPlaybook: "old.retry"}, "playbook", ErrNotInProject},
		{"directory playbook", Bundle{Project: m, ProjectPlaybook: "inv"}, "playbook", ErrNotAFile},
		{"unclean playbook", Bundle{Project: m, ProjectPlaybook: "./site.yml"}, "playbook", projectdir.ErrBadProjectPath},
		{"no project", Bundle{ProjectPlaybook: "site.yml"}, "playbook", ErrNeedsProject},
		{"missing inventory", Bundle{Project: m, ProjectPlaybook: "site.yml", Inventories: []string{"inv/hosts.ini", "inv/x"}}, "inventories", ErrNotInProject},
		{"file over a project file", Bundle{Project: m, Playbook: "-", Files: map[string]string{"site.yml": ""}}, "files", ErrInProject},
		{"file under a project file", Bundle{Project: m, Playbook: "-", Files: map[string]string{"site.yml/x": ""}}, "files", ErrInProject},
		{"file over a project dir", Bundle{Project: m, Playbook: "-", Files: map[string]string{"inv": ""}}, "files", ErrInProject},
	}
	for _, c := range cases {
		err := c.b.ValidateProject()
		var pe *ProjectPathError
		if !errors.Is(err, c.err) || !errors.As(err, &pe) || pe.Field != c.field {
			t.Errorf("%s: %v, want %v at %s", c.name, err, c.err, c.field)
		}
	}
	ok := Bundle{Project: m, ProjectPlaybook: "link.yml", Inventories: []string{"inv", "inv/c.yml"}, Files: map[string]string{"inv/more.ini": "", "new/x": ""}}
	if err := ok.ValidateProject(); err != nil {
		t.Errorf("valid: %v", err)
	}
}

// fakeVaultPlaybook reads each --vault-id file from where the playbook runs,
// as ansible-playbook would.
const fakeVaultPlaybook = `#!/bin/sh
while [ $# -gt 0 ]; do
  if [ "$1" = --vault-id ]; then cat "${2#*@}" > "$KP_LOG/vault.txt" || exit 9; fi
  shift
done
`

// TestProjectVaultPaths: a project's playbook runs from the project's
// directory, and still finds the vault password files; they are gone after.
func TestProjectVaultPaths(t *testing.T) {
	m := testProject(t)
	bin, logs := fakeAnsible(t, fakeVaultPlaybook)
	b := Bundle{Project: m, Playbook: "- hosts: all\n", Marker: testMarker, Vault: map[string]string{DefaultVaultID: "s3cret-vault"}}
	dir := untar(t, &b)
	_, stderr, code := runScript(t, dir, bin)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if c, err := os.ReadFile(filepath.Join(logs, "vault.txt")); err != nil || strings.TrimSpace(string(c)) != "s3cret-vault" {
		t.Errorf("the playbook read %q (%v) from its --vault-id file", c, err)
	}
	if _, err := os.Stat(filepath.Join(dir, secretDir)); !os.IsNotExist(err) {
		t.Errorf("%s is still there after the run (%v)", secretDir, err)
	}
}

// With ProjectHash, a project not as planned ends the stream with
// projectdir.ErrChanged before the script: nothing can run.
func TestProjectHashChecked(t *testing.T) {
	scanned := testProject(t)
	listed, err := projectdir.List(scanned.Root, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := Bundle{Project: listed, ProjectHash: scanned.Hash(), Command: []string{"true"}, Marker: "m"}
	dir := untar(t, &b)
	if _, err := os.Stat(filepath.Join(dir, ScriptName)); err != nil {
		t.Fatal(err)
	}

	if err := os.WriteFile(filepath.Join(scanned.Root, "site.yml"), []byte("- hosts: web\n"), 0o644); err != nil {
		t.Fatal(err) // the same length: only the hash tells
	}
	listed, err = projectdir.List(scanned.Root, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.Project = listed
	var buf bytes.Buffer
	if err := b.Write(&buf); !errors.Is(err, projectdir.ErrChanged) {
		t.Fatalf("Write: %v", err)
	}
	if strings.Contains(buf.String(), ScriptName) {
		t.Error("the stream holds the script")
	}
}
