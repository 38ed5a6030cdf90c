// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// soakProblems collects what a soak check reports.
type soakProblems []string

func (p *soakProblems) errorf(format string, args ...any) {
	*p = append(*p, fmt.Sprintf(format, args...))
}

// soakOutput is what a run's playbook prints: its numbered lines in order.
func soakOutput(id string, lines ...int) string {
	var b strings.Builder
	b.WriteString("PLAY [all] ***\n")
	for _, i := range lines {
		fmt.Fprintf(&b, "ok: [h01] => (item=%d) => {\n    \"msg\": \"soak-line %s %d\"\n}\n", i, id, i)
	}
	return b.String()
}

func soakSeq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// TestSoakChecks: the soak's checks pass what a sound soak leaves and
// report each kind of fault they exist for, so that a passing soak means
// something.
func TestSoakChecks(t *testing.T) {
	flog := &soakLog{t: t, p: soakParams{seed: 7}, start: time.Now()}
	flog.add(soakFault{Kind: soakPodDelete, Pod: "pod-deleted"})
	ok := func(id string) *soakRun {
		return &soakRun{id: id, kind: soakCold, slices: 1, attempts: 1, inState: true, status: "successful",
			pods: []string{"pod-" + id}, output: soakOutput(id, soakSeq(soakRunLines)...)}
	}
	for _, c := range []struct {
		name    string
		run     func() *soakRun
		records string // the run's execution records, one "<pod>" a line
		want    string // in a problem reported; "" for none
	}{
		{"sound", func() *soakRun { return ok("a") }, "pod-a", ""},
		{"explained pod_deleted", func() *soakRun {
			r := ok("a")
			r.status, r.reason, r.pods, r.output = "error", "pod_deleted", []string{"pod-deleted"}, ""
			return r
		}, "pod-deleted", ""},
		{"pod_deleted no fault explains", func() *soakRun {
			r := ok("a")
			r.status, r.reason = "error", "pod_deleted"
			return r
		}, "pod-a", "MISMATCH"},
		{"an unexplained reason", func() *soakRun {
			r := ok("a")
			r.status, r.reason = "error", "cluster_unavailable"
			return r
		}, "pod-a", "MISMATCH"},
		{"not in the state", func() *soakRun { r := ok("a"); r.inState = false; r.status = ""; return r }, "", "MISMATCH"},
		{"twice in one pod", func() *soakRun { return ok("a") }, "pod-a\npod-a", "executed the playbook 2 times"},
		{"more pods than attempts", func() *soakRun { return ok("a") }, "pod-a\npod-b", "2 pods executed"},
		{"a second attempt may run again", func() *soakRun { r := ok("a"); r.attempts = 2; return r }, "pod-a\npod-b", ""},
		{"a successful pod that never ran", func() *soakRun { return ok("a") }, "", "recorded 0 executions"},
		{"a lost line", func() *soakRun {
			r := ok("a")
			r.output = soakOutput("a", soakSeq(soakRunLines-1)...)
			return r
		}, "pod-a", fmt.Sprintf("line %d 0 times", soakRunLines-1)},
		{"a doubled line", func() *soakRun {
			r := ok("a")
			r.output = soakOutput("a", append(soakSeq(soakRunLines), 3)...)
			return r
		}, "pod-a", "line 3 2 times"},
		{"another run's line", func() *soakRun {
			r := ok("a")
			r.output += soakOutput("b", 0)
			return r
		}, "pod-a", "a line of run b"},
		{"two slices", func() *soakRun {
			r := ok("a")
			r.slices, r.pods = 2, []string{"pod-a", "pod-a2"}
			r.output = soakOutput("a", soakSeq(soakRunLines)...) + soakOutput("a", soakSeq(soakRunLines)...)
			return r
		}, "pod-a\npod-a2", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := c.run()
			dir := t.TempDir()
			if c.records != "" {
				var b strings.Builder
				for _, pod := range strings.Split(c.records, "\n") {
					fmt.Fprintf(&b, "%s %s\n", r.id, pod)
				}
				if err := os.WriteFile(filepath.Join(dir, r.id), []byte(b.String()), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var got soakProblems
			soakCheckOutcomes(got.errorf, []*soakRun{r}, flog)
			soakCheckExecutions(got.errorf, []*soakRun{r}, dir)
			soakCheckOutputs(got.errorf, []*soakRun{r})
			switch {
			case c.want == "" && len(got) > 0:
				t.Errorf("a sound soak reported: %q", got)
			case c.want != "" && !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, c.want) }):
				t.Errorf("reported %q, want a problem saying %q", got, c.want)
			}
		})
	}
}

// The soak's parameters: make test-all's short defaults, make soak's
// settings, and the replay command that gives them back.
func TestSoakParams(t *testing.T) {
	for _, name := range []string{"KUBEPLAY_SOAK_SEED", "KUBEPLAY_SOAK_RUNS", "KUBEPLAY_SOAK_FAULTS", "KUBEPLAY_SOAK_WORKSPACES", "KUBEPLAY_SOAK_PAUSE"} {
		t.Setenv(name, "")
	}
	p := soakParamsFromEnv(t)
	if p.runs != 12 || p.faults != len(soakFaultKinds) || p.workspaces != 2 || p.pauseMin != 3*time.Second || p.pauseMax != 8*time.Second {
		t.Errorf("defaults: %+v", p)
	}
	t.Setenv("KUBEPLAY_SOAK_SEED", "42")
	t.Setenv("KUBEPLAY_SOAK_RUNS", "200")
	t.Setenv("KUBEPLAY_SOAK_FAULTS", "42")
	t.Setenv("KUBEPLAY_SOAK_WORKSPACES", "4")
	t.Setenv("KUBEPLAY_SOAK_PAUSE", "3s-8s")
	p = soakParamsFromEnv(t)
	const want = "make soak SEED=42 RUNS=200 FAULTS=42 WORKSPACES=4 PAUSE=3s-8s"
	if got := p.replay(); got != want {
		t.Errorf("replay = %q, want %q", got, want)
	}
}

// The default pauses are drawn as before they could be set, so a seed
// replays the sequence it gave then; equal bounds give that pause.
func TestSoakPause(t *testing.T) {
	before, now := rand.New(rand.NewPCG(7, 0)), rand.New(rand.NewPCG(7, 0))
	for i := range 100 {
		want := time.Duration(3000+before.IntN(5000)) * time.Millisecond
		if got := soakPause(now, 3*time.Second, 8*time.Second); got != want {
			t.Fatalf("pause %d: %s, want %s as before", i, got, want)
		}
	}
	if got := soakPause(now, 2*time.Second, 2*time.Second); got != 2*time.Second {
		t.Errorf("pause of 2s-2s: %s", got)
	}
}

// KUBEPLAY_SOAK_PAUSE: MIN-MAX, or an error that shows the form.
func TestParseSoakPause(t *testing.T) {
	for in, want := range map[string][2]time.Duration{"3s-8s": {3 * time.Second, 8 * time.Second}, "0s-0s": {}, "1m30s-2m": {90 * time.Second, 2 * time.Minute}} {
		lo, hi, err := parseSoakPause(in)
		if err != nil || lo != want[0] || hi != want[1] {
			t.Errorf("parseSoakPause(%q) = %s, %s, %v; want %s, %s", in, lo, hi, err, want[0], want[1])
		}
	}
	for _, in := range []string{"", "3s", "8s-3s", "-1s-2s", "3-8", "3s-8s-9s"} {
		if _, _, err := parseSoakPause(in); err == nil || !strings.Contains(err.Error(), "as 3s-8s") {
			t.Errorf("parseSoakPause(%q): %v; want an error that shows the form", in, err)
		}
	}
}

// FuzzSoakPause: any input parses to bounds with MIN at most MAX, or errs;
// the pauses drawn from them stay within them.
func FuzzSoakPause(f *testing.F) {
	for _, s := range []string{"3s-8s", "1s-4s", "0s-0s", "1ms-2ms", "8s-3s", "1h-999999h", "-"} {
		f.Add(s, uint64(1))
	}
	f.Fuzz(func(t *testing.T, s string, seed uint64) {
		lo, hi, err := parseSoakPause(s)
		if err != nil {
			return
		}
		if lo < 0 || hi < lo {
			t.Fatalf("parseSoakPause(%q) = %s, %s", s, lo, hi)
		}
		rng := rand.New(rand.NewPCG(seed, 0))
		for range 10 {
			if d := soakPause(rng, lo, hi); d < lo || d > hi {
				t.Fatalf("pause %s outside %s-%s", d, lo, hi)
			}
		}
	})
}
