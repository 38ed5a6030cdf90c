// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

// BenchmarkPlanCheck20 plans 20 applied runs with plan_check = "drift" on a
// group that keeps 10 warm pods (20 checks in one terraform plan, none of
// which finds a change), against the same plan with plan_check = "off",
// and against the apply of the 20 runs themselves (from none, on the same
// ready pool). Each side starts with the pool ready. Reported: the three
// times and the ratios of the checked plan to each.
//
//	TF_ACC=1 go test ./internal/provider -run '^$' -bench PlanCheck20 -benchtime 1x -timeout 30m
func BenchmarkPlanCheck20(b *testing.B) {
	e := benchTestEnv(b)
	ns := acctest.Namespace(b, e.kube, "kp-checkbench")
	terraformBin, cliConfig, err := providerCLI(b)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	const group, runs, warm = "checks", 20, 10
	write := func(n int, mode string) {
		cfg := cliHeader(e.kubeconfig, e.catalog) + benchGroup(group, ns, warm) + fmt.Sprintf(`
resource "kubeplay_run" "r" {
  count           = %d
  container_group = kubeplay_container_group.g.name
  plan_check      = %q
  playbook        = <<-EOT
    - hosts: all
      gather_facts: false
      tasks:
        - ansible.builtin.ping:
        - ansible.builtin.command: "true"
          changed_when: false
  EOT
  timeouts {
    plan = "10m"
  }
}
`, n, mode)
		if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(cfg), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	tf := func(want int, args ...string) time.Duration {
		start := time.Now()
		out, err := terraformCommand(terraformBin, cliConfig, dir, nil, append(args, "-input=false", "-no-color", "-parallelism=20")...).CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			b.Fatal(err)
		}
		if code != want {
			b.Fatalf("terraform %v: exit %d, want %d\n%s", args, code, want, out)
		}
		return time.Since(start)
	}
	ready := func() { acctest.WaitWarmReady(b, e.kube, ns, group, warm) }
	defer func() {
		write(0, planCheckOff)
		tf(0, "destroy", "-auto-approve")
	}()
	for b.Loop() {
		write(0, planCheckOff)
		tf(0, "apply", "-auto-approve")
		ready()
		write(runs, planCheckOff)
		applied := tf(0, "apply", "-auto-approve") // 20 real runs
		ready()
		unchecked := tf(0, "plan", "-detailed-exitcode")
		write(runs, planCheckDrift)
		tf(0, "apply", "-auto-approve") // plan_check changes in place (after 20 checks)
		ready()
		checked := tf(0, "plan", "-detailed-exitcode") // 20 checks, no drift
		b.ReportMetric(applied.Seconds(), "apply20-s")
		b.ReportMetric(unchecked.Seconds(), "plan-nocheck-s")
		b.ReportMetric(checked.Seconds(), "plan-check-s")
		b.ReportMetric(checked.Seconds()/unchecked.Seconds(), "check/nocheck")
		b.ReportMetric(checked.Seconds()/applied.Seconds(), "check/apply")
		b.Logf("20 real runs applied in %s; plan without checks %s; plan with 20 drift checks %s: %.2fx the plan, %.2fx the runs",
			applied.Round(time.Millisecond), unchecked.Round(time.Millisecond), checked.Round(time.Millisecond),
			checked.Seconds()/unchecked.Seconds(), checked.Seconds()/applied.Seconds())
		write(0, planCheckOff)
		tf(0, "apply", "-auto-approve")
	}
	l, err := e.kube.CoreV1().ConfigMaps(e.catalog).List(context.Background(),
		metav1.ListOptions{LabelSelector: managed.Selector(managed.LabelComponent, catalog.ComponentCheckRecord)})
	if err == nil && len(l.Items) > 0 {
		b.Errorf("%d plan-time check records left", len(l.Items))
	}
}
