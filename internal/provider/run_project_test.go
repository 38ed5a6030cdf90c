// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
)

// contentMarker is in a project file; the state must never hold it.
const contentMarker = "kp-content-marker-7f3a91"

// testProject copies the example project into a temp dir and makes it the
// acceptance test's: the collection comes as a tarball built with
// ansible-galaxy in a pod and named by collections/requirements.yml, and
// ignored files, a symlink and a marker file are added.
func testProject(t *testing.T, e *testEnv, ns string) string {
	root, err := acctest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	example := filepath.Join(root, "examples", "project", "ansible")
	dir := filepath.Join(t.TempDir(), "project")
	if err := os.CopyFS(dir, os.DirFS(example)); err != nil {
		t.Fatal(err)
	}
	acctest.BuildCollection(t, e.kube, ns, filepath.Join(example, "vendor", "kubeplay-demo"), filepath.Join(dir, "dist"))
	if err := os.RemoveAll(filepath.Join(dir, "vendor")); err != nil {
		t.Fatal(err)
	}
	write := func(rel, content string) {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(dir, "requirements.yml")); err != nil {
		t.Fatal(err)
	}
	write("collections/requirements.yml", "collections:\n  - name: dist/kubeplay-demo-1.0.0.tar.gz\n    type: file\n")
	write("docs/README.md", "# "+contentMarker+"\n")
	write(".git/config", "[core]\n")
	write("site.retry", "web1\n")
	write("notes/todo.txt", "ignored by .kubeplayignore\n")
	write("scratch/tmp.txt", "ignored by project_ignore\n")
	if err := os.Symlink("site.yml", filepath.Join(dir, "site-link.yml")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func runProjectConfig(e *testEnv, group, ns, dir, extra string) string {
	return e.runGroup(group, ns) + fmt.Sprintf(`
resource "kubeplay_run" "test" {
  container_group = kubeplay_container_group.g.name
  project_dir     = %q
  project_ignore  = ["scratch/"]
  playbook_path   = "site-link.yml"
  inventories     = ["inventories/hosts.ini", "inventories/groups.constructed.yml"]
  limit           = ["frontend"]
  extra_vars      = { release = "2026.11", tool_sha1 = filesha1("%s/files/tool.bin") }
%s
}
`, dir, dir, extra)
}

// TestAccRun_project runs a project directory: a playbook (through a
// symlink), a role, an INI inventory and a constructed plugin configuration
// as two -i with a limit on a constructed group, group_vars, ansible.cfg, a
// binary file checked for bytes and mode, and a collection installed from
// a tarball in the project. A change to one file replaces the run and the
// plan names it; a change to an ignored file plans nothing; the state holds
// hashes, not content.
func TestAccRun_project(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-project")
	group := randName("grp")
	dir := testProject(t, e, ns)
	cfg := runProjectConfig(e, group, ns, dir, "")
	tool, err := os.ReadFile(filepath.Join(dir, "files", "tool.bin"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(tool)
	none := knownvalue.ObjectPartial(map[string]knownvalue.Check{"failed": knownvalue.Int64Exact(0), "unreachable": knownvalue.Int64Exact(0)})
	files := func(key string) tfjsonpath.Path { return tfjsonpath.New("project_files").AtMapKey(key) }
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{
			{
				Config: cfg,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("successful")),
					// limit = ["frontend"], a group of the constructed inventory: db1 is not in the recap,
					// and web1 and web2 are counted, not listed, as neither failed nor was unreachable.
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_count"), knownvalue.Int64Exact(2)),
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_counts"), none),
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_stats"), knownvalue.MapExact(map[string]knownvalue.Check{})),
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("output"), knownvalue.StringRegexp(regexp.MustCompile(`hello from the kubeplay\.demo collection on web2`))),
					statecheck.ExpectKnownValue(runAddr, files("files/tool.bin"), knownvalue.StringExact("0755 sha256:"+hex.EncodeToString(sum[:]))),
					statecheck.ExpectKnownValue(runAddr, files("site-link.yml"), knownvalue.StringExact("symlink -> site.yml")),
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("project_hash"), knownvalue.StringRegexp(regexp.MustCompile(`^[0-9a-f]{64}$`))),
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					checkNoSecretInState(contentMarker),
					resource.TestCheckResourceAttrSet(runAddr, "project_files.docs/README.md"),
					resource.TestCheckNoResourceAttr(runAddr, "project_files.site.retry"),
					resource.TestCheckNoResourceAttr(runAddr, "project_files.notes/todo.txt"),
					resource.TestCheckNoResourceAttr(runAddr, "project_files.scratch/tmp.txt"),
					resource.TestCheckResourceAttrWith(runAddr, "project_files.%", func(n string) error {
						// Every file and link of the copy, none of the ignored ones.
						if n != "13" {
							return fmt.Errorf("project_files has %s entries, want 13", n)
						}
						return nil
					}),
				),
			},
			{
				// An ignored file changes: nothing to do.
				PreConfig: func() { writeFile(t, filepath.Join(dir, "site.retry"), "web2\n") },
				Config:    cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(runAddr, plancheck.ResourceActionNoop),
				}},
			},
			{
				// One file changes: the run is replaced, and the plan names that path alone.
				PreConfig: func() { writeFile(t, filepath.Join(dir, "docs", "README.md"), "# changed\n") },
				Config:    cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(runAddr, plancheck.ResourceActionDestroyBeforeCreate),
					expectChangedProjectPaths(runAddr, "docs/README.md"),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("successful")),
				},
			},
		},
	})
}

// TestAccRun_projectErrors: plan-time errors name the attribute, and a
// failed ansible-galaxy install ends the run failed with its message.
func TestAccRun_projectErrors(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-project-err")
	group := randName("grp")
	dir := filepath.Join(t.TempDir(), "project")
	writeFile(t, filepath.Join(dir, "site.yml"), "- hosts: all\n  gather_facts: false\n  tasks: [{debug: {msg: never}}]\n")
	writeFile(t, filepath.Join(dir, "inventories", "hosts.ini"), "localhost ansible_connection=local\n")
	simple := func(extra string) string {
		return e.runGroup(group, ns) + fmt.Sprintf(`
resource "kubeplay_run" "test" {
  container_group = kubeplay_container_group.g.name
  project_dir     = %q
%s
}
`, dir, extra)
	}
	outside := filepath.Join(dir, "escape")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{
			{Config: simple(`playbook_path = "missing.yml"`), PlanOnly: true, ExpectError: expectError(`(?s)Invalid Project Path.*playbook_path.*"missing.yml" is not a file`)},
			{Config: simple(`playbook_path = "inventories"`), PlanOnly: true, ExpectError: expectError(`(?s)Invalid Project Path.*"inventories" is a directory`)},
			{Config: simple("playbook_path = \"site.yml\"\n  inventories = [\"nope.ini\"]"), PlanOnly: true, ExpectError: expectError(`(?s)Invalid Project Path.*inventories`)},
			{Config: simple("playbook_path = \"../site.yml\""), PlanOnly: true, ExpectError: expectError(`(?s)Invalid Project Path.*must be relative`)},
			{Config: e.runGroup(group, ns) + `
resource "kubeplay_run" "test" {
  container_group = kubeplay_container_group.g.name
  playbook_path   = "site.yml"
}`, PlanOnly: true, ExpectError: expectError(`(?s)project_dir.*must be specified when.*playbook_path|playbook_path.*project_dir`)},
			{
				PreConfig:   func() { symlink(t, "../..", outside) },
				Config:      simple(`playbook_path = "site.yml"`),
				PlanOnly:    true,
				ExpectError: expectError(`(?s)Project Link Leaves The Project.*escape`),
			},
			{
				// A hard link to a file outside the project (#40); the next
				// step removes it.
				PreConfig: func() {
					shared := filepath.Join(t.TempDir(), "shared.txt")
					writeFile(t, shared, "outside\n")
					if err := os.Remove(outside); err != nil {
						t.Fatal(err)
					}
					if err := os.Link(shared, outside); err != nil {
						t.Fatal(err)
					}
				},
				Config:      simple(`playbook_path = "site.yml"`),
				PlanOnly:    true,
				ExpectError: expectError(`(?s)Project File Is A Shared Hard Link.*escape: the file has hard links outside.*copy of its own`),
			},
			{
				PreConfig: func() {
					if err := os.Remove(outside); err != nil {
						t.Fatal(err)
					}
				},
				Config: simple("playbook_path = \"site.yml\"\n  inventories = [\"inventories/hosts.ini\"]\n" +
					"  requirements = \"collections:\\n  - name: dist/missing-9.9.9.tar.gz\\n    type: file\\n\""),
				ExpectError: expectError(`(?s)Run Failed.*ansible-galaxy could not install`),
			},
		},
	})
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, p string) {
	t.Helper()
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

// expectChangedProjectPaths checks that the plan replaces addr because of
// project_files and that exactly paths differ between before and after.
type changedProjectPaths struct {
	addr  string
	paths []string
}

func expectChangedProjectPaths(addr string, paths ...string) plancheck.PlanCheck {
	return changedProjectPaths{addr: addr, paths: paths}
}

func (c changedProjectPaths) CheckPlan(_ context.Context, req plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	for _, rc := range req.Plan.ResourceChanges {
		if rc.Address != c.addr {
			continue
		}
		replaced := slices.ContainsFunc(rc.Change.ReplacePaths, func(p any) bool {
			steps, ok := p.([]any)
			return ok && len(steps) == 1 && steps[0] == "project_files"
		})
		if !replaced {
			resp.Error = fmt.Errorf("%s: the plan does not replace it because of project_files (replace paths %v)", c.addr, rc.Change.ReplacePaths)
			return
		}
		before, _ := rc.Change.Before.(map[string]any)["project_files"].(map[string]any)
		after, _ := rc.Change.After.(map[string]any)["project_files"].(map[string]any)
		var changed []string
		for p, v := range before {
			if after[p] != v {
				changed = append(changed, p)
			}
		}
		for p := range after {
			if _, ok := before[p]; !ok {
				changed = append(changed, p)
			}
		}
		slices.Sort(changed)
		if !slices.Equal(changed, c.paths) || len(before) == 0 {
			resp.Error = fmt.Errorf("%s: the plan's project_files differ at %s, want %s", c.addr, strings.Join(changed, ", "), strings.Join(c.paths, ", "))
		}
		return
	}
	resp.Error = fmt.Errorf("%s is not in the plan", c.addr)
}
