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
//	apiserver_restart    TestAccRunFault_apiServerRestart          error (stream_lost), the exec stream broke
//	exec_stream_cut      TestAccRunFault_execStreamCut             error (stream_lost), the exec stream broke
//	ctrl_c               TestAccRun_interrupt                      canceled
//	provider_sigkill     TestAccRunFault_providerKilled            plugin error; the pod ends itself
//	terraform_sigkill    TestAccRunFault_terraformKilled           the provider cancels the run and cleans up
//	both_killed          TestAccRun_killedProviderFreesCapacity    the pod ends itself, claims expire
//	full_group_waits     TestAccRunFault_fullGroup                 successful once the slot frees (the wait is queued time)
//	full_group_timeout   TestAccRunFault_fullGroup                 Container Group Capacity Unavailable
//	quota_lowered        TestAccRunFault_quotaLowered              error (quota_exceeded), exceeded quota past the pending timeout
//	kubelet_stopped      TestAccRunFault_kubeletStopped            error (node_lost) naming the node, at once; pod deleted once the node is back
//
// Each row that records a run checks its status_reason and that its
// timeline adds up to its wall time (signalEnv.expectRecord).
//
// The rows that restart the API server or stop the kubelet disturb every
// test on the cluster; they run only on the local test cluster.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
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
	return &signalEnv{e: f.e, ns: f.ns, dir: dir, terraformBin: f.terraformBin, cliConfig: f.cliConfig}
}

func commandRun(command, timeout string) string {
	return fmt.Sprintf("command = [\"sh\", \"-c\", %q]\n  timeouts {\n    create = %q\n  }", command, timeout)
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

// TestAccRunFault_execStreamCut: every connection of the provider goes
// through a TCP proxy that the test cuts while the run prints. The exec
// stream cannot be resumed (the command's stdin and output are gone with
// it), so the run ends as error naming the broken stream, the worker in the
// pod sees its session end, and the provider, reconnecting, deletes the pod
// and releases the claims.
func TestAccRunFault_execStreamCut(t *testing.T) {
	e := newTestEnv(t)
	proxy := startCutProxy(t, e.kubeconfig)
	f := newFaultEnvWith(t, e, proxy.kubeconfig, faultGroup{attrs: faultLimits})
	s, out, clock, err := f.runFault(t, "exec_stream_cut",
		commandRun(startedThen("i=0; while [ $i -lt 3000 ]; do echo line $i; i=$((i+1)); sleep 0.1; done"), "10m"),
		func(string) {
			time.Sleep(2 * time.Second) // mid-output
			if n := proxy.cut(); n == 0 {
				t.Error("the proxy had no connection to cut")
			}
		})
	clock.end(expectOutcome(t, out, err, "error", `(?s)Run Error.*exec stream to pod \S+ broke during the run`))
	s.expectRecord(t, "error", "stream_lost")
	f.checkNoLeaks(t)
}

// cutProxy forwards 127.0.0.1 connections to the API server and cuts them
// all on demand; later connections pass again.
type cutProxy struct {
	ln         net.Listener
	target     string
	kubeconfig string
	mu         sync.Mutex
	conns      map[net.Conn]struct{}
}

// startCutProxy starts a proxy in front of the cluster of kubeconfig and
// writes a copy of kubeconfig that goes through it.
func startCutProxy(t *testing.T, kubeconfig string) *cutProxy {
	raw, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cl := raw.Clusters[raw.Contexts[raw.CurrentContext].Cluster]
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: strings.TrimPrefix(cl.Server, "https://"), conns: map[net.Conn]struct{}{}}
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
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) { _, _ = io.Copy(dst, src); done <- struct{}{} }
	go pipe(up, c)
	go pipe(c, up)
	<-done
	_, _ = c.Close(), up.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
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
// terraform process, a run waits and runs once the slot frees; with the
// slot held past its pod_pending_timeout it ends cleanly with a capacity
// error and nothing of it is left.
func TestAccRunFault_fullGroup(t *testing.T) {
	acctest.Parallel(t)
	t.Run("waits", func(t *testing.T) {
		f := newFaultEnv(t, faultGroup{attrs: "max_concurrent_runs = 1\n  pod_pending_timeout = \"3m\""})
		blocker := f.runDir(t, commandRun(startedThen("sleep 15"), "10m"))
		bcmd, bout := blocker.start(t)
		f.waitStarted(t, blocker, bout)
		blockerDone := make(chan time.Time, 1)
		go func() { _ = bcmd.Wait(); blockerDone <- time.Now() }()
		s := f.runDir(t, commandRun("echo second run", "10m"))
		clock := startFault(t, "full_group_waits")
		cmd, out := s.start(t)
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
	})
	t.Run("timeout", func(t *testing.T) {
		f := newFaultEnv(t, faultGroup{attrs: "max_concurrent_runs = 1\n  pod_pending_timeout = \"10s\""})
		blocker := f.runDir(t, commandRun(startedThen("sleep 600"), "10m"))
		bcmd, bout := blocker.start(t)
		f.waitStarted(t, blocker, bout)
		s := f.runDir(t, commandRun("true", "10m"))
		clock := startFault(t, "full_group_timeout")
		cmd, out := s.start(t)
		err := cmd.Wait()
		clock.end(expectOutcome(t, out, err, "diagnostic Container Group Capacity Unavailable",
			`(?s)Container Group Capacity Unavailable.*had no room for 1 more runs within its\s+pod_pending_timeout of 10s`))
		// The waiting run left nothing; the blocker's own claim is there.
		if err := acctest.Leaks(context.Background(), f.e.kube, groupLeaks(f.ns, f.group)); err == nil {
			t.Error("the blocker's pod and claim are not seen: the leak check sees nothing")
		}
		_ = syscall.Kill(-bcmd.Process.Pid, syscall.SIGINT)
		_ = bcmd.Wait()
		f.checkNoLeaks(t)
	})
}

// TestAccRunFault_quotaLowered: a run waits for the group's only slot; while
// it waits, the group's ResourceQuota is lowered to no pods. When the slot
// frees, the run's pod is refused by the quota and the run waits for it up
// to its pod_pending_timeout, then ends as error naming the quota.
func TestAccRunFault_quotaLowered(t *testing.T) {
	f := newFaultEnv(t, faultGroup{attrs: "max_concurrent_runs = 1\n  pod_pending_timeout = \"20s\""})
	// The blocker holds the slot until the quota is lowered, then is interrupted: a fixed
	// sleep let the slot free before the quota changed on a loaded machine.
	blocker := f.runDir(t, commandRun(startedThen("sleep 600"), "10m"))
	bcmd, bout := blocker.start(t)
	f.waitStarted(t, blocker, bout)
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
	_ = syscall.Kill(-bcmd.Process.Pid, syscall.SIGINT)
	_ = bcmd.Wait()
	err = cmd.Wait()
	clock.end(expectOutcome(t, out, err, "error", `(?s)Run Error.*pending timeout of 20s: .*exceeded quota`))
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
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
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
	t.Fatalf("no provider process under terraform (pid %d)", terraformPID)
	return 0
}

// TestAccRunFault_providerKilled: SIGKILL of the provider alone mid-run.
// Terraform reports the plugin's crash; with no kubeplay process left, the
// worker in the pod ends itself once its exec session is gone, and the next
// run in the group removes the ended pod and the claims that expired
// unrenewed.
func TestAccRunFault_providerKilled(t *testing.T) {
	f := newFaultEnv(t, faultGroup{attrs: "max_concurrent_runs = 1\n  max_forks = 10\n  pod_pending_timeout = \"3m\""})
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
// again while the run's command runs. The exec stream through it breaks:
// the run ends as error, and the pod is deleted and the claims released
// once the server is back.
func TestAccRunFault_apiServerRestart(t *testing.T) {
	tools := localClusterOnly(t)
	f := newDisruptiveFaultEnv(t, "restarts the API server", faultGroup{attrs: faultLimits})
	s, out, clock, err := f.runFault(t, "apiserver_restart", commandRun(startedThen("sleep 60; echo finished"), "10m"), func(string) {
		script(t, filepath.Join(tools, "restart.sh"), "kube-apiserver")
	})
	clock.end(expectOutcome(t, out, err, "error", `(?s)Run Error.*exec stream to pod \S+ broke during the run`))
	s.expectRecord(t, "error", "stream_lost")
	if regexp.MustCompile(`(?m)^\s*finished$`).MatchString(out.String()) {
		t.Error("the command finished: the restart did not cut the run")
	}
	f.checkNoLeaks(t)
}

// kubeletDown is how long the kubelet stays stopped.
const kubeletDown = time.Minute

// TestAccRunFault_kubeletStopped: the node's kubelet is stopped while the
// run's command runs and started again a minute later. The exec stream,
// which the kubelet serves, breaks: the run ends as error, and its pod,
// which only the kubelet can confirm deleted, is gone once the node is
// back.
func TestAccRunFault_kubeletStopped(t *testing.T) {
	tools := localClusterOnly(t)
	kubelet := filepath.Join(tools, "kubelet.sh")
	f := newDisruptiveFaultEnv(t, "stops the node's kubelet for a minute", faultGroup{attrs: faultLimits})
	t.Cleanup(func() { script(t, kubelet, "start") })
	restarted := make(chan error, 1)
	var pod string
	s, out, clock, err := f.runFault(t, "kubelet_stopped", commandRun(startedThen("sleep 120; echo finished"), "10m"), func(p string) {
		pod = p
		script(t, kubelet, "stop")
		go func() {
			time.Sleep(kubeletDown)
			cmd := exec.Command(kubelet, "start")
			b, err := cmd.CombinedOutput()
			if err != nil {
				err = fmt.Errorf("%w: %s", err, b)
			}
			restarted <- err
		}()
	})
	// A stopping kubelet closes the exec stream cleanly, without an exit
	// status; a probe exec that the API server cannot proxy to the kubelet
	// tells the runner that the node is lost, and the run ends at once,
	// naming the node, with its pod marked for deletion.
	took := clock.end(expectOutcome(t, out, err, "error",
		`(?s)Run Error.*node \S+ stopped answering during the run: the API server cannot reach its kubelet.*`+
			`marked for deletion and goes once node \S+ is back`))
	s.expectRecord(t, "error", "node_lost")
	if took > kubeletDown {
		t.Errorf("the run ended %s after the kubelet stopped, want less than %s (it should not wait for the node)", took, kubeletDown)
	}
	if err := <-restarted; err != nil {
		t.Fatalf("starting the kubelet again: %v", err)
	}
	t.Logf("the kubelet was down for %s; the run ended %s after it stopped", kubeletDown, took.Round(time.Second))
	// The kubelet, back, finishes the delete that the run asked for.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := waitfor.Gone(ctx, waitfor.Named(f.e.kube.CoreV1().Pods(f.ns), pod), &corev1.Pod{}); err != nil {
		t.Fatalf("pod %s is not gone two minutes after the kubelet came back: %v", pod, err)
	}
	f.checkNoLeaks(t)
}
