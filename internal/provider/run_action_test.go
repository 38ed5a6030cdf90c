// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-version"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

// requireActions skips the test unless acceptance tests run and the
// Terraform in use (TF_ACC_TERRAFORM_PATH, else the one on PATH) has
// actions, which came with 1.14.
func requireActions(t *testing.T) {
	t.Helper()
	if os.Getenv(resource.EnvTfAcc) == "" {
		t.Skipf("acceptance test: set %s=1 to run it against a Kubernetes cluster", resource.EnvTfAcc)
	}
	bin := os.Getenv("TF_ACC_TERRAFORM_PATH")
	if bin == "" {
		bin, _ = exec.LookPath("terraform")
	}
	if !terraformAtLeast(t, 14) {
		t.Skipf("Terraform at %s has no actions, which need 1.14 or later: set TF_ACC_TERRAFORM_PATH to a newer "+
			"terraform (make testacc uses .cache/bin/terraform-1.16.0)", bin)
	}
}

// terraformVersion is the version of the Terraform in use
// (TF_ACC_TERRAFORM_PATH, else the one on PATH).
func terraformVersion(t *testing.T) *version.Version {
	t.Helper()
	bin := os.Getenv("TF_ACC_TERRAFORM_PATH")
	if bin == "" {
		bin, _ = exec.LookPath("terraform")
	}
	out, err := exec.Command(bin, "version", "-json").Output()
	if err != nil {
		t.Fatalf("terraform version: %v", err)
	}
	var v struct {
		Version string `json:"terraform_version"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("terraform version -json: %v", err)
	}
	got, err := version.NewVersion(v.Version)
	if err != nil {
		t.Fatalf("terraform version %q: %v", v.Version, err)
	}
	return got
}

// terraformAtLeast reports whether the Terraform in use is 1.minor or later.
func terraformAtLeast(t *testing.T, minor int) bool {
	t.Helper()
	return terraformVersion(t).Core().GreaterThanOrEqual(version.Must(version.NewVersion(fmt.Sprintf("1.%d.0", minor))))
}

// arrival is one line of terraform's output and when the test read it.
type arrival struct {
	at   time.Time
	line string
}

// terraformLines runs terraform in dir and reads its stdout line by line as
// it comes, timestamping each line.
func (f *faultEnv) terraformLines(t *testing.T, dir string, args ...string) ([]arrival, string, error) {
	t.Helper()
	return terraformLines(t, f.terraformBin, f.cliConfig, dir, args...)
}

func terraformLines(t *testing.T, terraformBin, cliConfig, dir string, args ...string) ([]arrival, string, error) {
	t.Helper()
	return terraformLinesFunc(t, terraformBin, cliConfig, dir, nil, args...)
}

// terraformLinesFunc is terraformLines that also calls onLine, when not nil,
// with each line as it arrives.
func terraformLinesFunc(t *testing.T, terraformBin, cliConfig, dir string, onLine func(string), args ...string) ([]arrival, string, error) {
	t.Helper()
	cmd := terraformCommand(terraformBin, cliConfig, dir, nil, args...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []arrival
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		lines = append(lines, arrival{at: time.Now(), line: sc.Text()})
		if onLine != nil {
			onLine(sc.Text())
		}
	}
	err = cmd.Wait()
	return lines, stderr.String(), err
}

// firstLine is the index of the first line that matches re, or -1.
func firstLine(lines []arrival, re string) int {
	r := regexp.MustCompile(re)
	for i, l := range lines {
		if r.MatchString(l.line) {
			return i
		}
	}
	return -1
}

func dump(lines []arrival) string {
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "%s %s\n", l.at.Format("15:04:05.000"), l.line)
	}
	return b.String()
}

// tickPlaybook prints tick-1 to tick-5, one a second.
const tickPlaybook = `<<-YAML
      - hosts: all
        gather_facts: false
        tasks:
          - debug: {msg: "tick-{{ item }}"}
            loop: [1, 2, 3, 4, 5]
            loop_control: {pause: 1}
    YAML`

// TestAccRunAction_streams invokes the action on a playbook that prints a
// line a second and reads Terraform's output as it comes: each line must
// arrive before the next is printed, so about a second apart (buffered
// until the end, they would arrive together), and the recap and the status
// after the last.
func TestAccRunAction_streams(t *testing.T) {
	requireActions(t)
	f := newFaultEnv(t, faultGroup{attrs: faultLimits})
	dir := f.dir(t, fmt.Sprintf(`action "kubeplay_run" "x" {
  config {
    container_group = %q
    playbook        = %s
  }
}
`, f.group, tickPlaybook))
	lines, stderr, err := f.terraformLines(t, dir, "apply", "-invoke=action.kubeplay_run.x", "-auto-approve", "-input=false", "-no-color")
	if err != nil {
		t.Fatalf("invoking the action: %v\n%s\n%s", err, dump(lines), stderr)
	}
	t.Logf("terraform's output as it came:\n%s", dump(lines))
	running := firstLine(lines, `pod \S+ running`)
	ticks := make([]int, 5)
	for i := range ticks {
		if ticks[i] = firstLine(lines, fmt.Sprintf(`"msg": "tick-%d"`, i+1)); ticks[i] < 0 {
			t.Fatalf("tick-%d is not in terraform's output:\n%s", i+1, dump(lines))
		}
	}
	if running < 0 || running > ticks[0] {
		t.Errorf("the pod's running event (line %d) did not come before the output:\n%s", running, dump(lines))
	}
	// Printed a second apart; batching adds at most a quarter of a second.
	// A loaded machine may delay a line toward the next one (make test-all
	// once saw gaps of 0.50, 1.83, 0.33 and 1.39 s), so two of the four gaps
	// may be short; output buffered until the end has all four short and
	// spans nothing, and output flushed in halves spans under 3 s.
	var short []string
	for i := 1; i < len(ticks); i++ {
		if gap := lines[ticks[i]].at.Sub(lines[ticks[i-1]].at); gap < 500*time.Millisecond {
			short = append(short, fmt.Sprintf("tick-%d came %s after tick-%d", i+1, gap, i))
		}
	}
	if span := lines[ticks[4]].at.Sub(lines[ticks[0]].at); len(short) > 2 || span < 3*time.Second {
		t.Errorf("the output is not streamed as it is printed: tick-1 to tick-5 took %s (printed over 4 s); %s:\n%s",
			span, strings.Join(short, ", "), dump(lines))
	}
	recap, status := firstLine(lines, `recap:`), firstLine(lines, `status: successful \(exit code 0\)`)
	if recap < ticks[4] || status < recap {
		t.Errorf("want the recap (line %d) after the last tick (line %d), and the status (line %d) after it:\n%s", recap, ticks[4], status, dump(lines))
	}
	// Then where its time went, summed.
	if tl := firstLine(lines, `timeline: queued \d+\.\ds, create .*playbook \d+\.\ds, cleanup \d+\.\ds \(total \d+\.\ds\)$`); tl < status {
		t.Errorf("want the timeline (line %d) after the status (line %d):\n%s", tl, status, dump(lines))
	}
	f.checkNoLeaks(t)
}

// TestAccRunAction_trigger runs the action from an action_trigger on
// after_create of a terraform_data during a plain apply, and on
// before_destroy (Terraform 1.16) during a destroy: its output shows, and
// its pod ran in the group's namespace (and is gone).
func TestAccRunAction_trigger(t *testing.T) {
	requireActions(t)
	f := newFaultEnv(t, faultGroup{attrs: faultLimits})
	dir := f.dir(t, fmt.Sprintf(`resource "terraform_data" "t" {
  input = "x"
  lifecycle {
    action_trigger {
      events  = [after_create]
      actions = [action.kubeplay_run.x]
    }
    action_trigger {
      events  = [before_destroy]
      actions = [action.kubeplay_run.x]
    }
  }
}

action "kubeplay_run" "x" {
  config {
    container_group = %q
    command         = ["sh", "-c", "echo triggered-$((20+22))"]
  }
}
`, f.group))
	pods := f.watchRunPods(t)
	lines, stderr, err := f.terraformLines(t, dir, "apply", "-auto-approve", "-input=false", "-no-color")
	seen := pods()
	if err != nil {
		t.Fatalf("apply: %v\n%s\n%s", err, dump(lines), stderr)
	}
	if firstLine(lines, `triggered-42`) < 0 || firstLine(lines, `status: successful`) < 0 {
		t.Errorf("the action's output is not in the apply's:\n%s", dump(lines))
	}
	if len(seen) != 1 {
		t.Errorf("want one run pod created in %s during the apply, saw %v", f.ns, seen)
	}
	f.checkNoLeaks(t)
	if !terraformAtLeast(t, 16) {
		return
	}
	pods = f.watchRunPods(t)
	lines, stderr, err = f.terraformLines(t, dir, "destroy", "-auto-approve", "-input=false", "-no-color")
	seen = pods()
	if err != nil {
		t.Fatalf("destroy: %v\n%s\n%s", err, dump(lines), stderr)
	}
	if firstLine(lines, `triggered-42`) < 0 || len(seen) != 1 {
		t.Errorf("the before_destroy action did not run (run pods %v):\n%s", seen, dump(lines))
	}
	f.checkNoLeaks(t)
}

// TestAccRunAction_failure invokes a failing playbook: an error that quotes
// the output's tail, and no pod left.
func TestAccRunAction_failure(t *testing.T) {
	requireActions(t)
	f := newFaultEnv(t, faultGroup{attrs: faultLimits})
	dir := f.dir(t, fmt.Sprintf(`action "kubeplay_run" "x" {
  config {
    container_group = %q
    playbook        = "- hosts: all\n  gather_facts: false\n  tasks:\n    - debug: {msg: before-the-failure}\n    - fail: {msg: deliberate-failure}\n"
  }
}
`, f.group))
	lines, stderr, err := f.terraformLines(t, dir, "apply", "-invoke=action.kubeplay_run.x", "-auto-approve", "-input=false", "-no-color")
	if err == nil {
		t.Fatalf("a failing playbook's action succeeded:\n%s", dump(lines))
	}
	for _, want := range []string{`Error: Run Failed`, `exited\s+with\s+code\s+2`, `output's\s+last\s+lines`, `deliberate-failure`} {
		if !regexp.MustCompile(want).MatchString(stderr) {
			t.Errorf("the error does not match %q:\n%s", want, stderr)
		}
	}
	if firstLine(lines, `status: failed, playbook_failed \(exit code 2\)`) < 0 {
		t.Errorf("no failed status with its reason in the progress:\n%s", dump(lines))
	}
	f.checkNoLeaks(t)

	// From a trigger with on_failure = continue, the failure is a warning.
	dir = f.dir(t, fmt.Sprintf(`resource "terraform_data" "t" {
  input = "x"
  lifecycle {
    action_trigger {
      events     = [after_create]
      actions    = [action.kubeplay_run.x]
      on_failure = continue
    }
  }
}

action "kubeplay_run" "x" {
  config {
    container_group = %q
    command         = ["sh", "-c", "echo failing-on-purpose; exit 3"]
  }
}
`, f.group))
	lines, stderr, err = f.terraformLines(t, dir, "apply", "-auto-approve", "-input=false", "-no-color")
	out := dump(lines) + stderr
	if err != nil || !regexp.MustCompile(`Warning: Run Failed`).MatchString(out) || firstLine(lines, `: failing-on-purpose$`) < 0 {
		t.Errorf("with on_failure = continue, want a successful apply with a Run Failed warning (err %v):\n%s", err, out)
	}
	f.checkNoLeaks(t)
}

// watchRunPods watches the group's namespace for run pods; the function it
// returns stops the watch and gives the names of the pods created.
func (f *faultEnv) watchRunPods(t *testing.T) func() []string {
	pods := f.watchRunPodSpecs(t)
	return func() []string {
		var names []string
		for _, p := range pods() {
			names = append(names, p.Name)
		}
		return names
	}
}

// watchRunPodSpecs is watchRunPods that gives the pods, as last seen.
func (f *faultEnv) watchRunPodSpecs(t *testing.T) func() []*corev1.Pod {
	ctx, cancel := context.WithCancel(context.Background())
	w, err := f.e.kube.CoreV1().Pods(f.ns).Watch(ctx, metav1.ListOptions{LabelSelector: managed.Selector()})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		seen = map[string]*corev1.Pod{}
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && p.Labels[managed.LabelRun] != "" {
				mu.Lock()
				seen[p.Name] = p
				mu.Unlock()
			}
		}
	}()
	return func() []*corev1.Pod {
		cancel()
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		var pods []*corev1.Pod
		for _, p := range seen {
			pods = append(pods, p)
		}
		return pods
	}
}

// TestAccRunAction_timeout: timeouts.invoke bounds the run. Its pod's
// activeDeadlineSeconds is that plus 2 s, and a run that outlasts it ends as
// error at it, with reason timeout (not a stream the kubelet's deadline
// broke), failing the invocation, and leaves nothing behind.
func TestAccRunAction_timeout(t *testing.T) {
	requireActions(t)
	// The pod asks for little CPU: under CI's load the default 250m found
	// no room on the node for 18.5 s of the 20, and the command never ran.
	// 90 s, not 20 or 45: a pod that requests no CPU gets the least share of
	// it (cpu.shares 2), and on a slower machine under make test-all's load
	// its "echo started" had not run 31 s into the playbook step.
	f := newFaultEnv(t, faultGroup{attrs: faultLimits + faultNoCPU})
	dir := f.dir(t, fmt.Sprintf(`action "kubeplay_run" "x" {
  config {
    container_group = %q
    command         = ["sh", "-c", "echo started; sleep 300"]
    timeouts {
      invoke = "90s"
    }
  }
}
`, f.group))
	pods := f.watchRunPodSpecs(t)
	start := time.Now()
	lines, stderr, err := f.terraformLines(t, dir, "apply", "-invoke=action.kubeplay_run.x", "-auto-approve", "-input=false", "-no-color")
	took := time.Since(start)
	seen := pods()
	if err == nil {
		t.Fatalf("a run past its timeouts.invoke succeeded:\n%s", dump(lines))
	}
	for _, want := range []string{`Error: Run Error`, `did\s+not\s+finish\s+within\s+its\s+timeout;\s+it\s+ended\s+in\s+its\s+playbook\s+step\s+\(status_reason`, `status_reason\s+timeout`, `Raise\s+timeouts\.invoke`} {
		if !regexp.MustCompile(want).MatchString(stderr) {
			t.Errorf("the error does not match %q:\n%s", want, stderr)
		}
	}
	if firstLine(lines, `: started$`) < 0 || firstLine(lines, `status: error`) < 0 {
		t.Errorf("want the run's output and its error status in the progress:\n%s", dump(lines))
	}
	// Terraform's start and init come on top of the 90 s; under CI's load
	// they have taken 56 s here. The command alone would take 300 s.
	if took < 90*time.Second || took > 270*time.Second {
		t.Errorf("the invocation took %s, want it to end at its 90s timeout", took.Round(100*time.Millisecond))
	}
	if len(seen) != 1 {
		t.Fatalf("want one run pod, saw %d", len(seen))
	}
	if c := seen[0].Spec.Containers; len(c) == 0 || !zeroRequest(c[0], corev1.ResourceCPU) {
		t.Errorf("the run pod's containers %+v; want the worker to request no CPU (the group's override)", c)
	}
	if d := seen[0].Spec.ActiveDeadlineSeconds; d == nil || *d != 92 {
		t.Errorf("the run pod's activeDeadlineSeconds is %d (-1: none), want the 90s of timeouts.invoke and 2", ptr.Deref(d, -1))
	} else {
		t.Logf("ended after %s, activeDeadlineSeconds %d", took.Round(100*time.Millisecond), *d)
	}
	f.checkNoLeaks(t)
}

// TestAccRunAction_example applies examples/actions/kubeplay_run as it is:
// the smoke test runs after the create, the first example's playbook and the
// rotation when invoked, the drain before the destroy, and nothing is left.
func TestAccRunAction_example(t *testing.T) {
	requireActions(t)
	if !terraformAtLeast(t, 16) {
		t.Skip("the example's before_destroy trigger needs Terraform 1.16")
	}
	e := newTestEnv(t)
	root, err := acctest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"action-basic.tf", "action.tf", "provider.tf", "variables.tf"} {
		b, err := os.ReadFile(filepath.Join(root, "examples", "actions", "kubeplay_run", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	bin, cliConfig, err := providerCLI(t)
	if err != nil {
		t.Fatal(err)
	}
	vars := []string{"-auto-approve", "-input=false", "-no-color", "-var", "kubeconfig=" + e.kubeconfig, "-var", "catalog_namespace=" + e.catalog}
	destroyed := false
	t.Cleanup(func() {
		if !destroyed {
			_, _, _ = terraformLines(t, bin, cliConfig, dir, append([]string{"destroy"}, vars...)...)
		}
	})
	for _, step := range []struct {
		args []string
		want string
	}{
		{[]string{"apply"}, `: smoke testing release v1$`},
		{[]string{"apply", "-invoke=action.kubeplay_run.hello"}, `"msg": "Hello from an ephemeral pod"`},
		{[]string{"apply", "-invoke=action.kubeplay_run.rotate_logs"}, `"msg": "rotating logs of v1"`},
		{[]string{"destroy"}, `: draining release v1$`},
	} {
		lines, stderr, err := terraformLines(t, bin, cliConfig, dir, append(step.args, vars...)...)
		if err != nil || firstLine(lines, step.want) < 0 {
			t.Fatalf("terraform %s: %v; want %q in:\n%s\n%s", step.args, err, step.want, dump(lines), stderr)
		}
	}
	destroyed = true
	acctest.CheckNoLeaks(t, e.kube, acctest.LeakScope{Namespaces: []string{"ops-runs"}, Group: "ops"})
}

// TestAccRunAction_waitsForCapacity invokes the action while a run holds
// the only slot of a group with max_concurrent_runs = 1: the progress says
// it waits for capacity before its pod is created. The holder keeps the
// slot until the action says it waits, then is interrupted: a fixed sleep
// ended before a loaded machine's second terraform got to the wait.
func TestAccRunAction_waitsForCapacity(t *testing.T) {
	requireActions(t)
	f := newFaultEnv(t, faultGroup{attrs: "max_concurrent_runs = 1\n  pod_pending_timeout = \"10m\"\n"})
	holder := f.runDir(t, commandRun(startedThen("sleep 600"), "10m"))
	cmd, out := holder.start(t)
	f.waitStarted(t, holder, out)
	dir := f.dir(t, fmt.Sprintf(`action "kubeplay_run" "x" {
  config {
    container_group = %q
    command         = ["sh", "-c", "echo after-the-wait"]
  }
}
`, f.group))
	waits := regexp.MustCompile(`waiting for capacity: container group "` + regexp.QuoteMeta(f.group) + `" has no room for a run slot`)
	var release sync.Once
	lines, stderr, err := terraformLinesFunc(t, f.terraformBin, f.cliConfig, dir, func(l string) {
		if waits.MatchString(l) {
			release.Do(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) })
		}
	}, "apply", "-invoke=action.kubeplay_run.x", "-auto-approve", "-input=false", "-no-color")
	release.Do(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) })
	_ = cmd.Wait()
	if err != nil {
		t.Fatalf("invoking the action: %v\n%s\n%s", err, dump(lines), stderr)
	}
	waiting, created := firstLine(lines, waits.String()), firstLine(lines, `pod \S+ created`)
	if waiting < 0 || created < waiting || firstLine(lines, `: after-the-wait$`) < created {
		t.Errorf("want the wait for capacity (line %d) before the pod's creation (line %d) and the output:\n%s", waiting, created, dump(lines))
	}
	f.checkNoLeaks(t)
}

// TestAccRunAction_cutProxy invokes the action through a proxy between the
// provider and the API server that cuts every connection every 5 s from
// the run's first output line on, on a command that prints a line every
// 100 ms for about 40 s: Terraform's terminal shows every line once, in
// order, then the count that says each iteration ran once, and the run
// succeeds.
func TestAccRunAction_cutProxy(t *testing.T) {
	requireActions(t)
	e := newTestEnv(t)
	proxy := startCutProxy(t, e.kubeconfig)
	f := newFaultEnvWith(t, e, proxy.kubeconfig, faultGroup{attrs: faultLimits})
	const n = 400
	dir := f.dir(t, fmt.Sprintf(`action "kubeplay_run" "x" {
  config {
    container_group = %q
    command         = ["sh", "-c", %q]
    timeouts {
      invoke = "10m"
    }
  }
}
`, f.group, countedCommand(n, 0)))
	var (
		once sync.Once
		stop = func() (int, int) { return 0, 0 }
	)
	first := regexp.MustCompile(`: line 0$`)
	lines, stderr, err := terraformLinesFunc(t, f.terraformBin, f.cliConfig, dir, func(l string) {
		if first.MatchString(l) {
			once.Do(func() { stop = proxy.cutEvery(5 * time.Second) })
		}
	}, "apply", "-invoke=action.kubeplay_run.x", "-auto-approve", "-input=false", "-no-color")
	cuts, conns := stop()
	t.Logf("the proxy cut %d times, %d connections in all", cuts, conns)
	if err != nil {
		t.Fatalf("invoking the action: %v\n%s\n%s", err, dump(lines), stderr)
	}
	if cuts < 5 {
		t.Errorf("the proxy cut only %d times during the run's output", cuts)
	}
	// The run's output, as the terminal shows it: the action's prefix off.
	prefix := regexp.MustCompile(`^Action action\.kubeplay_run\.x \(triggered by CLI\): ?`)
	// The progress after the output: the run's summary, the recap, the status.
	end := regexp.MustCompile(`^(run \S+ ran in container group |recap: |status: )`)
	var got []string
	in := false
	for _, l := range lines {
		text := prefix.ReplaceAllString(l.line, "")
		switch {
		case text == "line 0":
			in = true
		case end.MatchString(text):
			in = false
		}
		if in && text != "" {
			got = append(got, text)
		}
	}
	want := strings.Split(strings.TrimSuffix(countedOutput(n), "\n"), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the terminal does not show the run's %d lines once, in order: %s\n%s", len(want),
			outputDiff(strings.Join(got, "\n")+"\n", countedOutput(n)), dump(lines))
	}
	if firstLine(lines, `status: successful \(exit code 0\)`) < 0 {
		t.Errorf("the run did not end successful:\n%s", dump(lines))
	}
	f.checkNoLeaks(t)
}

// TestAccRunAction_slices: the action's live output of a run in 2 slices
// names each line's slice, and each slice's end comes before the recap.
func TestAccRunAction_slices(t *testing.T) {
	requireActions(t)
	f := newFaultEnv(t, faultGroup{attrs: faultLimits})
	dir := f.dir(t, fmt.Sprintf(`action "kubeplay_run" "x" {
  config {
    container_group = %q
    slices          = 2
    inventory       = "h1\nh2\n[all:vars]\nansible_connection=local\nansible_python_interpreter=/usr/bin/python3\n"
    playbook        = "- hosts: all\n  gather_facts: false\n  tasks:\n    - debug: {msg: 'from {{ inventory_hostname }}'}\n"
  }
}
`, f.group))
	lines, stderr, err := f.terraformLines(t, dir, "apply", "-invoke=action.kubeplay_run.x", "-auto-approve", "-input=false", "-no-color")
	if err != nil {
		t.Fatalf("invoking the action: %v\n%s\n%s", err, dump(lines), stderr)
	}
	one, two := firstLine(lines, `\[slice 1/2\]     "msg": "from h1"`), firstLine(lines, `\[slice 2/2\]     "msg": "from h2"`)
	ends := []int{firstLine(lines, `=== slice 1/2 in pod \S+ on node \S+: successful \(exit code 0\) ===`),
		firstLine(lines, `=== slice 2/2 in pod \S+ on node \S+: successful \(exit code 0\) ===`)}
	recap := firstLine(lines, `recap: 2 hosts: 2 ok`)
	if one < 0 || two < 0 || ends[0] < 0 || ends[1] < 0 || recap < max(ends[0], ends[1]) || ends[0] < one || ends[1] < two {
		t.Errorf("want each slice's output line with its slice, then each slice's end, then the recap:\n%s", dump(lines))
	}
	f.checkNoLeaks(t)
}
