// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/warmpool"
)

// soakCheckOutcomes checks each run's outcome against the fault log and
// returns the outcomes' counts.
func soakCheckOutcomes(errorf func(string, ...any), runs []*soakRun, flog *soakLog) map[string]int {
	deleted := map[string]bool{}
	for _, f := range flog.faults() {
		if f.Kind == soakPodDelete {
			deleted[f.Pod] = true
		}
	}
	counts := map[string]int{}
	for _, r := range runs {
		outcome := r.status
		if r.reason != "" {
			outcome += " (" + r.reason + ")"
		}
		if !r.inState {
			outcome = "not in the state"
		}
		counts[outcome]++
		if !slices.ContainsFunc(runner.Reasons, func(d runner.ReasonDoc) bool { return string(d.Reason) == r.reason }) && r.reason != "" {
			errorf("SOAK run %s: status_reason %q is not in runner.Reasons", r.id, r.reason)
		}
		switch {
		case r.inState && r.status == runner.StatusSuccessful && r.reason == "":
		case r.inState && r.status == runner.StatusError && r.reason == string(runner.ReasonPodDeleted) && slices.ContainsFunc(r.pods, func(p string) bool { return deleted[p] }):
		default:
			errorf("SOAK MISMATCH run %s (%s, pods %v, %d attempts): ended %s, which no injected fault explains:\n%s\n%s",
				r.id, r.kind, r.pods, r.attempts, outcome, r.diag, flog)
		}
	}
	return counts
}

// soakCheckExecutions checks the execution records (see the top of the
// file for what one run is).
func soakCheckExecutions(errorf func(string, ...any), runs []*soakRun, dir string) {
	for _, r := range runs {
		byPod := map[string]int{}
		b, err := os.ReadFile(filepath.Join(dir, r.id))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errorf("%v", err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			f := strings.Fields(line)
			if len(f) != 2 || f[0] != r.id {
				if line != "" {
					errorf("SOAK run %s: a malformed execution record %q", r.id, line)
				}
				continue
			}
			byPod[f[1]]++
		}
		for pod, n := range byPod {
			if n > 1 {
				errorf("SOAK DOUBLED run %s: pod %s executed the playbook %d times", r.id, pod, n)
			}
		}
		if len(byPod) > r.attempts*r.slices {
			errorf("SOAK DOUBLED run %s: %d pods executed the playbook (%v), but it had %d attempts of %d slices",
				r.id, len(byPod), byPod, r.attempts, r.slices)
		}
		if r.status == runner.StatusSuccessful {
			for _, p := range r.pods {
				if byPod[p] != 1 {
					errorf("SOAK run %s succeeded in pod %s, which recorded %d executions, want 1", r.id, p, byPod[p])
				}
			}
			if len(r.pods) != r.slices {
				errorf("SOAK run %s succeeded with pods %v, want %d", r.id, r.pods, r.slices)
			}
		}
	}
}

var soakLine = regexp.MustCompile(`"msg": "soak-line (\S+) (\d+)"`)

// soakCheckOutputs checks that each successful run's output has every
// numbered line once per slice, in order within a slice, and no other.
func soakCheckOutputs(errorf func(string, ...any), runs []*soakRun) {
	for _, r := range runs {
		if r.status != runner.StatusSuccessful {
			continue
		}
		seen := make([]int, soakRunLines)
		last := -1
		var problems []string
		for _, m := range soakLine.FindAllStringSubmatch(r.output, -1) {
			i, _ := strconv.Atoi(m[2])
			switch {
			case m[1] != r.id:
				problems = append(problems, fmt.Sprintf("a line of run %s", m[1]))
			case i >= soakRunLines:
				problems = append(problems, fmt.Sprintf("line %d", i))
			default:
				seen[i]++
				if r.slices == 1 && i != last+1 {
					problems = append(problems, fmt.Sprintf("line %d after line %d", i, last))
				}
				last = i
			}
		}
		for i, n := range seen {
			if n != r.slices {
				problems = append(problems, fmt.Sprintf("line %d %d times", i, n))
			}
		}
		if len(problems) > 0 {
			errorf("SOAK OUTPUT run %s (%s): want lines 0 to %d once per slice (%d), got: %s\n%s",
				r.id, r.kind, soakRunLines-1, r.slices, strings.Join(problems, "; "), soakTail(r.output))
		}
	}
}

// soakCheckLeaks checks that nothing of the groups' runs is left. A
// provider SIGKILLed mid-run leaves its pods to end themselves after the
// disconnect grace and its claims to expire; by design the first run of a
// later provider in the group removes them (the orphan sweep). So once the
// grace has passed since the last kill, one run in each group sweeps, and
// then nothing at all may be left. Before that sweep only ended pods and
// claims may be left, and only when a provider was killed.
func soakCheckLeaks(t *testing.T, e *testEnv, s *soakSetup, kubeconfig, tf, cliConfig string, flog *soakLog) {
	var scopes []acctest.LeakScope
	for _, g := range s.groups {
		scopes = append(scopes, groupLeaks(g.ns, g.name))
	}
	leaks := func() error {
		var errs []error
		for _, sc := range scopes {
			errs = append(errs, acctest.Leaks(context.Background(), e.kube, sc))
		}
		return errors.Join(errs...)
	}
	var lastKill time.Duration
	for _, f := range flog.faults() {
		if f.Kind == soakSIGKILL {
			lastKill = f.At
		}
	}
	if lastKill > 0 {
		// A killed run's pod ends within the grace of its last beat; one
		// made and signed just before the kill, never exec'd, ends
		// WorkerStartTimeout after its container started (a short soak that
		// killed a provider at +25.6 s found such a pod still Running 40 s
		// after). The slack covers the start and a restarted kubelet's report.
		time.Sleep(time.Until(flog.start.Add(lastKill + max(bundle.DefaultLeaseGrace, podspec.WorkerStartTimeout) + 20*time.Second)))
	}
	if err := leaks(); err != nil {
		ended := regexp.MustCompile(`^(pod \S+ \((Succeeded|Failed)\) is left|ledger \S+ holds claim .*)$`)
		for _, line := range strings.Split(err.Error(), "\n") {
			if lastKill == 0 || !ended.MatchString(line) {
				t.Errorf("SOAK LEAK before the sweep: %s", line)
			}
		}
		t.Logf("SOAK left for the orphan sweep:\n%v", err)
	}
	var cfg strings.Builder
	cfg.WriteString(cliHeader(kubeconfig, e.catalog))
	for kind, g := range s.groups {
		fmt.Fprintf(&cfg, "resource \"kubeplay_run\" %q {\n  container_group = %q\n  command = [\"true\"]\n}\n", kind, g.name)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"apply", "-auto-approve", "-input=false", "-no-color"}, {"destroy", "-auto-approve", "-input=false", "-no-color"}} {
		if err := terraformCLI(tf, cliConfig, dir, args...); err != nil {
			t.Errorf("SOAK the sweeping runs: %v", err)
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := leaks()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("SOAK LEAK: left behind after the sweep:\n%v", err)
			soakDescribePods(t, e, s)
			return
		}
		time.Sleep(2 * time.Second)
	}
}

// soakDescribePods logs the groups' run pods with what tells why a sweep
// left one: its run, its times, and whether kubeplay signed it.
func soakDescribePods(t *testing.T, e *testEnv, s *soakSetup) {
	for _, g := range s.groups {
		pods, err := e.kube.CoreV1().Pods(g.ns).List(context.Background(), metav1.ListOptions{LabelSelector: managed.LabelRun})
		if err != nil {
			t.Logf("SOAK listing pods of %s: %v", g.ns, err)
			continue
		}
		for _, p := range pods.Items {
			_, signed := p.Annotations[warmpool.AnnotationRunSignature]
			t.Logf("SOAK pod %s/%s: run %s, %s, created %s, started %v, signed %t, annotations %v",
				p.Namespace, p.Name, p.Labels[managed.LabelRun], p.Status.Phase, p.CreationTimestamp.UTC().Format(time.RFC3339),
				p.Status.StartTime, signed, p.Annotations)
		}
	}
}

// soakTable logs the summary.
func soakTable(t *testing.T, p soakParams, runs []*soakRun, flog *soakLog, outcomes, applyErrs map[string]int, converged map[int]string,
	peak soakRSS, faultsDone, took time.Duration) {
	var b strings.Builder
	fmt.Fprintf(&b, "SOAK SUMMARY seed %d (replay: %s)\n", p.seed, p.replay())
	kinds := map[string]int{}
	attempts := 0
	for _, r := range runs {
		kinds[r.kind]++
		attempts += r.attempts
	}
	fmt.Fprintf(&b, "  runs            %d (%d attempts) in %d workspaces: %s\n", len(runs), attempts, p.workspaces, soakCounts(kinds))
	byKind := map[string]int{}
	for _, f := range flog.faults() {
		byKind[string(f.Kind)]++
	}
	fmt.Fprintf(&b, "  faults          %d: %s\n", len(flog.faults()), soakCounts(byKind))
	fmt.Fprintf(&b, "  outcomes        %s\n", soakCounts(outcomes))
	fmt.Fprintf(&b, "  applies again   after an error that is no run's status: %s\n", soakCounts(applyErrs))
	conv := map[string]int{}
	for _, c := range converged {
		conv[c]++
	}
	fmt.Fprintf(&b, "  convergence     %s\n", soakCounts(conv))
	fmt.Fprintf(&b, "  provider memory peak VmHWM %d MiB, VmRSS %d MiB (bound %d MiB)\n", peak.hwm>>20, peak.rss>>20, p.maxRSS>>20)
	fmt.Fprintf(&b, "  duration        %s (runs and faults %s)\n", took.Round(time.Second), faultsDone.Round(time.Second))
	t.Log(b.String())
	for _, k := range soakFaultKinds {
		if p.faults >= len(soakFaultKinds) && byKind[string(k)] == 0 {
			t.Errorf("SOAK: no %s fault was injected", k)
		}
	}
}

func soakCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
