// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/capacity"
)

// TestAccRun_maxForksAcrossProcesses applies runs from two Terraform
// processes with separate states at once, in a group with max_forks = 4 and
// runs of 2 forks each: the group's forks ledger must never hold more than 4,
// and never more than 2 run pods may live at once, while without the ledger
// all 6 runs would overlap.
func TestAccRun_maxForksAcrossProcesses(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-forks")
	group := randName("forks")
	groupCfg := e.providerBlock() + fmt.Sprintf(`
resource "kubeplay_container_group" "g" {
  name      = %q
  namespace = %q
  image     = %q
  max_forks = 4
}
`, group, ns, acctest.TestImage())
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: groupCfg},
			{
				// The group stays; meanwhile two separate Terraform processes run against it.
				Config:    groupCfg,
				PreConfig: func() { e.applyFromTwoProcesses(group, ns) },
			},
		},
	})
}

// providerCLI builds the provider from this tree and returns the terraform
// CLI and a CLI configuration whose dev_overrides point at the build, for
// tests and benchmarks that run Terraform as separate processes.
func providerCLI(t testing.TB) (terraformBin, cliConfig string, err error) {
	terraformBin, err = exec.LookPath("terraform")
	if p := os.Getenv("TF_ACC_TERRAFORM_PATH"); p != "" {
		terraformBin, err = p, nil
	}
	if err != nil {
		return "", "", fmt.Errorf("no terraform CLI: %w", err)
	}
	binDir, err := providerBuild()
	if err != nil {
		return "", "", err
	}
	cliConfig = filepath.Join(t.TempDir(), "terraformrc")
	rc := fmt.Sprintf("provider_installation {\n  dev_overrides {\n    \"kubeplay/kubeplay\" = %q\n  }\n  direct {}\n}\n", binDir)
	return terraformBin, cliConfig, os.WriteFile(cliConfig, []byte(rc), 0o600)
}

// providerDir is where providerBuild builds the provider, once per test
// process; TestMain removes it.
var providerDir string

// providerBuild returns the directory of a provider binary built from this
// tree: KUBEPLAY_TEST_PROVIDER_DIR when set (make testacc builds it once for
// all its processes), else one build per test process.
var providerBuild = sync.OnceValues(func() (string, error) {
	if dir := os.Getenv("KUBEPLAY_TEST_PROVIDER_DIR"); dir != "" {
		return dir, nil
	}
	root, err := acctest.RepoRoot()
	if err != nil {
		return "", err
	}
	if providerDir, err = os.MkdirTemp("", "kubeplay-provider-"); err != nil {
		return "", err
	}
	build := exec.Command("go", "build", "-o", filepath.Join(providerDir, "terraform-provider-kubeplay"), ".")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the provider: %w\n%s", err, out)
	}
	return providerDir, nil
})

// TestMain removes the provider that providerBuild built. With
// envOPAStandIn set, the binary is the opa of the CI commands instead.
func TestMain(m *testing.M) {
	if os.Getenv(envOPAStandIn) != "" {
		os.Exit(opaStandIn(os.Args[1:], os.Stdout, os.Stderr))
	}
	code := m.Run()
	if providerDir != "" {
		_ = os.RemoveAll(providerDir)
	}
	os.Exit(code)
}

// terraformCLI runs terraform in dir with the dev_overrides configuration.
func terraformCLI(terraformBin, cliConfig, dir string, args ...string) error {
	return terraformCLIEnv(terraformBin, cliConfig, dir, nil, args...)
}

// terraformCommand is terraform in dir with the dev_overrides configuration
// and env added to the command's environment, not started.
func terraformCommand(terraformBin, cliConfig, dir string, env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(terraformBin, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "TF_CLI_CONFIG_FILE="+cliConfig, "TF_IN_AUTOMATION=1", "TF_LOG=", "CHECKPOINT_DISABLE=1"), env...)
	return cmd
}

// terraformCLIEnv is terraformCLI with env added to the command's
// environment.
func terraformCLIEnv(terraformBin, cliConfig, dir string, env []string, args ...string) error {
	out, err := terraformCommand(terraformBin, cliConfig, dir, env, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("terraform %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

func (e *testEnv) applyFromTwoProcesses(group, ns string) {
	t := e.t
	terraformBin, cliConfig, err := providerCLI(t)
	if err != nil {
		t.Error(err)
		return
	}

	ctx, stop := context.WithCancel(context.Background())
	obs := e.observeForks(ctx, group, ns)

	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.terraformProcess(terraformBin, cliConfig, group)
		}()
	}
	wg.Wait()
	stop()
	peaks := obs()
	for i, err := range errs {
		if err != nil {
			t.Errorf("process %d: %v", i, err)
		}
	}
	t.Logf("two processes, 6 runs of 2 forks, max_forks 4: peak forks held %d, peak run pods %d", peaks.Forks, peaks.Objects)
	// A run holds its forks until its pod is gone, so pod objects count here.
	if peaks.Forks > 4 || peaks.Objects > 2 {
		t.Errorf("max_forks exceeded: peak forks %d (limit 4), peak run pods %d (limit 2)", peaks.Forks, peaks.Objects)
	}
	if peaks.Objects < 2 {
		t.Errorf("the runs never overlapped (peak %d pods): the test did not exercise concurrency", peaks.Objects)
	}
}

// terraformProcess applies then destroys three runs of 2 forks from a working
// directory and state of its own.
func (e *testEnv) terraformProcess(terraformBin, cliConfig, group string) error {
	dir := e.t.TempDir()
	cfg := cliHeader(e.kubeconfig, e.catalog) + fmt.Sprintf(`resource "kubeplay_run" "r" {
  count           = 3
  container_group = %q
  forks           = 2
  command         = ["sh", "-c", "sleep 3"]
}
`, group)
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(cfg), 0o600); err != nil {
		return err
	}
	run := func(args ...string) error { return terraformCLI(terraformBin, cliConfig, dir, args...) }
	if err := run("apply", "-auto-approve", "-input=false", "-no-color"); err != nil {
		return err
	}
	return run("destroy", "-auto-approve", "-input=false", "-no-color")
}

// runPeaks are the peaks observeForks saw.
type runPeaks struct {
	// Forks is the largest sum of unexpired claims in the group's ledger.
	Forks int64
	// Live is the most run pods at once that were neither terminating nor
	// finished: what the group's quota counts.
	Live int
	// Objects is the most run pod objects at once, terminating ones included.
	Objects int
}

// observeForks watches the group's ledger and its run pods until ctx ends;
// the returned function waits for the watches and gives the peaks seen.
func (e *testEnv) observeForks(ctx context.Context, group, ns string) func() runPeaks {
	var (
		wg    sync.WaitGroup
		peaks runPeaks
	)
	wg.Add(2)
	go func() {
		defer wg.Done()
		w, err := e.kube.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + capacity.LedgerName(group)})
		if err != nil {
			e.t.Errorf("watching the ledger: %v", err)
			return
		}
		defer w.Stop()
		for ev := range w.ResultChan() {
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok {
				continue
			}
			var sum int64
			for _, v := range cm.Data {
				var entry capacity.Entry
				if json.Unmarshal([]byte(v), &entry) == nil && entry.Expires.After(time.Now()) {
					sum += entry.Forks
				}
			}
			peaks.Forks = max(peaks.Forks, sum)
		}
	}()
	go func() {
		defer wg.Done()
		w, err := e.kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "kubeplay.io/run"})
		if err != nil {
			e.t.Errorf("watching run pods: %v", err)
			return
		}
		defer w.Stop()
		objects, live := map[string]bool{}, map[string]bool{}
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			delete(live, p.Name)
			if ev.Type == watch.Deleted {
				delete(objects, p.Name)
			} else {
				objects[p.Name] = true
				if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
					live[p.Name] = true
				}
			}
			peaks.Objects = max(peaks.Objects, len(objects))
			peaks.Live = max(peaks.Live, len(live))
		}
	}()
	return func() runPeaks {
		wg.Wait()
		return peaks
	}
}

// cliRequiredProviders names the provider's source for configurations that
// the terraform CLI applies with providerCLI's dev_overrides.
const cliRequiredProviders = "terraform {\n  required_providers {\n    kubeplay = { source = \"kubeplay/kubeplay\" }\n  }\n}\n\n"

// cliHeader is the head of such a configuration: the provider's source and
// its connection.
func cliHeader(kubeconfig, catalog string) string {
	return cliRequiredProviders + fmt.Sprintf("provider \"kubeplay\" {\n  config_path       = %q\n  catalog_namespace = %q\n}\n\n",
		kubeconfig, catalog)
}
