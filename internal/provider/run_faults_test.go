// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

// The fault matrix of kubeplay_run: each row injects one fault into a run
// applied by a real terraform process (or, for plan-time faults, by
// resource.Test), asserts how the run ends (its status, or the diagnostic)
// and its message, checks with acctest.Leaks that no run pod, run
// namespace, kubeplay Secret or ledger claim of the group is left, and logs
// "FAULT <row> ended in <s> s: <status>", the time from the fault to the
// end.
//
//	row                  test                                      ends as (status_reason)
//	bad_token            TestAccRun_badCredential                  plan warning, apply error Run Credential Rejected (401)
//	bad_ca               TestAccRun_badCredential                  the credential's apply fails: TLS Verification Failed
//	unreachable_host     TestAccRunFault_unreachableHost           plan warning, apply error Run Cluster Unreachable
//	bad_image            TestAccRunFault_badImage                  error (image_pull), ErrImagePull / ImagePullBackOff
//	unschedulable        TestAccRunFault_unschedulable             error (unschedulable)
//	pod_deleted          TestAccRunFault_podDeleted                error (pod_deleted), "was deleted"
//	oom_killed           TestAccRunFault_oomKilled                 failed (oom_killed): the playbook's task is killed ("rc": -9)
//	apiserver_restart    TestAccRunFault_apiServerRestart          successful, the whole output once: the provider re-attaches
//	exec_stream_cut      TestAccRunFault_execStreamCut             successful, the whole output once: the provider re-attaches
//	cut_every_5s         TestAccRunFault_cutEvery5s                successful, the whole output once, every connection cut every 5 s
//	cut_every_5s_bursts  TestAccRunFault_cutEvery5sBursts          successful, the whole 2 MB output once, in 70 kB bursts
//	idle_proxy           TestAccRunFault_idleProxy                 successful: a 90 s silence behind a proxy with a 20 s idle timeout
//	kubelet_restart      TestAccRunFault_kubeletRestart            successful, the whole output once: the container lives on
//	ctrl_c               TestAccRun_interrupt                      canceled
//	provider_sigkill     TestAccRunFault_providerKilled            plugin error; the pod ends itself after the disconnect grace
//	terraform_sigkill    TestAccRunFault_terraformKilled           the provider cancels the run and cleans up
//	both_killed          TestAccRun_killedProviderFreesCapacity    the pod ends itself after the disconnect grace, claims expire
//	full_group_waits     TestAccRunFault_fullGroup                 successful once the slot frees (the wait is queued time)
//	full_group_timeout   TestAccRunFault_fullGroup                 Container Group Capacity Unavailable
//	quota_lowered        TestAccRunFault_quotaLowered              error (quota_exceeded), exceeded quota past the pending timeout
//	kubelet_stopped      TestAccRunFault_kubeletStopped            error (node_lost) naming the node, after the disconnect grace (30 s); pod deleted once the node is back
//
// The rows that end successful compare the run's whole output, byte for
// byte, with what its command prints uncut (countedOutput), and the count
// its command prints at the end says every iteration ran once.
//
// Each row that records a run checks its status_reason and that its
// timeline adds up to its wall time (signalEnv.expectRecord).
//
// The rows that restart the API server or stop the kubelet disturb every
// test on the cluster; they run only on the local test cluster.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/config"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	corev1 "k8s.io/api/core/v1"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/capacity"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/waitfor"
)

// faultClock times one row from its fault to its end.
type faultClock struct {
	t     testing.TB
	row   string
	fault time.Time
}

func startFault(t testing.TB, row string) *faultClock {
	return &faultClock{t: t, row: row, fault: time.Now()}
}

// end logs the row's line for the matrix table and returns the time taken.
func (c *faultClock) end(status string) time.Duration {
	took := time.Since(c.fault)
	c.t.Logf("FAULT %s ended in %.1f s: %s", c.row, took.Seconds(), status)
	return took
}

// groupLeaks is the leak scope of a group in ns: its pods, Secrets, run
// namespaces and both ledgers.
func groupLeaks(ns, group string) acctest.LeakScope {
	scope := acctest.LeakScope{Namespaces: []string{ns}, Group: group}
	for _, kind := range []string{capacity.Runs, capacity.Forks} {
		scope.Ledgers = append(scope.Ledgers, capacity.Ledger{Group: group, Kind: kind}.ConfigMapName())
	}
	return scope
}

// faultEnv is one row's group, applied once by its own terraform
// directory, and the directories of its runs.
type faultEnv struct {
	e                       *testEnv
	ns, group               string
	kubeconfig              string
	terraformBin, cliConfig string
}

// faultGroup is a row's container group: its attributes beyond name,
// namespace and image, and other resources to apply with it.
type faultGroup struct {
	image, attrs, extra string
}

// faultLimits give the group both ledgers, so that a leaked claim shows.
const faultLimits = "max_concurrent_runs = 2\n  max_forks = 10\n"

// faultNoCPU makes the run pod request no CPU, for a test whose short
// timeout must go to the run or the group's slot, not to waiting for room on
// a node the suite fills: the scheduler checks CPU only for a pod that
// requests some, so the pod fits a node whose CPU is all requested (a 10m
// request did not).
const faultNoCPU = "pod_spec_override = <<-EOT\n    spec:\n      containers:\n      - name: worker\n" +
	"        resources:\n          requests:\n            cpu: \"0\"\n  EOT\n"

// faultPending is the pod_pending_timeout of the tests whose second run
// must wait it out: it is the group's, so the blocker's pod must start
// within it too. A pod that requests no CPU has the smallest CPU weight (2),
// and under make test-all's load one took 31 s to start, past the 20 s it
// had: the group's pending timeout ended it before its command ran.
const faultPending = 90 * time.Second

// zeroRequest reports a container that requests none of name, explicitly.
func zeroRequest(c corev1.Container, name corev1.ResourceName) bool {
	q, ok := c.Resources.Requests[name]
	return ok && q.IsZero()
}

func newFaultEnv(t *testing.T, g faultGroup) *faultEnv {
	e := newTestEnv(t)
	return newFaultEnvWith(t, e, e.kubeconfig, g)
}

// newDisruptiveFaultEnv is newFaultEnv for a row that disturbs the whole
// cluster; why says how.
func newDisruptiveFaultEnv(t *testing.T, why string, g faultGroup) *faultEnv {
	e := newDisruptiveTestEnv(t, why)
	return newFaultEnvWith(t, e, e.kubeconfig, g)
}

// newFaultEnvWith applies the group through the provider configured with
// kubeconfig.
func newFaultEnvWith(t *testing.T, e *testEnv, kubeconfig string, g faultGroup) *faultEnv {
	f := &faultEnv{e: e, ns: e.namespace("kp-fault"), group: randName("fault"), kubeconfig: kubeconfig}
	var err error
	if f.terraformBin, f.cliConfig, err = providerCLI(t); err != nil {
		t.Fatal(err)
	}
	if g.image == "" {
		g.image = acctest.TestImage()
	}
	dir := f.dir(t, fmt.Sprintf(`resource "kubeplay_container_group" "g" {
  name      = %q
  namespace = %q
  image     = %q
  %s
}
%s`, f.group, f.ns, g.image, g.attrs, g.extra))
	if err := f.terraform(dir, "apply", "-auto-approve", "-input=false", "-no-color"); err != nil {
		t.Fatal(err)
	}
	return f
}

// dir writes a working directory with the provider block and body; it is
// destroyed when the test ends (runs before the group: cleanups run last
// first).
func (f *faultEnv) dir(t *testing.T, body string) string {
	dir := t.TempDir()
	cfg := cliHeader(f.kubeconfig, f.e.catalog) + body
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.terraform(dir, "destroy", "-auto-approve", "-no-color") })
	return dir
}

func (f *faultEnv) terraform(dir string, args ...string) error {
	return terraformCLI(f.terraformBin, f.cliConfig, dir, args...)
}

// faultStarted is what a run's command writes to its pod's log once it runs.
const faultStarted = "kubeplay-fault-run-started"

// startedThen is a command that tells the pod's log it started, then runs then.
func startedThen(then string) string {
	return "echo " + faultStarted + " >/proc/1/fd/1; " + then
}

// runDir is a directory with one run of the group with the given attributes.
func (f *faultEnv) runDir(t *testing.T, attrs string) *signalEnv {
	dir := f.dir(t, fmt.Sprintf(`resource "kubeplay_run" "r" {
  container_group = %q
  %s
}
`, f.group, attrs))
	return &signalEnv{e: f.e, ns: f.ns, dir: dir, terraformBin: f.terraformBin, cliConfig: f.cliConfig,
		providerLog: filepath.Join(t.TempDir(), "provider.log")}
}

// reattachments is how many times the provider followed the run again
// after a stream broke, by its log.
func (s *signalEnv) reattachments(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(s.providerLog)
	if err != nil {
		t.Fatalf("the provider's log: %v", err)
	}
	return bytes.Count(b, []byte("the run's stream broke; following it again"))
}

// expectReattached fails unless the provider followed the run again at
// least once: the fault reached the run's stream.
func (s *signalEnv) expectReattached(t *testing.T) {
	t.Helper()
	n := s.reattachments(t)
	t.Logf("the provider followed the run again %d times", n)
	if n == 0 {
		t.Error("the provider never followed the run again: the fault did not break its stream")
	}
}

func commandRun(command, timeout string) string {
	return fmt.Sprintf("command = [\"sh\", \"-c\", %q]\n  timeouts {\n    create = %q\n  }", command, timeout)
}

// startBlocker applies, in a terraform process of its own, a run that holds
// one of the group's slots (a command that sleeps 600 s) and waits until
// its command runs; it returns that terraform, to interrupt when the test
// is done with the slot.
func (f *faultEnv) startBlocker(t *testing.T) *exec.Cmd {
	blocker := f.runDir(t, commandRun(startedThen("sleep 600"), "10m"))
	bcmd, bout := blocker.start(t)
	f.waitStarted(t, blocker, bout)
	return bcmd
}

// waitStarted waits for the run's pod to run and its command to start, and
// returns the pod's name.
func (f *faultEnv) waitStarted(t *testing.T, s *signalEnv, out *syncBuffer) string {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("terraform's output:\n%s", out)
		}
	})
	pod := s.waitPod(t, "running", 5*time.Minute, running)
	waitLogLine(t, f.e, f.ns, pod, faultStarted)
	return pod
}

var errorSummary = regexp.MustCompile(`(?m)^Error: (.+)$`)

// applyOutcome is how an apply ended: the run's status from its
// diagnostic's summary ("Run Error" is error), successful for an apply
// that succeeded, or "diagnostic <summary>" for an error that is not a
// run's status.
func applyOutcome(out string, err error) string {
	if err == nil {
		return "successful"
	}
	ms := errorSummary.FindAllStringSubmatch(out, -1)
	if ms == nil {
		return "terraform failed: " + err.Error()
	}
	for _, m := range ms {
		switch s := strings.TrimSpace(m[1]); s {
		case "Run Error", "Run Failed", "Run Canceled":
			return strings.ToLower(strings.TrimPrefix(s, "Run "))
		}
	}
	return "diagnostic " + strings.TrimSpace(ms[0][1])
}

// expect fails unless the apply ended as want and its output matches msg.
func expectOutcome(t *testing.T, out *syncBuffer, err error, want, msg string) string {
	t.Helper()
	got := applyOutcome(out.String(), err)
	if got != want {
		t.Errorf("the run ended as %q, want %q:\n%s", got, want, out)
	}
	// Terraform wraps a diagnostic's lines: a space matches any whitespace.
	if !regexp.MustCompile(strings.ReplaceAll(msg, " ", `\s+`)).MatchString(out.String()) {
		t.Errorf("terraform's output does not match %q:\n%s", msg, out)
	}
	return got
}

func (f *faultEnv) checkNoLeaks(t *testing.T) {
	t.Helper()
	acctest.CheckNoLeaks(t, f.e.kube, groupLeaks(f.ns, f.group))
}

// runFault applies a run, calls inject once its command runs, and returns
// how the apply ended and the time from inject to its end.
func (f *faultEnv) runFault(t *testing.T, row, attrs string, inject func(pod string)) (*signalEnv, *syncBuffer, *faultClock, error) {
	s := f.runDir(t, attrs)
	cmd, out := s.start(t)
	pod := f.waitStarted(t, s, out)
	clock := startFault(t, row)
	inject(pod)
	err := cmd.Wait()
	return s, out, clock, err
}

// TestAccRunFault_unreachableHost: the credential's host (a proxy of the
// test's, in front of the API server) stops answering between the group's
// apply and the run: the plan warns, the apply fails naming the credential
// and the host, and nothing is left once the host answers again.
func TestAccRunFault_unreachableHost(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-fault")
	token := e.token(ns, "awx", "edit")
	_, ca := e.clusterHostAndCA()
	proxy := startCutProxy(t, e.kubeconfig)
	addr := proxy.ln.Addr().String()
	cred, group := randName("awx"), randName("grp")
	base := e.providerBlock() + tokenVar + e.credentialGroup(cred, group, ns, "https://"+addr, ca)
	vars := config.Variables{"token": config.StringVariable(token)}
	var clock *faultClock
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		TerraformVersionChecks:   writeOnlyVersions,
		Steps: []resource.TestStep{
			{Config: base, ConfigVariables: vars},
			{
				PreConfig: func() {
					proxy.stop()
					clock = startFault(t, "unreachable_host")
				},
				Config: base + runTrue, ConfigVariables: vars,
				ExpectError: expectError(`(?s)Run Cluster Unreachable.*` + cred + `.*` + regexp.QuoteMeta(addr)),
			},
			{
				PreConfig: func() {
					clock.end("apply error Run Cluster Unreachable")
					proxy.restart(t)
				},
				// The failed run, tainted in the state, goes.
				Config: base, ConfigVariables: vars,
				Check: func(*terraform.State) error {
					return acctest.Leaks(context.Background(), e.kube, groupLeaks(ns, group))
				},
			},
		},
	})
}

const runTrue = `
resource "kubeplay_run" "test" {
  container_group = kubeplay_container_group.g.name
  command         = ["true"]
}
`

// TestAccRunFault_badImage: an image that is nowhere ends the run as error
// naming the pull failure, long before the pending timeout.
func TestAccRunFault_badImage(t *testing.T) {
	f := newFaultEnv(t, faultGroup{image: "kubeplay.test/does-not-exist:v1", attrs: faultLimits})
	s := f.runDir(t, commandRun("true", "10m"))
	clock := startFault(t, "bad_image")
	cmd, out := s.start(t)
	err := cmd.Wait()
	status := expectOutcome(t, out, err, "error", `(?s)Run Error.*(ErrImagePull|ImagePullBackOff).*status_reason image_pull`)
	clock.end(status)
	s.expectRecord(t, "error", "image_pull")
	f.checkNoLeaks(t)
}

// TestAccRunFault_unschedulable: a pod no node can take ends the run as
// error naming Unschedulable.
func TestAccRunFault_unschedulable(t *testing.T) {
	f := newFaultEnv(t, faultGroup{attrs: faultLimits +
		`  pod_spec_override = yamlencode({ spec = { nodeSelector = { "kubeplay.test/no-such-node" = "true" } } })`})
	s := f.runDir(t, commandRun("true", "10m"))
	clock := startFault(t, "unschedulable")
	cmd, out := s.start(t)
	err := cmd.Wait()
	clock.end(expectOutcome(t, out, err, "error", `(?s)Run Error.*status_reason unschedulable`))
	s.expectRecord(t, "error", "unschedulable")
	f.checkNoLeaks(t)
}

// TestAccRunFault_podDeleted: the run's pod deleted while its command runs
// ends the run as error saying so.
func TestAccRunFault_podDeleted(t *testing.T) {
	f := newFaultEnv(t, faultGroup{attrs: faultLimits})
	s, out, clock, err := f.runFault(t, "pod_deleted", commandRun(startedThen("sleep 300"), "10m"), func(pod string) {
		if err := f.e.kube.CoreV1().Pods(f.ns).Delete(context.Background(), pod, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
	})
	clock.end(expectOutcome(t, out, err, "error", `(?s)Run Error.*was deleted.*status_reason pod_deleted`))
	s.expectRecord(t, "error", "pod_deleted")
	f.checkNoLeaks(t)
}

// TestAccRunFault_oomKilled: a node label gives the pod 160 MiB and a task
// of the playbook allocates 1 GiB: the kernel kills the task (the biggest
// process in the container), the playbook fails, and the run ends as
// failed with the task's exit.
func TestAccRunFault_oomKilled(t *testing.T) {
	label := randName("small")
	f := newFaultEnv(t, faultGroup{attrs: faultLimits, extra: fmt.Sprintf(`
resource "kubeplay_node_label" "small" {
  name   = %q
  memory = 160
}
`, label)})
	playbook := `- hosts: all
  gather_facts: false
  tasks:
    - shell: "echo ` + faultStarted + ` >/proc/1/fd/1"
    - command: python3 -c "x = ' ' * (1 << 30); print(len(x))"
`
	s, out, clock, err := f.runFault(t, "oom_killed", fmt.Sprintf("node_label = %q\n  playbook = %q", label, playbook), func(string) {})
	clock.end(expectOutcome(t, out, err, "failed", `(?s)Run Failed.*exited with code 2.*"rc": -9`))
	s.expectRecord(t, "failed", "oom_killed")
	f.checkNoLeaks(t)
}

// newCutFaultEnv is newFaultEnv with every connection of the provider
// through a cutProxy, which the row cuts.
func newCutFaultEnv(t *testing.T) (*faultEnv, *cutProxy) {
	e := newTestEnv(t)
	proxy := startCutProxy(t, e.kubeconfig)
	return newFaultEnvWith(t, e, proxy.kubeconfig, faultGroup{attrs: faultLimits}), proxy
}

// expectSurvived fails unless the run of a row whose fault broke its
// stream was recorded successful with want, its whole output, once, after
// the provider followed it again at least once, and left nothing behind.
func (f *faultEnv) expectSurvived(t *testing.T, s *signalEnv, want string) {
	t.Helper()
	s.expectRecord(t, "successful", nil)
	s.expectOutput(t, want)
	s.expectReattached(t)
	f.checkNoLeaks(t)
}

// TestAccRunFault_execStreamCut: every connection of the provider goes
// through a TCP proxy that the test cuts once while the run prints. The
// playbook runs detached in its pod: the provider re-attaches from the
// last byte it received, and the run succeeds with its whole output once.
func TestAccRunFault_execStreamCut(t *testing.T) {
	f, proxy := newCutFaultEnv(t)
	const lines = 200
	s, out, clock, err := f.runFault(t, "exec_stream_cut", commandRun(countedCommand(lines, 0), "10m"),
		func(string) {
			time.Sleep(2 * time.Second) // mid-output
			if n := proxy.cut(); n == 0 {
				t.Error("the proxy had no connection to cut")
			}
		})
	clock.end(expectOutcome(t, out, err, "successful", `Apply complete`))
	f.expectSurvived(t, s, countedOutput(lines))
}

// TestAccRunFault_cutEvery5s: the proxy between the provider and the API
// server cuts every connection every 5 s during a run that prints a line
// every 100 ms for a minute. The provider re-attaches after each cut, and
// the run succeeds with its whole output, every line once and in order.
func TestAccRunFault_cutEvery5s(t *testing.T) {
	f, proxy := newCutFaultEnv(t)
	const lines = 600 // a minute
	var stop func() (cuts, conns int)
	s, out, clock, err := f.runFault(t, "cut_every_5s", commandRun(countedCommand(lines, 0), "10m"),
		func(string) { stop = proxy.cutEvery(5 * time.Second) })
	cuts, conns := stop()
	clock.end(expectOutcome(t, out, err, "successful", `Apply complete`))
	t.Logf("the proxy cut %d times, %d connections in all", cuts, conns)
	if cuts < 10 || conns < cuts {
		t.Errorf("the proxy cut %d times (%d connections) during a one-minute run: want one cut every 5 s, each of at least one connection", cuts, conns)
	}
	f.expectSurvived(t, s, countedOutput(lines))
}

// TestAccRunFault_cutEvery5sBursts: cut_every_5s with output in bursts:
// 10000 numbers (about 70 kB, more than a pipe holds) every second for
// 30 s, 2 MB in all across segment boundaries, kept whole by output_limit.
// The run succeeds with its whole output once: neither a cut nor a segment
// growing while the pod copies it sends a byte twice or skips one.
func TestAccRunFault_cutEvery5sBursts(t *testing.T) {
	f, proxy := newCutFaultEnv(t)
	const per, bursts = 10000, 30
	command := startedThen(fmt.Sprintf(`i=0; while [ $i -lt %d ]; do seq $((i*%d)) $((i*%d+%d)); i=$((i+1)); sleep 1; done`,
		bursts, per, per, per-1))
	var stop func() (cuts, conns int)
	s, out, clock, err := f.runFault(t, "cut_every_5s_bursts", commandRun(command, "10m")+"\n  output_limit = 16777216",
		func(string) { stop = proxy.cutEvery(5 * time.Second) })
	cuts, conns := stop()
	clock.end(expectOutcome(t, out, err, "successful", `Apply complete`))
	t.Logf("the proxy cut %d times, %d connections in all", cuts, conns)
	var want strings.Builder
	for i := range per * bursts {
		fmt.Fprintf(&want, "%d\n", i)
	}
	f.expectSurvived(t, s, want.String())
}

// TestAccRunFault_idleProxy: the proxy closes any connection that carried
// no byte either way for 20 s (a load balancer's idle timeout, shortened),
// and the run's command is silent for 90 s before it prints. The provider's
// beats keep its stream from idling, and it re-attaches after any stream
// the proxy closes: the run succeeds with its whole output.
func TestAccRunFault_idleProxy(t *testing.T) {
	e := newTestEnv(t)
	proxy := startIdleProxy(t, e.kubeconfig, 20*time.Second)
	// The proxy's own check: a connection the test opens and leaves
	// silent is closed after the idle timeout.
	silent, err := net.Dial("tcp", proxy.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	opened := time.Now()
	f := newFaultEnvWith(t, e, proxy.kubeconfig, faultGroup{attrs: faultLimits})
	const silence = 90
	s, out, clock, err := f.runFault(t, "idle_proxy", commandRun(countedCommand(3, silence), "10m"), func(string) {})
	clock.end(expectOutcome(t, out, err, "successful", `Apply complete`))
	_ = silent.SetReadDeadline(time.Now().Add(time.Second))
	if _, rerr := silent.Read(make([]byte, 1)); rerr == nil || errors.Is(rerr, os.ErrDeadlineExceeded) || proxy.idleClosed.Load() == 0 {
		t.Errorf("the proxy did not close a connection silent for %s (%v): its idle timeout does not work", time.Since(opened).Round(time.Second), rerr)
	}
	// The provider's beats (every 5 s) keep its exec stream from idling;
	// a stream the proxy closes is followed again.
	t.Logf("the proxy closed %d idle connections, the test's silent one among them", proxy.idleClosed.Load())
	s.expectRecord(t, "successful", nil)
	s.expectOutput(t, countedOutput(3))
	t.Logf("the provider followed the run again %d times", s.reattachments(t))
	f.checkNoLeaks(t)
}

// countedCommand is a run's command that says it started (faultStarted, to
// the pod's log), is silent for silence seconds, then prints n lines, one
// every 100 ms, each appending a line to a file in the pod, then
// "finished" and the file's line count: every iteration that ran, once
// or more, counts.
func countedCommand(n, silence int) string {
	sleep := ""
	if silence > 0 {
		sleep = fmt.Sprintf("sleep %d; ", silence)
	}
	return startedThen(sleep + fmt.Sprintf(`i=0; while [ $i -lt %d ]; do echo "line $i"; echo $i >>/tmp/kubeplay-ran; i=$((i+1)); sleep 0.1; done; echo finished; wc -l </tmp/kubeplay-ran`, n))
}

// countedOutput is what countedCommand prints when nothing cuts it.
func countedOutput(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	fmt.Fprintf(&b, "finished\n%d\n", n)
	return b.String()
}

// expectOutput fails unless the run in the state has exit code 0 and an
// output that is want, byte for byte; it says where they part.
func (s *signalEnv) expectOutput(t *testing.T, want string) {
	t.Helper()
	attrs := s.runState(t)
	if attrs == nil {
		t.Error("the run is not in the state")
		return
	}
	if code := fmt.Sprint(attrs["exit_code"]); code != "0" {
		t.Errorf("the run's exit code is %s, want 0", code)
	}
	got, _ := attrs["output"].(string)
	if got == want {
		t.Logf("the run's output is the uncut output, byte for byte (%d bytes)", len(got))
		return
	}
	t.Errorf("the run's output (%d bytes) is not the uncut output (%d bytes): %s", len(got), len(want), outputDiff(got, want))
}

// outputDiff says where got first differs from want, by line, and which
// lines got has twice or lacks.
func outputDiff(got, want string) string {
	g, w := strings.SplitAfter(got, "\n"), strings.SplitAfter(want, "\n")
	var b strings.Builder
	for i := 0; i < max(len(g), len(w)); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			fmt.Fprintf(&b, "line %d is %q, want %q", i+1, gl, wl)
			break
		}
	}
	seen := map[string]int{}
	for _, l := range g {
		seen[l]++
	}
	var twice, missing []string
	for _, l := range w {
		switch n := seen[l]; {
		case n == 0:
			missing = append(missing, strings.TrimSpace(l))
		case n > 1:
			twice = append(twice, strings.TrimSpace(l))
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(&b, "; %d lines missing (first %q)", len(missing), missing[0])
	}
	if len(twice) > 0 {
		fmt.Fprintf(&b, "; %d lines more than once (first %q)", len(twice), twice[0])
	}
	return b.String()
}

// cutProxy forwards 127.0.0.1 connections to the API server and cuts them
// all on demand; later connections pass again. With an idle timeout, it
// also closes a connection that carried no byte either way for that long,
// as a load balancer does.
type cutProxy struct {
	ln         net.Listener
	target     string
	kubeconfig string
	idle       time.Duration
	idleClosed atomic.Int64 // connections closed for idleness
	mu         sync.Mutex
	conns      map[net.Conn]struct{}
}

// startCutProxy starts a proxy in front of the cluster of kubeconfig and
// writes a copy of kubeconfig that goes through it.
func startCutProxy(t *testing.T, kubeconfig string) *cutProxy {
	return startProxy(t, kubeconfig, 0)
}

// startIdleProxy starts a proxy that closes a connection idle for idle.
func startIdleProxy(t *testing.T, kubeconfig string, idle time.Duration) *cutProxy {
	return startProxy(t, kubeconfig, idle)
}

func startProxy(t *testing.T, kubeconfig string, idle time.Duration) *cutProxy {
	raw, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cl := raw.Clusters[raw.Contexts[raw.CurrentContext].Cluster]
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: strings.TrimPrefix(cl.Server, "https://"), idle: idle, conns: map[net.Conn]struct{}{}}
	cl.Server = "https://" + ln.Addr().String()
	p.kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*raw, p.kubeconfig); err != nil {
		t.Fatal(err)
	}
	go p.serve()
	t.Cleanup(func() { _ = ln.Close(); p.cut() })
	return p
}

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

func (p *cutProxy) forward(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	var last atomic.Int64 // when a byte last passed, either way
	last.Store(time.Now().UnixNano())
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				last.Store(time.Now().UnixNano())
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	var idle <-chan time.Time
	if p.idle > 0 {
		tick := time.NewTicker(p.idle / 20)
		defer tick.Stop()
		idle = tick.C
	}
wait:
	for {
		select {
		case <-done:
			break wait
		case <-idle:
			if time.Since(time.Unix(0, last.Load())) >= p.idle {
				p.idleClosed.Add(1)
				break wait
			}
		}
	}
	_, _ = c.Close(), up.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// cutEvery cuts every open connection every period until the function it
// returns is called, which says how many cuts there were and how many
// client connections they cut.
func (p *cutProxy) cutEvery(period time.Duration) (stop func() (cuts, conns int)) {
	quit, done := make(chan struct{}), make(chan struct{})
	var cuts, conns int
	go func() {
		defer close(done)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
				cuts++
				conns += p.cut()
			}
		}
	}()
	return func() (int, int) {
		close(quit)
		<-done
		return cuts, conns
	}
}

// stop closes the listener and every connection: the address refuses
// connections until restart.
func (p *cutProxy) stop() {
	_ = p.ln.Close()
	p.cut()
}

// restart listens again on the address stop closed.
func (p *cutProxy) restart(t *testing.T) {
	ln, err := net.Listen("tcp", p.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	p.ln = ln
	go p.serve()
	t.Cleanup(func() { _ = ln.Close() })
}

// cut closes every open connection and returns how many client
// connections it cut.
func (p *cutProxy) cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
	n := len(p.conns) / 2
	clear(p.conns)
	return n
}

// TestAccRunFault_fullGroup: with max_concurrent_runs = 1 taken by another
// terraform process, a run waits and runs once the slot frees.
// TestAccRunFault_fullGroupTimeout is its other half. They are two tests,
// not two parallel subtests: Go starts a parallel test's parallel subtests
// after every parallel test of the package that waits for its turn, and the
// second half's 90 s wait was the idle end of make test-all's first phase.
func TestAccRunFault_fullGroup(t *testing.T) {
	f := newFaultEnv(t, faultGroup{attrs: "max_concurrent_runs = 1\n  pod_pending_timeout = \"10m\""})
	// The blocker holds the slot until the second run waits for it, then is
	// interrupted: a fixed sleep can end before a loaded machine's second apply.
	bcmd := f.startBlocker(t)
	blockerDone := make(chan time.Time, 1)
	go func() { _ = bcmd.Wait(); blockerDone <- time.Now() }()
	s := f.runDir(t, commandRun("echo second run", "10m"))
	clock := startFault(t, "full_group_waits")
	cmd, out := s.start(t)
	f.waitClaims(t, capacity.Runs, 1)
	waitOutput(t, out, "kubeplay_run.r: Creating...")
	_ = syscall.Kill(-bcmd.Process.Pid, syscall.SIGINT)
	err := cmd.Wait()
	status := expectOutcome(t, out, err, "successful", `Apply complete`)
	clock.end(status)
	s.expectRecord(t, "successful", nil)
	// The wait for the slot is the run's queue.
	if secs, err := timelineOf(s.runState(t), []string{"queued", "create", "schedule", "sandbox", "image", "deliver", "playbook", "cleanup"}); err != nil || secs["queued"] < 1 {
		t.Errorf("the run waited for the group's slot, but its timeline says queued %v s (%v)", secs["queued"], err)
	}
	select {
	case <-blockerDone:
	default:
		t.Error("the second run finished while the first still held the group's only slot")
	}
	f.checkNoLeaks(t)
}

// TestAccRunFault_fullGroupTimeout: with the group's one slot held past its
// pod_pending_timeout, a run ends cleanly with a capacity error and nothing
// of it is left.
func TestAccRunFault_fullGroupTimeout(t *testing.T) {
	// No CPU request: the blocker's pod must start within faultPending on a node the suite fills.
	f := newFaultEnv(t, faultGroup{attrs: fmt.Sprintf("max_concurrent_runs = 1\n  pod_pending_timeout = %q\n", faultPending) + faultNoCPU})
	bcmd := f.startBlocker(t)
	s := f.runDir(t, commandRun("true", "10m"))
	clock := startFault(t, "full_group_timeout")
	cmd, out := s.start(t)
	err := cmd.Wait()
	clock.end(expectOutcome(t, out, err, "diagnostic Container Group Capacity Unavailable",
		`(?s)Container Group Capacity Unavailable.*had no room for 1 more runs within its\s+pod_pending_timeout of `+faultPending.String()))
	// The waiting run left nothing; the blocker's own claim is there.
	if err := acctest.Leaks(context.Background(), f.e.kube, groupLeaks(f.ns, f.group)); err == nil {
		t.Error("the blocker's pod and claim are not seen: the leak check sees nothing")
	}
	_ = syscall.Kill(-bcmd.Process.Pid, syscall.SIGINT)
	_ = bcmd.Wait()
	f.checkNoLeaks(t)
}

// TestAccRunFault_quotaLowered: a run waits for the group's only slot; while
// it waits, the group's ResourceQuota is lowered to no pods. When the slot
// frees, the run's pod is refused by the quota and the run waits for it up
// to its pod_pending_timeout, then ends as error naming the quota.
func TestAccRunFault_quotaLowered(t *testing.T) {
	// No CPU request: the blocker's pod must start within faultPending on a node
	// the suite fills (CI saw it wait out its pending timeout for Insufficient cpu).
	f := newFaultEnv(t, faultGroup{attrs: fmt.Sprintf("max_concurrent_runs = 1\n  pod_pending_timeout = %q\n", faultPending) + faultNoCPU})
	// The blocker holds the slot until the quota is lowered, then is interrupted: a fixed
	// sleep let the slot free before the quota changed on a loaded machine.
	bcmd := f.startBlocker(t)
	s := f.runDir(t, commandRun("true", "10m"))
	cmd, out := s.start(t)
	// Past its plan, the run waits: the blocker holds the only slot.
	f.waitClaims(t, capacity.Runs, 1)
	waitOutput(t, out, "kubeplay_run.r: Creating...")
	clock := startFault(t, "quota_lowered")
	quotas := f.e.kube.CoreV1().ResourceQuotas(f.ns)
	q, err := quotas.Get(context.Background(), capacity.QuotaName(f.group), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q.Spec.Hard[corev1.ResourcePods] = k8sresource.MustParse("0")
	if _, err := quotas.Update(context.Background(), q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Admission checks the quota's status, which the quota controller
	// updates after the spec: free the slot only once it says 0.
	acctest.WaitQuota(t, f.e.kube, f.ns, q.Name, func(q *corev1.ResourceQuota) bool {
		return q.Status.Hard.Pods().Value() == 0
	})
	_ = syscall.Kill(-bcmd.Process.Pid, syscall.SIGINT)
	_ = bcmd.Wait()
	err = cmd.Wait()
	clock.end(expectOutcome(t, out, err, "error", `(?s)Run Error.*pending timeout of `+faultPending.String()+`: .*exceeded quota`))
	s.expectRecord(t, "error", "quota_exceeded")
	f.checkNoLeaks(t)
}

// waitOutput waits until terraform has printed line. Terraform's output is
// a pipe, not a watchable object: poll it.
func waitOutput(t *testing.T, out *syncBuffer, line string) {
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(out.String(), line) {
		if time.Now().After(deadline) {
			t.Fatalf("terraform did not print %q:\n%s", line, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second) // and is in the ledger's wait
}

// waitClaims watches the group's ledger of kind until it holds n claims.
func (f *faultEnv) waitClaims(t *testing.T, kind string, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	name := capacity.Ledger{Group: f.group, Kind: kind}.ConfigMapName()
	_, err := waitfor.Until(ctx, waitfor.Named(f.e.kube.CoreV1().ConfigMaps(f.ns), name), &corev1.ConfigMap{},
		func(ev watch.Event) (bool, error) {
			cm, ok := ev.Object.(*corev1.ConfigMap)
			return ok && ev.Type != watch.Deleted && len(cm.Data) == n, nil
		})
	if err != nil {
		t.Fatalf("waiting for %d claims in %s: %v", n, name, err)
	}
}

// waitGone watches until the group has no run pod and no claims.
func (f *faultEnv) waitGone(t *testing.T, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	sel := managed.Selector(managed.LabelContainerGroup, f.group, managed.LabelRun, "")
	pods := f.e.kube.CoreV1().Pods(f.ns)
	w, err := pods.Watch(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for {
		list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) == 0 {
			break
		}
		select {
		case <-w.ResultChan():
		case <-ctx.Done():
			t.Fatalf("the group's run pods are still there after %s", timeout)
		}
	}
	for _, kind := range []string{capacity.Runs, capacity.Forks} {
		f.waitClaims(t, kind, 0)
	}
}

// providerPID is the pid of the provider process terraform started.
func providerPID(t *testing.T, terraformPID int) int {
	pid := findProviderPID(terraformPID)
	if pid == 0 {
		t.Fatalf("no provider process under terraform (pid %d)", terraformPID)
	}
	return pid
}

// findProviderPID is the pid of the provider process terraformPID
// started, 0 when there is none.
func findProviderPID(terraformPID int) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		i := bytes.LastIndexByte(stat, ')')
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(terraformPID) && strings.Contains(string(stat[:i]), "terraform-provi") {
			return pid
		}
	}
	return 0
}

// TestAccRunFault_providerKilled: SIGKILL of the provider alone mid-run.
// Terraform reports the plugin's crash; with no kubeplay process left to
// beat, the pod's watchdog ends the run and the worker once the group's
// disconnect grace (30 s) has passed without a beat, and the next run in
// the group removes the ended pod and the claims that expired unrenewed.
func TestAccRunFault_providerKilled(t *testing.T) {
	f := newFaultEnv(t, faultGroup{attrs: "max_concurrent_runs = 1\n  max_forks = 10\n  pod_pending_timeout = \"10m\""})
	s := f.runDir(t, commandRun(startedThen("sleep 300"), "30m"))
	cmd, out := s.start(t)
	pod := f.waitStarted(t, s, out)
	provider := providerPID(t, cmd.Process.Pid)
	clock := startFault(t, "provider_sigkill")
	if err := syscall.Kill(provider, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	// Terraform names a provider that died mid-request in one of two ways,
	// whichever it sees first: the call fails as Unavailable ("Plugin did
	// not respond") when the connection breaks, or as Canceled ("Request
	// cancelled") when go-plugin saw the process exit and closed it.
	status := applyOutcome(out.String(), err)
	if status != "diagnostic Plugin did not respond" && status != "diagnostic Request cancelled" {
		t.Errorf("the run ended as %q, want Terraform's diagnostic of a provider that died:\n%s", status, out)
	}
	s.waitPod(t, "ended", 3*time.Minute, func(p *corev1.Pod) bool {
		return p.Name == pod && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed)
	})
	clock.end(status + "; the pod ended itself")
	next := f.runDir(t, commandRun("true", "10m"))
	if err := f.terraform(next.dir, "apply", "-auto-approve", "-input=false", "-no-color"); err != nil {
		t.Fatalf("the next run in the group: %v", err)
	}
	f.checkNoLeaks(t)
}

// TestAccRunFault_terraformKilled: SIGKILL of terraform alone mid-run. The
// provider's gRPC connection closes, which cancels the run: the provider
// deletes the pod and releases the claims by itself, then sees its parent
// is gone and exits.
func TestAccRunFault_terraformKilled(t *testing.T) {
	f := newFaultEnv(t, faultGroup{attrs: faultLimits})
	s := f.runDir(t, commandRun(startedThen("sleep 300"), "30m"))
	cmd, out := s.start(t)
	f.waitStarted(t, s, out)
	provider := providerPID(t, cmd.Process.Pid)
	t.Cleanup(func() {
		if processLives(provider) {
			_ = syscall.Kill(provider, syscall.SIGKILL)
		}
	})
	clock := startFault(t, "terraform_sigkill")
	killed := time.Now()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	f.waitGone(t, 2*time.Minute)
	clock.end("canceled by the orphaned provider: pod deleted, claims released")
	f.checkNoLeaks(t)
	deadline := time.Now().Add(30 * time.Second)
	for processLives(provider) {
		if time.Now().After(deadline) {
			t.Fatalf("the provider (pid %d) still runs 30 s after its run was cleaned up, with terraform gone", provider)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("the provider exited %s after terraform was killed", time.Since(killed).Round(time.Millisecond))
}

// TestAccRunFault_terraformKilledIdle: SIGKILL of terraform while the
// provider has nothing to do (terraform runs a local-exec of another
// resource): the provider exits by itself.
func TestAccRunFault_terraformKilledIdle(t *testing.T) {
	s := newSignalEnv(t, "5m")
	cfg := cliHeader(s.e.kubeconfig, s.e.catalog) + fmt.Sprintf(`resource "kubeplay_container_group" "g" {
  name      = "idle"
  namespace = %q
  image     = %q
}

resource "terraform_data" "wait" {
  depends_on = [kubeplay_container_group.g]
  provisioner "local-exec" {
    command = "echo kubeplay-idle-wait; sleep 300"
  }
}

# Keeps the provider open, and idle, while local-exec sleeps.
resource "kubeplay_container_group" "after" {
  depends_on = [terraform_data.wait]
  name       = "idle-after"
  namespace  = %q
  image      = %q
}
`, s.ns, acctest.TestImage(), s.ns, acctest.TestImage())
	if err := os.WriteFile(filepath.Join(s.dir, "main.tf"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd, out := s.start(t)
	// The provider shares terraform's process group; so does local-exec's sleep.
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	waitOutput(t, out, "kubeplay-idle-wait")
	provider := providerPID(t, cmd.Process.Pid)
	killed := time.Now()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := killed.Add(15 * time.Second)
	for processLives(provider) {
		if time.Now().After(deadline) {
			t.Fatalf("the idle provider (pid %d) still runs 15 s after terraform was killed", provider)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the idle provider exited %s after terraform was killed", time.Since(killed).Round(time.Millisecond))
}

// processLives: pid exists and is not a zombie waiting to be reaped.
func processLives(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	fields := strings.Fields(string(stat[i+1:]))
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

// localClusterOnly skips rows that disturb the local test cluster's
// components when the tests use another cluster.
func localClusterOnly(t *testing.T) string {
	if os.Getenv(acctest.EnvKubeconfig) != "" && os.Getenv("KUBEPLAY_TEST_DISRUPTIVE") == "" {
		t.Skip("restarts components of the local test cluster: set KUBEPLAY_TEST_DISRUPTIVE=1 to run it on the shared one")
	}
	root, err := acctest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "tools", "testcluster")
}

func script(t *testing.T, path string, args ...string) {
	t.Helper()
	if out, err := exec.Command(path, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", filepath.Base(path), args, err, out)
	}
}

// TestAccRunFault_apiServerRestart: the API server is killed and started
// again while the run's command prints. The exec stream through it breaks;
// the playbook goes on in its pod, the provider follows it again once the
// server is back, and the run succeeds with its whole output once. On the
// local second cluster, so that make test-all runs it in phase 1 after the
// soak rather than alone in phase 2 (the first cluster's API server is every
// other test's).
func TestAccRunFault_apiServerRestart(t *testing.T) {
	e := newSecondDisruptiveEnv(t, "restarts the second cluster's control plane")
	f := newFaultEnvWith(t, e, e.kubeconfig, faultGroup{attrs: faultLimits})
	const lines = 200 // about 25 s: the server is back within 10 s of the kill, 2 s in
	s, out, clock, err := f.runFault(t, "apiserver_restart", commandRun(countedCommand(lines, 0), "10m"), func(string) {
		time.Sleep(2 * time.Second) // mid-output
		killed := time.Now()
		if err := acctest.RestartSecondAPIServer(); err != nil {
			t.Fatal(err)
		}
		t.Logf("the API server was ready again %.1f s after the kill began", time.Since(killed).Seconds())
	})
	clock.end(expectOutcome(t, out, err, "successful", `Apply complete`))
	f.expectSurvived(t, s, countedOutput(lines))
}

// TestAccRunFault_kubeletRestart: the node's kubelet is stopped and
// started again at once while the run's command prints. The containers
// run on under containerd; the exec streams, which the kubelet serves,
// break, and the provider re-attaches once the kubelet is back (well
// within the disconnect grace): the run succeeds with its whole output.
func TestAccRunFault_kubeletRestart(t *testing.T) {
	tools := localClusterOnly(t)
	kubelet := filepath.Join(tools, "kubelet.sh")
	f := newDisruptiveFaultEnv(t, "restarts the node's kubelet", faultGroup{attrs: faultLimits})
	t.Cleanup(func() { script(t, kubelet, "start") })
	const lines = 200 // about 25 s: the kubelet is back within 5 s of the stop, 2 s in
	var pod string
	s, out, clock, err := f.runFault(t, "kubelet_restart", commandRun(countedCommand(lines, 0), "10m"), func(p string) {
		pod = p
		time.Sleep(2 * time.Second) // mid-output
		stopped := time.Now()
		script(t, kubelet, "stop")
		script(t, kubelet, "start")
		t.Logf("the kubelet was stopped and Ready again in %.1f s", time.Since(stopped).Seconds())
	})
	clock.end(expectOutcome(t, out, err, "successful", `Apply complete`))
	f.expectSurvived(t, s, countedOutput(lines))
	t.Logf("pod %s: its container lived through the kubelet's restart", pod)
}

// kubeletDown is the longest the kubelet stays stopped.
const kubeletDown = time.Minute

// TestAccRunFault_kubeletStopped: the node's kubelet is stopped while the
// run's command runs and started again once the run has ended (at most a
// minute later), past the group's disconnect grace (15 s here, half the
// default: TestAccTwoClusters_nodeLost keeps the default's). The exec
// stream, which the kubelet serves, breaks; the provider tries to
// re-attach for the grace, then a probe exec that the API server cannot
// proxy to the kubelet tells it the node is lost, and the run ends as
// error naming the node, with its pod marked for deletion. The pod's own
// watchdog, which heard no beat for the grace, ends the command; the pod,
// which only the kubelet can confirm deleted, is gone once the node is
// back.
func TestAccRunFault_kubeletStopped(t *testing.T) {
	tools := localClusterOnly(t)
	kubelet := filepath.Join(tools, "kubelet.sh")
	const grace = 15 * time.Second
	f := newDisruptiveFaultEnv(t, "stops the node's kubelet until its run ends",
		faultGroup{attrs: faultLimits + fmt.Sprintf("disconnect_grace_period = %q\n", grace)})
	t.Cleanup(func() { script(t, kubelet, "start") })
	restarted := make(chan error, 1)
	ended := make(chan struct{})
	var pod string
	var stopped time.Time
	s, out, clock, err := f.runFault(t, "kubelet_stopped", commandRun(startedThen("sleep 120; echo finished"), "10m"), func(p string) {
		pod = p
		script(t, kubelet, "stop")
		stopped = time.Now()
		go func() {
			// Down until the run has ended, which the assertions below need,
			// and no longer: a fixed minute only made the suite wait.
			select {
			case <-ended:
			case <-time.After(kubeletDown):
			}
			cmd := exec.Command(kubelet, "start")
			b, err := cmd.CombinedOutput()
			if err != nil {
				err = fmt.Errorf("%w: %s", err, b)
			}
			restarted <- err
		}()
	})
	close(ended)
	took := clock.end(expectOutcome(t, out, err, "error",
		`(?s)Run Error.*node \S+ stopped answering during the run: the API server cannot reach its kubelet.*`+
			`marked for deletion and goes once node \S+ is back`))
	s.expectRecord(t, "error", "node_lost")
	// The provider beats every 5 s: the grace counts from the last beat
	// that got through, up to 5 s before the stop.
	if took < grace-bundle.BeatInterval-time.Second || took > kubeletDown {
		t.Errorf("the run ended %s after the kubelet stopped, want after the disconnect grace (%s, less the %s between beats) "+
			"and before the kubelet came back (%s)", took.Round(100*time.Millisecond), grace, bundle.BeatInterval, kubeletDown)
	}
	if err := <-restarted; err != nil {
		t.Fatalf("starting the kubelet again: %v", err)
	}
	t.Logf("the kubelet was started again %s after it stopped; the run ended %s after the stop", time.Since(stopped).Round(time.Second), took.Round(time.Second))
	// The kubelet, back, finishes the delete that the run asked for.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := waitfor.Gone(ctx, waitfor.Named(f.e.kube.CoreV1().Pods(f.ns), pod), &corev1.Pod{}); err != nil {
		t.Fatalf("pod %s is not gone two minutes after the kubelet came back: %v", pod, err)
	}
	f.checkNoLeaks(t)
}
