// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
)

// BenchmarkRun100FullNode applies 100 runs of `true` in one terraform
// apply (-parallelism=40) over 4 container groups of max_concurrent_runs =
// 5, each run pod requesting the default 250m CPU: the groups allow 20 pods
// at once, and the local cluster's node (2 CPUs allocatable) holds 8, so
// runs must wait for room on the node, not fail. It compares the same 100
// runs in one group of 8, which the node holds. Each apply must end with
// 100 successful runs and no run pod left; it reports both wall times, the
// share of runs whose timeline shows a wait for room on the node, and the
// median and 90th percentile of the runs' time to their playbook.
//
//	TF_ACC=1 go test ./internal/provider -run '^$' -bench 'Run100FullNode$' -benchtime 1x -timeout 60m
func BenchmarkRun100FullNode(b *testing.B) {
	e := benchTestEnv(b)
	terraformBin, cliConfig, err := providerCLI(b)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		four := e.applyRuns(b, terraformBin, cliConfig, []int{5, 5, 5, 5})
		one := e.applyRuns(b, terraformBin, cliConfig, []int{8})
		b.ReportMetric(four.wall.Seconds(), "s-4-groups-of-5")
		b.ReportMetric(one.wall.Seconds(), "s-1-group-of-8")
		b.ReportMetric(four.waitedForNode, "share-waited-for-node-4x5")
		b.ReportMetric(one.waitedForNode, "share-waited-for-node-1x8")
		b.ReportMetric(four.toStartP50, "s-to-start-p50-4x5")
		b.ReportMetric(four.toStartP90, "s-to-start-p90-4x5")
		b.ReportMetric(one.toStartP50, "s-to-start-p50-1x8")
		b.ReportMetric(one.toStartP90, "s-to-start-p90-1x8")
	}
}

type manyRuns struct {
	wall                   time.Duration
	waitedForNode          float64
	toStartP50, toStartP90 float64
}

// applyRuns applies groups (each a max_concurrent_runs, in a namespace of
// its own: a namespace's quotas all hold every pod in it) and 100 runs of
// `true` spread over them in turn, checks that all succeeded and no run pod
// is left, and destroys them.
func (e *testEnv) applyRuns(b *testing.B, terraformBin, cliConfig string, groups []int) manyRuns {
	dir := b.TempDir()
	var cfg strings.Builder
	cfg.WriteString(cliHeader(e.kubeconfig, e.catalog))
	var names, namespaces []string
	for i, limit := range groups {
		ns := acctest.Namespace(b, e.kube, "kp-full")
		namespaces = append(namespaces, ns)
		name := fmt.Sprintf("full-%d-%d", len(groups), i)
		names = append(names, "kubeplay_container_group.g"+fmt.Sprint(i)+".name")
		fmt.Fprintf(&cfg, `resource "kubeplay_container_group" "g%d" {
  name                = %q
  namespace           = %q
  image               = %q
  max_concurrent_runs = %d
  pod_pending_timeout = "10m"
}
`, i, name, ns, acctest.TestImage(), limit)
	}
	fmt.Fprintf(&cfg, `
locals {
  groups = [%s]
}

resource "kubeplay_run" "r" {
  count           = 100
  container_group = local.groups[count.index %% %d]
  command         = ["true"]
  timeouts {
    create = "30m"
  }
}
`, strings.Join(names, ", "), len(groups))
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(cfg.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := terraformCLI(terraformBin, cliConfig, dir, "destroy", "-auto-approve", "-input=false", "-no-color"); err != nil {
			b.Error(err)
		}
	}()
	// The groups first, so that the apply of the runs times the runs only.
	args := []string{"apply", "-auto-approve", "-input=false", "-no-color"}
	for i := range groups {
		args = append(args, fmt.Sprintf("-target=kubeplay_container_group.g%d", i))
	}
	if err := terraformCLI(terraformBin, cliConfig, dir, args...); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	err := terraformCLI(terraformBin, cliConfig, dir, "apply", "-auto-approve", "-input=false", "-no-color", "-parallelism=40")
	out := manyRuns{wall: time.Since(start)}
	if err != nil {
		b.Fatal(err)
	}
	runs := runStates(b, dir)
	var toStart []float64
	waited := 0
	steps := map[string]float64{} // seconds by step, over all runs
	for _, a := range runs {
		if a["status"] != "successful" {
			b.Fatalf("run %v ended %v (%v): want 100 successful", a["id"], a["status"], a["status_reason"])
		}
		tl, _ := a["timeline"].([]any)
		var secs float64
		for _, s := range tl {
			st, _ := s.(map[string]any)
			f, _ := st["seconds"].(float64)
			name, _ := st["step"].(string)
			steps[name] += f
			if name == "playbook" {
				break
			}
			secs += f
			if d, _ := st["detail"].(string); st["step"] == "schedule" && strings.HasPrefix(d, "waited for room on a node") {
				waited++
			}
		}
		toStart = append(toStart, secs)
	}
	if len(runs) != 100 {
		b.Fatalf("%d runs in the state, want 100", len(runs))
	}
	for _, ns := range namespaces {
		if left, _ := e.runPodsGone(ns, 0); left != 0 {
			b.Fatalf("%d run pods left in %s after the apply", left, ns)
		}
	}
	slices.Sort(toStart)
	out.waitedForNode = float64(waited) / 100
	out.toStartP50, out.toStartP90 = toStart[49], toStart[89]
	var per []string
	for _, name := range runner.Steps {
		if secs, ok := steps[name]; ok {
			per = append(per, fmt.Sprintf("%s %.1fs", name, secs/100))
		}
	}
	b.Logf("%d groups of %v: 100 runs in %s; %d waited for room on the node; time to start p50 %.1fs, p90 %.1fs; "+
		"mean seconds per run by step: %s", len(groups), groups, out.wall.Round(time.Second), waited, out.toStartP50,
		out.toStartP90, strings.Join(per, ", "))
	return out
}
