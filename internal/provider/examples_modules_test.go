// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
)

// exampleModules are the directories under examples/modules whose
// .tftest.hcl files TestAccModule_terraformTest runs.
var exampleModules = []string{"kubeplay-platform", "team-workspace"}

// mockProviderFile matches a test file that mocks the provider: it needs no
// cluster.
var mockProviderFile = regexp.MustCompile(`(?m)^mock_provider\s+"kubeplay"`)

// TestAccModule_terraformTest runs `terraform test` in each module of
// examples/modules, as their authors would, with the provider built from
// this tree through dev_overrides, on the CLI the tests use
// (TF_ACC_TERRAFORM_PATH, else terraform on PATH; make testacc's second and
// OpenTofu passes run it again on Terraform 1.16 and OpenTofu). Each module
// has two subtests:
//
//   - mock: the test files with a mock_provider "kubeplay", which need no
//     cluster (-run 'TestAccModule_terraformTest/.*/mock' runs only them);
//   - apply: the others, against the test cluster, with the kubeconfig, a
//     catalog namespace, a name prefix and the test image passed with -var,
//     all of the test's own. Afterwards nothing they made may be left.
//
// The modules are copied to a temporary directory first, since terraform
// writes .terraform/ where it runs, and the passes run at the same time.
// `terraform get` installs the local modules the test files' run blocks
// name: terraform init would look kubeplay/kubeplay up in the registry,
// which dev_overrides make needless (and the tests offline).
func TestAccModule_terraformTest(t *testing.T) {
	if os.Getenv(resource.EnvTfAcc) == "" {
		t.Skipf("acceptance test: set %s=1 to run it (its mock subtests need the terraform CLI and a build, no cluster)", resource.EnvTfAcc)
	}
	acctest.Parallel(t)
	root, err := acctest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin, cliConfig, err := providerCLI(t)
	if err != nil {
		t.Fatal(err)
	}
	cli := fmt.Sprintf("%s %s", filepath.Base(bin), terraformVersion(t))
	modules := filepath.Join(t.TempDir(), "modules")
	if err := os.CopyFS(modules, os.DirFS(filepath.Join(root, "examples", "modules"))); err != nil {
		t.Fatal(err)
	}
	// One module after the other: parallel subtests would start after every
	// parallel test of the package waiting for its turn, at the end of the run.
	for _, name := range exampleModules {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(modules, name)
			mocked, applied := moduleTestFiles(t, dir)
			if len(mocked) == 0 || len(applied) == 0 {
				t.Fatalf("%s has mock test files %v and apply test files %v; want both", name, mocked, applied)
			}
			if out, err := moduleCLI(bin, cliConfig, dir, "get", "-no-color"); err != nil {
				t.Fatalf("%s get: %v\n%s", filepath.Base(bin), err, out)
			}
			t.Run("mock", func(t *testing.T) {
				start := time.Now()
				runModuleTests(t, bin, cliConfig, dir, mocked, nil)
				t.Logf("%s on %s: %s", name, cli, time.Since(start).Round(100*time.Millisecond))
			})
			t.Run("apply", func(t *testing.T) {
				e := newEnv(t)
				prefix := randName("kpm")
				t.Cleanup(func() { e.checkModuleLeftovers(prefix) })
				start := time.Now()
				runModuleTests(t, bin, cliConfig, dir, applied, []string{
					"kubeconfig_path=" + e.kubeconfig,
					"catalog_namespace=" + e.catalog,
					"name=" + prefix,
					"image=" + acctest.TestImage(),
				})
				t.Logf("%s on %s: %s", name, cli, time.Since(start).Round(100*time.Millisecond))
				if left := catalogObjects(t, e, e.catalog); len(left) > 0 {
					t.Errorf("the tests' teardown left %v in catalog %s", left, e.catalog)
				}
			})
		})
	}
}

// moduleTestFiles splits a module's test files (tests/*.tftest.hcl) into
// those that mock the provider and the others, as -filter arguments.
func moduleTestFiles(t *testing.T, dir string) (mocked, applied []string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "tests", "*.tftest.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel := "tests/" + filepath.Base(f)
		if mockProviderFile.Match(b) {
			mocked = append(mocked, rel)
		} else {
			applied = append(applied, rel)
		}
	}
	return mocked, applied
}

// runModuleTests runs terraform test on files of dir with vars (NAME=VALUE),
// and fails the test, with the CLI's output, unless every run passed.
func runModuleTests(t *testing.T, bin, cliConfig, dir string, files, vars []string) {
	t.Helper()
	args := []string{"test", "-no-color"}
	for _, f := range files {
		args = append(args, "-filter="+f)
	}
	for _, v := range vars {
		args = append(args, "-var", v)
	}
	out, err := moduleCLI(bin, cliConfig, dir, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, out)
	}
	// Both CLIs end with "Success! N passed, 0 failed." (and maybe skipped).
	if !regexp.MustCompile(`Success! [1-9][0-9]* passed, 0 failed`).MatchString(out) {
		t.Fatalf("%s %s did not pass every run:\n%s", filepath.Base(bin), strings.Join(args, " "), out)
	}
	t.Logf("%s", lastLines(out, 12))
}

// moduleCLI runs the CLI in dir with the dev_overrides configuration and
// returns its combined output.
func moduleCLI(bin, cliConfig, dir string, args ...string) (string, error) {
	out, err := terraformCommand(bin, cliConfig, dir, nil, args...).CombinedOutput()
	return string(out), err
}

// checkModuleLeftovers fails the test when a namespace the modules made
// under prefix (each group's, named <prefix>-<group>) is still there and
// not being deleted, and deletes it.
func (e *testEnv) checkModuleLeftovers(prefix string) {
	ctx := context.Background()
	nss, err := e.kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Errorf("listing namespaces: %v", err)
		return
	}
	var left []string
	for _, ns := range nss.Items {
		if !strings.HasPrefix(ns.Name, prefix+"-") || ns.DeletionTimestamp != nil {
			continue
		}
		left = append(left, ns.Name)
		e.deleteNamespace(ns.Name)
	}
	if len(left) > 0 {
		slices.Sort(left)
		e.t.Errorf("the tests' teardown left namespaces %v", left)
	}
}
