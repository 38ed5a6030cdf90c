// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podexec"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/waitfor"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/warmpool"
)

// The issue #43 budgets of kubeplay's own requests.
const (
	coldRunBudget  = 15
	warmRunBudget  = 10
	noopPlanBudget = 1 // per run
)

// BenchmarkRunRequests counts the API requests kubeplay itself makes (not
// the kubelet's or the scheduler's), by verb and resource, as its clients log
// them to the file kubeclient.EnvRequestLog names: for one terraform apply
// of one run of a 2-task playbook into a cold group (cold), into a group
// with warm_pods = 2 whose pool is ready (warm), and for a terraform plan
// that changes nothing of 100 applied runs (noop-plan-100, per run); cold-10
// and warm-10 are applies of 10 runs, per run. Each says when its count is
// over the budget of issue #43.
//
//	TF_ACC=1 go test ./internal/provider -run '^$' -bench RunRequests -benchtime 1x -timeout 30m
func BenchmarkRunRequests(b *testing.B) {
	e := benchTestEnv(b)
	terraformBin, cliConfig, err := providerCLI(b)
	if err != nil {
		b.Fatal(err)
	}
	// cold-10 and warm-10 give what a run costs in an apply of many: what
	// each process reads once (the group, the catalog key, the server's
	// version, the dry run of the one pod, the orphan sweep) is shared by
	// ten runs. A single warm run must have had its warm pod; of ten, those
	// that did not are logged.
	for _, c := range []struct {
		name         string
		runs, warm   int
		budget       float64
		mustBeWarmed bool
	}{
		{"cold", 1, 0, coldRunBudget, false},
		{"warm", 1, 2, warmRunBudget, true},
		{"cold-10", 10, 0, coldRunBudget, false},
		{"warm-10", 10, 10, warmRunBudget, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := newRequestSetup(b, e, terraformBin, cliConfig, c.warm)
			for b.Loop() {
				s.apply(0)
				if c.warm > 0 {
					acctest.WaitWarmReady(b, e.kube, s.ns, "requests", c.warm)
				}
				reqs := s.count(func() { s.apply(c.runs, "playbook") })
				if c.warm > 0 {
					if n := warmRuns(b, s.dir); n != c.runs && c.mustBeWarmed {
						b.Fatalf("%d runs in warm pods, want %d", n, c.runs)
					} else if n != c.runs {
						b.Logf("%d of %d runs in warm pods", n, c.runs)
					}
				}
				reportRequests(b, reqs, c.runs, c.budget)
			}
		})
	}
	b.Run("noop-plan-100", func(b *testing.B) {
		s := newRequestSetup(b, e, terraformBin, cliConfig, 0)
		s.apply(100, "command", "-parallelism=20")
		for b.Loop() {
			reqs := s.count(func() { s.cli("plan", "-input=false", "-no-color", "-detailed-exitcode") })
			reportRequests(b, reqs, 100, noopPlanBudget)
		}
	})
}

// requestSetup is a Terraform directory with a group of its own.
type requestSetup struct {
	b                       *testing.B
	e                       *testEnv
	terraformBin, cliConfig string
	dir, ns, log            string
	warm                    int
}

func newRequestSetup(b *testing.B, e *testEnv, terraformBin, cliConfig string, warm int) *requestSetup {
	s := &requestSetup{b: b, e: e, terraformBin: terraformBin, cliConfig: cliConfig, dir: b.TempDir(),
		ns: acctest.Namespace(b, e.kube, "kp-requests"), warm: warm}
	s.log = filepath.Join(s.dir, "requests.log")
	b.Cleanup(func() {
		s.write(0, "command")
		if err := terraformCLI(terraformBin, cliConfig, s.dir, "destroy", "-auto-approve", "-input=false", "-no-color"); err != nil {
			b.Error(err)
		}
	})
	return s
}

func (s *requestSetup) write(n int, kind string) {
	body := `command = ["true"]`
	if kind == "playbook" {
		body = fmt.Sprintf("playbook = %q", benchPlaybook)
	}
	cfg := cliHeader(s.e.kubeconfig, s.e.catalog) + benchGroup("requests", s.ns, s.warm) + fmt.Sprintf(`
resource "kubeplay_run" "r" {
  count           = %d
  container_group = kubeplay_container_group.g.name
  %s
}
`, n, body)
	if err := os.WriteFile(filepath.Join(s.dir, "main.tf"), []byte(cfg), 0o600); err != nil {
		s.b.Fatal(err)
	}
}

// cli runs terraform in the setup's directory; the provider appends its
// requests to s.log.
func (s *requestSetup) cli(args ...string) {
	s.b.Helper()
	if err := terraformCLIEnv(s.terraformBin, s.cliConfig, s.dir, []string{kubeclient.EnvRequestLog + "=" + s.log}, args...); err != nil {
		s.b.Fatal(err)
	}
}

func (s *requestSetup) apply(n int, args ...string) {
	s.b.Helper()
	kind := "command"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		kind, args = args[0], args[1:]
	}
	s.write(n, kind)
	s.cli(append([]string{"apply", "-auto-approve", "-input=false", "-no-color"}, args...)...)
}

// count gives the requests the provider made while f ran, "VERB resource"
// to their number.
func (s *requestSetup) count(f func()) map[string]int {
	_ = os.Remove(s.log)
	f()
	out := map[string]int{}
	fh, err := os.Open(s.log)
	if os.IsNotExist(err) {
		return out
	}
	if err != nil {
		s.b.Fatal(err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		// "pid VERB resource [namespace]": counted without the namespace.
		f := strings.Fields(sc.Text())
		if len(f) >= 3 {
			out[f[1]+" "+f[2]]++
		}
	}
	return out
}

// reportRequests reports reqs per run, per verb and resource and in total,
// and says when they are over budget (a failure would hide the metrics).
func reportRequests(b *testing.B, reqs map[string]int, runs int, budget float64) {
	b.Helper()
	total := 0
	var per []string
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range reqs {
			if !yield(k) {
				return
			}
		}
	}) {
		total += reqs[k]
		v := float64(reqs[k]) / float64(runs)
		per = append(per, fmt.Sprintf("%s %.2f", k, v))
		b.ReportMetric(v, strings.ReplaceAll(k, " ", "-")+"/run")
	}
	t := float64(total) / float64(runs)
	b.ReportMetric(t, "requests/run")
	b.Logf("kubeplay's API requests per run (%d runs): total %.2f; %s", runs, t, strings.Join(per, "; "))
	if t > budget {
		b.Logf("OVER BUDGET: %.2f requests per run, the budget is %.0f", t, budget)
	}
}

// BenchmarkWarmApply times, side by side in one sitting, the whole terraform
// apply of one run of a 2-task playbook into a group with warm_pods = 2
// (its pool ready) against the same playbook exec'd into a running pod of
// the group's spec alone (as BenchmarkWarmRun's exec alone), the median of 5
// each; then, in as many more applies with TF_LOG=trace, where the apply's
// time goes: the provider's time in each gRPC call (from its "Received
// request" and "Served request" lines), the provider processes' start and
// stop (Terraform starts one for the schema, one to validate, one to plan
// and one to apply), and the rest, Terraform's own.
//
//	TF_ACC=1 go test ./internal/provider -run '^$' -bench WarmApply -benchtime 5x -timeout 30m
func BenchmarkWarmApply(b *testing.B) {
	e := benchTestEnv(b)
	terraformBin, cliConfig, err := providerCLI(b)
	if err != nil {
		b.Fatal(err)
	}
	s := newRequestSetup(b, e, terraformBin, cliConfig, 2)
	ctx := context.Background()
	s.apply(0)

	// The exec alone: a pod of the group's spec, not one of its pool.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "exec-alone", Namespace: s.ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "worker", Image: acctest.TestImage(), Command: []string{"sleep", "infinity"},
			Resources: acctest.HelperResources()}}}}
	if _, err := e.kube.CoreV1().Pods(s.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := waitfor.Until(ctx, waitfor.Named(e.kube.CoreV1().Pods(s.ns), pod.Name), &corev1.Pod{}, func(ev watch.Event) (bool, error) {
		p, ok := ev.Object.(*corev1.Pod)
		return ok && warmpool.Ready(p), nil
	}); err != nil {
		b.Fatal(err)
	}
	cfg := acctest.RESTConfig(b)
	cmd := []string{"sh", "-c", "cat > /tmp/p.yml && ansible-playbook -i localhost, -c local /tmp/p.yml"}
	execAlone := func() float64 {
		var out strings.Builder
		start := time.Now()
		code, err := podexec.Run(ctx, cfg, e.kube, s.ns, pod.Name, "worker", cmd, strings.NewReader(benchPlaybook), &out, io.Discard)
		d := time.Since(start)
		if err != nil || code != 0 || !strings.Contains(out.String(), "ok=2") {
			b.Fatalf("exec: %d, %v, %q", code, err, out.String())
		}
		return d.Seconds()
	}
	warmApply := func(env ...string) float64 {
		acctest.WaitWarmReady(b, e.kube, s.ns, "requests", 2)
		s.write(1, "playbook")
		start := time.Now()
		if err := terraformCLIEnv(terraformBin, cliConfig, s.dir, env, "apply", "-auto-approve", "-input=false", "-no-color"); err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		if n := warmRuns(b, s.dir); n != 1 {
			b.Fatalf("%d runs in warm pods, want 1", n)
		}
		s.apply(0)
		return d.Seconds()
	}
	var applies, execs, traced []float64
	rpcs := map[string][]float64{}
	for b.Loop() {
		applies = append(applies, warmApply())
		execs = append(execs, execAlone())
		logPath := filepath.Join(s.dir, "trace.log")
		_ = os.Remove(logPath)
		traced = append(traced, warmApply("TF_LOG=trace", "TF_LOG_PATH="+logPath))
		for rpc, d := range rpcTimes(b, logPath) {
			rpcs[rpc] = append(rpcs[rpc], d)
		}
	}
	a, x := acctest.Median(applies), acctest.Median(execs)
	b.ReportMetric(a, "s-warm-apply")
	b.ReportMetric(x, "s-exec-alone")
	b.ReportMetric(a/x, "x-exec")
	var lines []string
	var inRPCs, procs float64
	for _, rpc := range slices.Sorted(func(yield func(string) bool) {
		for k := range rpcs {
			if !yield(k) {
				return
			}
		}
	}) {
		m := acctest.Median(rpcs[rpc])
		switch rpc {
		case "(processes)":
			lines = append(lines, fmt.Sprintf("%s %.0f", rpc, m))
			continue
		case "(process start)", "(process stop)":
			procs += m
		default:
			inRPCs += m
		}
		lines = append(lines, fmt.Sprintf("%s %.3f", rpc, m))
	}
	t := acctest.Median(traced)
	b.ReportMetric(inRPCs, "s-in-grpc-calls")
	b.ReportMetric(procs, "s-process-start-stop")
	b.Logf("medians over %d: warm apply %.3f s, exec alone %.3f s (%.2fx)", len(applies), a, x, a/x)
	b.Logf("traced apply %.3f s (TF_LOG=trace): %s; in gRPC calls %.3f s, provider processes' start and stop %.3f s, "+
		"the rest (Terraform's own work) %.3f s", t, strings.Join(lines, "; "), inRPCs, procs, t-inRPCs-procs)
}

var (
	rpcLine  = regexp.MustCompile(`^(\S+) \[TRACE\] provider\.terraform-provider-kubeplay[^:]*: (Received|Served) request: .*\btf_rpc=(\w+)`)
	rpcReqID = regexp.MustCompile(`\btf_req_id=([0-9a-f-]+)`)
	// Terraform's own lines around each provider process it starts.
	pluginLine = regexp.MustCompile(`^(\S+) \[\w+\] provider: (starting plugin|using plugin|plugin exited)`)
)

// rpcTimes sums, per gRPC call, the provider's time between "Received
// request" and "Served request" in a TF_LOG=trace log; calls of the same
// kind add up (one apply validates, plans and applies in processes of their
// own). "(process start)" is the time from Terraform starting a provider
// process to its handshake, "(process stop)" from the last call's answer to
// the process's exit, summed over the processes; "(processes)" counts them.
func rpcTimes(b *testing.B, logPath string) map[string]float64 {
	raw, err := os.ReadFile(logPath)
	if err != nil {
		b.Fatal(err)
	}
	parse := func(s string) (time.Time, bool) {
		ts, err := time.Parse("2006-01-02T15:04:05.000Z0700", s)
		return ts, err == nil
	}
	start := map[string]time.Time{}
	out := map[string]float64{}
	var starting, lastServed time.Time
	for line := range strings.SplitSeq(string(raw), "\n") {
		if m := pluginLine.FindStringSubmatch(line); m != nil {
			ts, ok := parse(m[1])
			switch {
			case !ok:
			case m[2] == "starting plugin":
				starting = ts
				out["(processes)"]++
			case m[2] == "using plugin" && !starting.IsZero():
				out["(process start)"] += ts.Sub(starting).Seconds()
			case m[2] == "plugin exited" && !lastServed.IsZero():
				out["(process stop)"] += ts.Sub(lastServed).Seconds()
			}
			continue
		}
		m := rpcLine.FindStringSubmatch(line)
		id := rpcReqID.FindStringSubmatch(line)
		if m == nil || id == nil {
			continue
		}
		ts, ok := parse(m[1])
		if !ok {
			continue
		}
		if m[2] == "Received" {
			start[id[1]] = ts
		} else if s, ok := start[id[1]]; ok {
			out[m[3]] += ts.Sub(s).Seconds()
			lastServed = ts
		}
	}
	if len(start) == 0 {
		b.Fatalf("no gRPC call in %s", logPath)
	}
	return out
}
