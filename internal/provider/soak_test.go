// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

// TestAccSoak applies many runs through several Terraform workspaces at once
// (separate terraform processes, each provider's kubeconfig through one
// cutProxy) while a nemesis injects faults at random moments, then checks
// what the runs left. make soak runs it long; make test-all runs its short
// default. Parameters (environment):
//
//	KUBEPLAY_SOAK_SEED        the nemesis' and the run plan's seed (default: random, printed)
//	KUBEPLAY_SOAK_RUNS        at least this many runs (default 12; the soak goes on until the faults are done)
//	KUBEPLAY_SOAK_FAULTS      faults to inject, every kind at least once when >= 6 (default 6)
//	KUBEPLAY_SOAK_WORKSPACES  terraform working directories applying at once (default 2)
//	KUBEPLAY_SOAK_MAX_RSS_MB  the bound on any provider process' VmHWM (default 256)
//
// The faults (soakFaultKinds), and the outcomes each one explains:
//
//	apiserver_restart  restart.sh kube-apiserver       none: runs re-attach and succeed
//	kubelet_restart    kubelet.sh stop; start           none: containers live on, runs re-attach
//	exec_stream_cut    cutProxy.cut of every connection none: runs re-attach
//	pod_delete         a running run pod deleted       error (pod_deleted) of the run whose pod it was;
//	                                                    a pod deleted before its playbook began is
//	                                                    relaunched (launch_retries) and succeeds
//	provider_sigkill   SIGKILL of terraform and its    none: the workspace applies again; the killed
//	                   provider (process group)        apply's runs are abandoned (see "one run")
//	node_full          a pod takes the node's free CPU none: runs wait for room (pod_pending_timeout
//	                   for 5 to 15 s                    is 5m)
//
// Any other outcome than successful, or a reason no injected fault
// explains, is a mismatch, logged with the fault log.
//
// One run is one creation of a kubeplay_run instance by one terraform
// apply: the harness counts, before every apply, the instances it will
// create (absent from the state, or tainted) as an attempt each. An apply
// killed by provider_sigkill abandons its runs in flight (their pods end
// themselves after the disconnect grace, and may have run their playbook
// whole meanwhile) and the next apply of the workspace creates them again:
// two runs of one resource address, each allowed one execution. Each run's
// playbook appends a line naming its pod to a file per address on a
// hostPath directory (the node is this machine), so the check is: no pod
// executed a playbook twice, an address ran in no more pods than its
// attempts (times its slices), and a successful run's own pods each ran it
// exactly once.
//
// Also checked: each successful run's output has its numbered lines once
// each, in order (once per slice for a sliced run); a final apply then
// `plan -detailed-exitcode` shows no change in every workspace; nothing of
// kubeplay's is left (acctest.Leaks; a killed provider's ended pods and
// expired claims are left to the next provider's orphan sweep by design,
// which the soak runs once per group before its last check); and no
// provider process' VmHWM passed the bound (sampled every 500 ms from /proc).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/warmpool"
)

// soakParams are the soak's size and seed.
type soakParams struct {
	seed                     uint64
	runs, faults, workspaces int
	maxRSS                   int64 // bytes
}

func soakParamsFromEnv(t *testing.T) soakParams {
	t.Helper()
	num := func(name string, def int) int {
		v := os.Getenv(name)
		if v == "" {
			return def
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive integer", name, v)
		}
		return n
	}
	p := soakParams{
		runs: num("KUBEPLAY_SOAK_RUNS", 12), faults: num("KUBEPLAY_SOAK_FAULTS", len(soakFaultKinds)),
		workspaces: num("KUBEPLAY_SOAK_WORKSPACES", 2), maxRSS: int64(num("KUBEPLAY_SOAK_MAX_RSS_MB", 256)) << 20,
	}
	p.seed = rand.Uint64()
	if v := os.Getenv("KUBEPLAY_SOAK_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("KUBEPLAY_SOAK_SEED=%q: want an unsigned integer", v)
		}
		p.seed = s
	}
	return p
}

type soakFaultKind string

const (
	soakAPIServer soakFaultKind = "apiserver_restart"
	soakKubelet   soakFaultKind = "kubelet_restart"
	soakCut       soakFaultKind = "exec_stream_cut"
	soakPodDelete soakFaultKind = "pod_delete"
	soakSIGKILL   soakFaultKind = "provider_sigkill"
	soakNodeFull  soakFaultKind = "node_full"
)

var soakFaultKinds = []soakFaultKind{soakAPIServer, soakKubelet, soakCut, soakPodDelete, soakSIGKILL, soakNodeFull}

// soakFault is one injected fault, as the fault log keeps it.
type soakFault struct {
	N      int
	At     time.Duration // since the soak began
	Kind   soakFaultKind
	Detail string
	// Pod is the deleted pod of pod_delete.
	Pod string
}

// soakLog is the fault log: every fault with its time and the seed.
type soakLog struct {
	t     *testing.T
	seed  uint64
	start time.Time
	mu    sync.Mutex
	list  []soakFault
}

func (l *soakLog) add(f soakFault) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f.N, f.At = len(l.list)+1, time.Since(l.start)
	l.list = append(l.list, f)
	l.t.Logf("SOAK FAULT #%d at +%.1f s (seed %d): %s %s", f.N, f.At.Seconds(), l.seed, f.Kind, f.Detail)
}

func (l *soakLog) faults() []soakFault {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.list)
}

func (l *soakLog) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "fault log (seed %d; replay with KUBEPLAY_SOAK_SEED=%d), times from %s:\n", l.seed, l.seed, l.start.UTC().Format(time.RFC3339))
	for _, f := range l.faults() {
		fmt.Fprintf(&b, "  #%d +%.1f s %s %s\n", f.N, f.At.Seconds(), f.Kind, f.Detail)
	}
	return b.String()
}

// soakRunLines is how many numbered lines each playbook prints.
const soakRunLines = 20

// The run kinds: the group each uses and how its playbook reaches hosts.
const (
	soakCold    = "cold"    // group cold: a fresh pod, launch_retries
	soakWarm    = "warm"    // group warm: a warm pod
	soakQuota   = "quota"   // group quota: a namespace ResourceQuota of one pod below max_concurrent_runs
	soakProject = "project" // group cold, from a project directory
	soakSSH     = "ssh"     // group ssh, two SSH targets
	soakSliced  = "sliced"  // group ssh, two slices of four local hosts
)

var soakRunKinds = []string{soakCold, soakWarm, soakQuota, soakProject, soakSSH, soakSliced}

// soakRun is one resource address of a workspace and what became of it.
type soakRun struct {
	ws, round int
	key, id   string // the resource name, and the id its playbook records (w<ws>-<key>)
	kind      string
	slices    int
	attempts  int
	// From the state after the run's round.
	inState        bool
	diag           string // the last apply's diagnostics about it
	status, reason string
	output         string
	pods           []string // its pod, or its slices' pods
}

// soakSetup is what every workspace's configuration refers to.
type soakSetup struct {
	groups     map[string]soakGroupRef // by run kind's group name
	records    string                  // the hostPath directory of execution records
	project    string
	sshKey     string
	sshInv     string
	knownHosts string
}

type soakGroupRef struct{ name, ns string }

// TestAccSoak: see the top of this file.
func TestAccSoak(t *testing.T) {
	tools := localClusterOnly(t)
	p := soakParamsFromEnv(t)
	e := newDisruptiveTestEnv(t, "restarts the API server and the kubelet, fills the node")
	t.Logf("SOAK seed %d (replay: make soak SEED=%d), at least %d runs, %d faults, %d workspaces", p.seed, p.seed, p.runs, p.faults, p.workspaces)
	began := time.Now()
	flog := &soakLog{t: t, seed: p.seed, start: began}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(flog.String())
		}
	})
	kubelet := filepath.Join(tools, "kubelet.sh")
	t.Cleanup(func() { _ = exec.Command(kubelet, "start").Run() })

	proxy := startCutProxy(t, e.kubeconfig)
	terraformBin, cliConfig, err := providerCLI(t)
	if err != nil {
		t.Fatal(err)
	}
	setup := soakPrepare(t, e)
	soakGroups(t, e, proxy.kubeconfig, terraformBin, cliConfig, setup)
	t.Logf("SOAK set up in %.1f s: namespaces, SSH targets, the provider's build and the groups", time.Since(began).Seconds())

	mem := &soakMemory{peak: map[int]soakRSS{}}
	var wss []*soakWorkspace
	for i := range p.workspaces {
		wss = append(wss, &soakWorkspace{i: i, dir: t.TempDir(), tf: terraformBin, cliConfig: cliConfig,
			kubeconfig: proxy.kubeconfig, catalog: e.catalog, setup: setup, mem: mem,
			rng: rand.New(rand.NewPCG(p.seed, uint64(i)+1))})
	}
	for _, ws := range wss {
		t.Cleanup(func() {
			_ = terraformCLI(ws.tf, ws.cliConfig, ws.dir, "destroy", "-auto-approve", "-input=false", "-no-color")
		})
	}
	n := &soakNemesis{t: t, e: e, log: flog, tools: tools, proxy: proxy, wss: wss,
		rng:     rand.New(rand.NewPCG(p.seed, 0)),
		target:  rand.New(rand.NewPCG(p.seed, 1<<32)),
		podNSes: []string{setup.groups[soakCold].ns, setup.groups[soakWarm].ns}, fillNS: e.namespace("kp-soak-fill")}

	ctx, stop := context.WithCancel(context.Background())
	memDone := mem.sample(ctx, wss)
	nemesisDone := make(chan struct{})
	go func() {
		defer close(nemesisDone)
		n.run(n.plan(p.faults))
	}()
	var total sync.WaitGroup
	var created int
	var createdMu sync.Mutex
	claim := func(k int) bool { // a workspace takes up to k more runs of the total
		createdMu.Lock()
		defer createdMu.Unlock()
		select {
		case <-nemesisDone:
			if created >= p.runs {
				return false
			}
		default:
		}
		created += k
		return true
	}
	for _, ws := range wss {
		total.Add(1)
		go func() {
			defer total.Done()
			for round := 0; claim(soakBatch); round++ {
				ws.round(t, round)
			}
		}()
	}
	total.Wait()
	<-nemesisDone
	faultsDone := time.Since(began)

	// Convergence: one more apply, then a plan with no changes, in every workspace.
	converged, applyErrs := map[int]string{}, map[string]int{}
	for _, ws := range wss {
		converged[ws.i] = ws.converge(t)
		for k, v := range ws.errs {
			applyErrs[k] += v
		}
	}
	stop()
	<-memDone
	var runs []*soakRun
	for _, ws := range wss {
		runs = append(runs, ws.runs...)
	}
	outcomes := soakCheckOutcomes(t.Errorf, runs, flog)
	soakCheckExecutions(t.Errorf, runs, setup.records)
	soakCheckOutputs(t.Errorf, runs)
	for _, ws := range wss {
		if err := terraformCLI(ws.tf, ws.cliConfig, ws.dir, "destroy", "-auto-approve", "-input=false", "-no-color"); err != nil {
			t.Errorf("workspace %d: %v", ws.i, err)
		}
	}
	soakCheckLeaks(t, e, setup, proxy.kubeconfig, terraformBin, cliConfig, flog)
	peak := mem.check(t, p.maxRSS)
	soakTable(t, p, runs, flog, outcomes, applyErrs, converged, peak, faultsDone, time.Since(began))
}

// soakBatch is how many runs a workspace applies per round.
const soakBatch = 3

// soakPrepare makes the namespaces, the hostPath directory, the project
// directory and the SSH targets.
func soakPrepare(t *testing.T, e *testEnv) *soakSetup {
	s := &soakSetup{groups: map[string]soakGroupRef{}}
	for _, g := range []string{soakCold, soakWarm, soakQuota, soakSSH} {
		s.groups[g] = soakGroupRef{name: randName("soak-" + g), ns: e.namespace("kp-soak-" + g)}
	}
	// One pod at a time in the quota group's namespace, below its
	// max_concurrent_runs of 2: its second run waits for the quota.
	acctest.PodQuota(t, e.kube, s.groups[soakQuota].ns, "soak-pods", 1)
	s.records = t.TempDir()
	// The run pods write as whatever user the image runs.
	if err := os.Chmod(s.records, 0o777); err != nil {
		t.Fatal(err)
	}
	s.project = t.TempDir()
	for name, content := range map[string]string{
		"site.yml":  soakPlaybook(false),
		"hosts.ini": soakLocalInventory(1),
	} {
		if err := os.WriteFile(filepath.Join(s.project, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	key, pub := acctest.SSHKey(t)
	targets := acctest.SSHTargets(t, e.kube, s.groups[soakSSH].ns, 2, pub)
	var inv, known strings.Builder
	for i, tg := range targets {
		fmt.Fprintf(&inv, "t%d ansible_host=%s\n", i, tg.IP)
		known.WriteString(tg.KnownHosts + "\n")
	}
	inv.WriteString("[all:vars]\nansible_user=" + acctest.SSHUser + "\nansible_python_interpreter=/usr/bin/python3\nansible_ssh_timeout=60\nansible_ssh_retries=3\n")
	s.sshKey, s.sshInv, s.knownHosts = key, inv.String(), known.String()
	return s
}

// soakLocalInventory is n hosts that the pod itself plays.
func soakLocalInventory(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "h%02d\n", i)
	}
	b.WriteString("[all:vars]\nansible_connection=local\nansible_python_interpreter=/usr/bin/python3\n")
	return b.String()
}

// soakPlaybook records its execution (once per pod: run_once is per
// slice), pings the hosts when ssh, then prints soakRunLines numbered lines,
// one every 100 ms, so that faults land mid-output.
func soakPlaybook(ssh bool) string {
	ping := ""
	if ssh {
		ping = "    - ping:\n"
	}
	return `- hosts: all
  gather_facts: false
  tasks:
    - name: record this execution
      shell: echo "{{ soak_key }} $(cat /etc/hostname)" >>/soak/{{ soak_key }}
      delegate_to: localhost
      run_once: true
` + ping + `    - name: numbered lines
      debug: {msg: "soak-line {{ soak_key }} {{ item }}"}
      loop: "{{ range(` + strconv.Itoa(soakRunLines) + `) | list }}"
      loop_control: {pause: 0.1}
      run_once: true
`
}

// soakGroups applies the four groups from a workspace of their own,
// destroyed when the test ends.
func soakGroups(t *testing.T, e *testEnv, kubeconfig, tf, cliConfig string, s *soakSetup) {
	// Privileged: the records are a hostPath volume. 50m of CPU each, so
	// that node_full's blocker keeps new pods off the node.
	override := fmt.Sprintf(`yamlencode({ spec = {
    volumes    = [{ name = "soak", hostPath = { path = %q, type = "Directory" } }]
    containers = [{ name = "worker", volumeMounts = [{ name = "soak", mountPath = "/soak" }],
                    resources = { requests = { cpu = "50m", memory = "32Mi" } } }]
  } })`, s.records)
	var cfg strings.Builder
	cfg.WriteString(cliHeader(kubeconfig, e.catalog))
	for _, g := range []struct {
		kind, attrs string
	}{
		{soakCold, "max_concurrent_runs = 2\n  launch_retries      = 2"},
		{soakWarm, "max_concurrent_runs = 2\n  warm_pods           = 1\n  launch_retries      = 2"},
		{soakQuota, "max_concurrent_runs = 2"},
		{soakSSH, "max_concurrent_runs = 3"},
	} {
		ref := s.groups[g.kind]
		fmt.Fprintf(&cfg, `resource "kubeplay_container_group" %q {
  name                = %q
  namespace           = %q
  image               = %q
  pod_security_level  = "privileged"
  pod_pending_timeout = "5m"
  %s
  pod_spec_override   = %s
}

`, g.kind, ref.name, ref.ns, acctest.TestImage(), g.attrs, override)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = terraformCLI(tf, cliConfig, dir, "destroy", "-auto-approve", "-input=false", "-no-color") })
	if err := terraformCLI(tf, cliConfig, dir, "apply", "-auto-approve", "-input=false", "-no-color"); err != nil {
		t.Fatal(err)
	}
}

// soakWorkspace is one terraform working directory applying rounds of runs.
type soakWorkspace struct {
	i                   int
	dir                 string
	tf, cliConfig       string
	kubeconfig, catalog string
	setup               *soakSetup
	mem                 *soakMemory
	rng                 *rand.Rand // the run plan: only this workspace's goroutine uses it

	mu      sync.Mutex
	cmd     *exec.Cmd // the apply in progress
	started time.Time
	killed  bool // the nemesis killed cmd
	current []*soakRun

	runs    []*soakRun
	applies int
	errs    map[string]int // apply errors that are not a run's status, by summary
}

// config is the workspace's configuration with runs.
func (ws *soakWorkspace) config(runs []*soakRun) string {
	var b strings.Builder
	b.WriteString(cliHeader(ws.kubeconfig, ws.catalog))
	b.WriteString("variable \"ssh_key\" {\n  type      = string\n  sensitive = true\n  ephemeral = true\n}\n\n")
	s := ws.setup
	for _, r := range runs {
		fmt.Fprintf(&b, "resource \"kubeplay_run\" %q {\n  extra_vars = { soak_key = %q }\n  timeouts {\n    create = \"15m\"\n  }\n", r.key, r.id)
		switch r.kind {
		case soakCold, soakWarm, soakQuota:
			fmt.Fprintf(&b, "  container_group = %q\n  inventory = %q\n  playbook = %q\n", s.groups[r.kind].name, soakLocalInventory(1), soakPlaybook(false))
		case soakProject:
			fmt.Fprintf(&b, "  container_group = %q\n  project_dir = %q\n  playbook_path = \"site.yml\"\n  inventories = [\"hosts.ini\"]\n", s.groups[soakCold].name, s.project)
		case soakSSH:
			fmt.Fprintf(&b, "  container_group = %q\n  inventory = %q\n  playbook = %q\n  ssh_private_keys_wo = [var.ssh_key]\n  ssh_known_hosts = %q\n",
				s.groups[soakSSH].name, s.sshInv, soakPlaybook(true), s.knownHosts)
		case soakSliced:
			fmt.Fprintf(&b, "  container_group = %q\n  slices = %d\n  inventory = %q\n  playbook = %q\n", s.groups[soakSSH].name, r.slices, soakLocalInventory(4), soakPlaybook(false))
		}
		b.WriteString("}\n\n")
	}
	return b.String()
}

func (ws *soakWorkspace) write(t *testing.T, runs []*soakRun) {
	if err := os.WriteFile(filepath.Join(ws.dir, "main.tf"), []byte(ws.config(runs)), 0o600); err != nil {
		t.Error(err)
	}
	vars := fmt.Sprintf("ssh_key = %q\n", ws.setup.sshKey)
	if err := os.WriteFile(filepath.Join(ws.dir, "terraform.tfvars"), []byte(vars), 0o600); err != nil {
		t.Error(err)
	}
}

// round applies soakBatch new runs, in place of the last round's, applying
// again after a SIGKILL or an apply error that is no run's status (up to
// 3 times), and records how each run ended.
func (ws *soakWorkspace) round(t *testing.T, round int) {
	var runs []*soakRun
	for j := range soakBatch {
		key := fmt.Sprintf("r%d_%d", round, j)
		r := &soakRun{ws: ws.i, round: round, key: key, id: fmt.Sprintf("w%d-%s", ws.i, key),
			kind: soakRunKinds[ws.rng.IntN(len(soakRunKinds))], slices: 1}
		if r.kind == soakSliced {
			r.slices = 2
		}
		runs = append(runs, r)
	}
	ws.mu.Lock()
	ws.runs = append(ws.runs, runs...)
	ws.current = runs
	ws.mu.Unlock()
	ws.write(t, runs)
	var out string
	for try := 0; try < 4; try++ {
		var err error
		var killed bool
		out, err, killed = ws.apply(t, runs)
		if killed {
			t.Logf("SOAK workspace %d round %d: apply killed; applying again", ws.i, round)
			continue
		}
		outcome := applyOutcome(out, err)
		switch outcome {
		case "successful", "error", "failed", "canceled":
		default:
			ws.mu.Lock()
			ws.errs[outcome]++
			ws.mu.Unlock()
			t.Logf("SOAK workspace %d round %d: apply ended as %s; applying again:\n%s", ws.i, round, outcome, soakTail(out))
			continue
		}
		break
	}
	ws.record(t, runs)
	for _, r := range runs {
		r.diag = soakDiagnostics(out, r.key)
	}
}

// soakDiagnostics are the blocks of terraform's output, from "Error: " or
// "Warning: " on, that name kubeplay_run.key.
func soakDiagnostics(out, key string) string {
	var kept []string
	for _, block := range regexp.MustCompile(`(?m)^(?:Error|Warning): `).Split(out, -1)[1:] {
		if strings.Contains(block, "kubeplay_run."+key+",") {
			kept = append(kept, strings.TrimSpace(block))
		}
	}
	return strings.Join(kept, "\n---\n")
}

// apply runs terraform apply once, counting an attempt for each run it
// will create; killed says the nemesis killed it.
func (ws *soakWorkspace) apply(t *testing.T, runs []*soakRun) (string, error, bool) {
	state := soakState(t, ws.dir)
	for _, r := range runs {
		if st, ok := state[r.key]; !ok || st.tainted {
			r.attempts++
		}
	}
	cmd := terraformCommand(ws.tf, ws.cliConfig, ws.dir, nil, "apply", "-auto-approve", "-input=false", "-no-color")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	ws.mu.Lock()
	if ws.errs == nil {
		ws.errs = map[string]int{}
	}
	ws.applies++
	if err := cmd.Start(); err != nil {
		ws.mu.Unlock()
		return "", err, false
	}
	ws.cmd, ws.started, ws.killed = cmd, time.Now(), false
	ws.mu.Unlock()
	err := cmd.Wait()
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.cmd = nil
	return out.String(), err, ws.killed
}

// kill SIGKILLs the workspace's apply, terraform and provider (one process
// group), when one has run at least after; it says whether it did.
func (ws *soakWorkspace) kill(after time.Duration) (string, bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.cmd == nil || time.Since(ws.started) < after {
		return "", false
	}
	provider := findProviderPID(ws.cmd.Process.Pid)
	if err := syscall.Kill(-ws.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		return "", false
	}
	ws.killed = true
	var keys []string
	for _, r := range ws.current {
		keys = append(keys, r.key)
	}
	return fmt.Sprintf("workspace %d (terraform %d, provider %d) %.1f s into its apply of %s",
		ws.i, ws.cmd.Process.Pid, provider, time.Since(ws.started).Seconds(), strings.Join(keys, " ")), true
}

// record reads how the round's runs ended from the state.
func (ws *soakWorkspace) record(t *testing.T, runs []*soakRun) {
	state := soakState(t, ws.dir)
	for _, r := range runs {
		st, ok := state[r.key]
		if !ok {
			continue
		}
		r.inState = true
		r.status, _ = st.attrs["status"].(string)
		r.reason, _ = st.attrs["status_reason"].(string)
		r.output, _ = st.attrs["output"].(string)
		r.pods = soakPods(st.attrs)
	}
}

// soakPods are a run's pod, or its slices' pods.
func soakPods(attrs map[string]any) []string {
	var pods []string
	if sr, ok := attrs["slice_results"].([]any); ok && len(sr) > 0 {
		for _, s := range sr {
			if m, ok := s.(map[string]any); ok {
				if p, _ := m["pod_name"].(string); p != "" {
					pods = append(pods, p)
				}
			}
		}
		return pods
	}
	if p, _ := attrs["pod_name"].(string); p != "" {
		pods = append(pods, p)
	}
	return pods
}

// converge applies the last round's configuration again (recreating the
// runs that failed: an attempt each) and plans with -detailed-exitcode; it
// returns "converged" or what failed.
func (ws *soakWorkspace) converge(t *testing.T) string {
	var last []*soakRun
	if len(ws.runs) > 0 {
		round := ws.runs[len(ws.runs)-1].round
		for _, r := range ws.runs {
			if r.round == round {
				last = append(last, r)
			}
		}
	}
	out, err, _ := ws.apply(t, last)
	if err != nil {
		t.Errorf("SOAK workspace %d: the final apply failed: %v\n%s", ws.i, err, soakTail(out))
		return "final apply failed"
	}
	cmd := terraformCommand(ws.tf, ws.cliConfig, ws.dir, nil, "plan", "-detailed-exitcode", "-input=false", "-no-color")
	b, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return "converged"
	case errors.As(err, &exit) && exit.ExitCode() == 2:
		t.Errorf("SOAK workspace %d: the plan after the final apply has changes:\n%s", ws.i, soakTail(string(b)))
		return "plan has changes"
	default:
		t.Errorf("SOAK workspace %d: the plan after the final apply failed: %v\n%s", ws.i, err, soakTail(string(b)))
		return "plan failed"
	}
}

// soakTail is the last 60 lines of terraform's output.
func soakTail(out string) string {
	lines := strings.Split(out, "\n")
	if len(lines) > 60 {
		lines = lines[len(lines)-60:]
	}
	return strings.Join(lines, "\n")
}

type soakInstance struct {
	tainted bool
	attrs   map[string]any
}

// soakState is the workspace's kubeplay_run instances by resource name.
func soakState(t *testing.T, dir string) map[string]soakInstance {
	out := map[string]soakInstance{}
	b, err := os.ReadFile(filepath.Join(dir, "terraform.tfstate"))
	if errors.Is(err, os.ErrNotExist) {
		return out
	}
	if err != nil {
		t.Error(err)
		return out
	}
	// The local backend creates the file empty when it locks it: a first
	// apply killed before it wrote any state leaves it so.
	if len(bytes.TrimSpace(b)) == 0 {
		return out
	}
	var st struct {
		Resources []struct {
			Type, Name string
			Instances  []struct {
				Status     string
				Attributes map[string]any
			}
		}
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Errorf("the state of %s: %v", dir, err)
		return out
	}
	for _, r := range st.Resources {
		if r.Type == "kubeplay_run" && len(r.Instances) == 1 {
			out[r.Name] = soakInstance{tainted: r.Instances[0].Status == "tainted", attrs: r.Instances[0].Attributes}
		}
	}
	return out
}

// soakNemesis injects the faults.
type soakNemesis struct {
	t       *testing.T
	e       *testEnv
	log     *soakLog
	tools   string
	proxy   *cutProxy
	wss     []*soakWorkspace
	rng     *rand.Rand // the sequence and the pauses: the seed replays them
	target  *rand.Rand // which pod or workspace: depends on timing too
	podNSes []string
	fillNS  string
}

// plan is count faults, every kind count/6 times or more, in an order the
// seed decides.
func (n *soakNemesis) plan(count int) []soakFaultKind {
	kinds := make([]soakFaultKind, count)
	for i := range kinds {
		kinds[i] = soakFaultKinds[i%len(soakFaultKinds)]
	}
	n.rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	return kinds
}

// run injects kinds in order, each after a pause of 3 to 8 s.
func (n *soakNemesis) run(kinds []soakFaultKind) {
	for _, k := range kinds {
		time.Sleep(time.Duration(3000+n.rng.IntN(5000)) * time.Millisecond)
		hold := time.Duration(5000+n.rng.IntN(10000)) * time.Millisecond
		n.inject(k, hold)
	}
}

func (n *soakNemesis) inject(k soakFaultKind, hold time.Duration) {
	t := n.t
	switch k {
	case soakAPIServer:
		at := time.Now()
		n.log.add(soakFault{Kind: k, Detail: "restart.sh kube-apiserver"})
		if err := soakScript(filepath.Join(n.tools, "restart.sh"), "kube-apiserver"); err != nil {
			t.Errorf("SOAK: %v", err)
		}
		t.Logf("SOAK the API server was ready again %.1f s after the kill began", time.Since(at).Seconds())
	case soakKubelet:
		at := time.Now()
		n.log.add(soakFault{Kind: k, Detail: "kubelet.sh stop; start"})
		kubelet := filepath.Join(n.tools, "kubelet.sh")
		if err := errors.Join(soakScript(kubelet, "stop"), soakScript(kubelet, "start")); err != nil {
			t.Errorf("SOAK: %v", err)
		}
		t.Logf("SOAK the kubelet was stopped and Ready again in %.1f s", time.Since(at).Seconds())
	case soakCut:
		// Cut when something streams: a cut of nothing tests nothing.
		var cut int
		for deadline := time.Now().Add(time.Minute); cut == 0 && time.Now().Before(deadline); {
			if cut = n.proxy.cut(); cut == 0 {
				time.Sleep(500 * time.Millisecond)
			}
		}
		n.log.add(soakFault{Kind: k, Detail: fmt.Sprintf("cut %d connections", cut)})
	case soakPodDelete:
		n.deletePod()
	case soakSIGKILL:
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
			ws := n.wss[n.target.IntN(len(n.wss))]
			if detail, ok := ws.kill(3 * time.Second); ok {
				n.log.add(soakFault{Kind: k, Detail: detail})
				return
			}
		}
		t.Errorf("SOAK: no apply to kill within 2 minutes")
	case soakNodeFull:
		n.fillNode(hold)
	}
}

func soakScript(path string, args ...string) error {
	if out, err := exec.Command(path, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %v: %w\n%s", filepath.Base(path), args, err, out)
	}
	return nil
}

// deletePod deletes a running run pod of the cold or warm group, waiting
// up to 2 minutes for one.
func (n *soakNemesis) deletePod() {
	ctx := context.Background()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		var running []corev1.Pod
		for _, ns := range n.podNSes {
			pods, err := n.e.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: managed.LabelRun})
			if err != nil {
				continue
			}
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
					running = append(running, p)
				}
			}
		}
		if len(running) == 0 {
			continue
		}
		p := running[n.target.IntN(len(running))]
		n.log.add(soakFault{Kind: soakPodDelete, Pod: p.Name, Detail: fmt.Sprintf("pod %s/%s (run %s)", p.Namespace, p.Name, p.Labels[managed.LabelRun])})
		err := n.e.kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		if err != nil {
			n.t.Logf("SOAK deleting pod %s: %v", p.Name, err)
		}
		return
	}
	n.t.Errorf("SOAK: no running run pod to delete within 2 minutes")
}

// fillNode starts a pod requesting the node's free CPU but 20m (less than
// a run pod's 50m) and deletes it after hold.
func (n *soakNemesis) fillNode(hold time.Duration) {
	ctx := context.Background()
	kube := n.e.kube
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) != 1 {
		n.t.Errorf("SOAK node_full: want the one node of the local cluster: %v", err)
		return
	}
	node := nodes.Items[0]
	free := node.Status.Allocatable.Cpu().DeepCopy()
	pods, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node.Name})
	if err != nil {
		n.t.Errorf("SOAK node_full: %v", err)
		return
	}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, c := range p.Spec.Containers {
			free.Sub(*c.Resources.Requests.Cpu())
		}
	}
	free.Sub(k8sresource.MustParse("20m"))
	if free.Sign() <= 0 {
		n.log.add(soakFault{Kind: soakNodeFull, Detail: fmt.Sprintf("the node was full already (%s free): held %.0f s", free.String(), hold.Seconds())})
		time.Sleep(hold)
		return
	}
	blocker := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "soak-blocker-"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: ptr.To[int64](0),
			AutomountServiceAccountToken: ptr.To(false), NodeName: node.Name,
			Containers: []corev1.Container{{Name: "blocker", Image: acctest.TestImage(), ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"sleep", "600"}, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: free}}}},
		},
	}
	created, err := kube.CoreV1().Pods(n.fillNS).Create(ctx, blocker, metav1.CreateOptions{})
	if err != nil {
		n.t.Errorf("SOAK node_full: %v", err)
		return
	}
	n.log.add(soakFault{Kind: soakNodeFull, Detail: fmt.Sprintf("pod %s requests %s of CPU for %.0f s", created.Name, free.String(), hold.Seconds())})
	time.Sleep(hold)
	if err := kube.CoreV1().Pods(n.fillNS).Delete(ctx, created.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		n.t.Errorf("SOAK node_full: deleting %s: %v", created.Name, err)
	}
}

// soakRSS is a provider process' memory, in bytes.
type soakRSS struct{ hwm, rss int64 }

// soakMemory samples the VmHWM and VmRSS of the workspaces' providers.
type soakMemory struct {
	mu   sync.Mutex
	peak map[int]soakRSS // by pid
}

func (m *soakMemory) sample(ctx context.Context, wss []*soakWorkspace) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for _, ws := range wss {
				ws.mu.Lock()
				cmd := ws.cmd
				ws.mu.Unlock()
				if cmd == nil {
					continue
				}
				pid := findProviderPID(cmd.Process.Pid)
				if pid == 0 {
					continue
				}
				if r, ok := procRSS(pid); ok {
					m.mu.Lock()
					p := m.peak[pid]
					m.peak[pid] = soakRSS{hwm: max(p.hwm, r.hwm), rss: max(p.rss, r.rss)}
					m.mu.Unlock()
				}
			}
		}
	}()
	return done
}

// procRSS reads VmHWM and VmRSS from /proc/pid/status.
func procRSS(pid int) (soakRSS, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return soakRSS{}, false
	}
	var r soakRSS
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmHWM:":
			r.hwm = kb << 10
		case "VmRSS:":
			r.rss = kb << 10
		}
	}
	return r, r.hwm > 0
}

// check fails when a provider's VmHWM passed bound, or none was sampled;
// it returns the largest.
func (m *soakMemory) check(t *testing.T, bound int64) soakRSS {
	m.mu.Lock()
	defer m.mu.Unlock()
	var peak soakRSS
	for _, r := range m.peak {
		peak = soakRSS{hwm: max(peak.hwm, r.hwm), rss: max(peak.rss, r.rss)}
	}
	if len(m.peak) == 0 {
		t.Error("SOAK: no provider process was sampled: the memory check saw nothing")
	}
	if peak.hwm > bound {
		t.Errorf("SOAK: a provider's VmHWM reached %d MiB, over the bound of %d MiB", peak.hwm>>20, bound>>20)
	}
	return peak
}

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
		time.Sleep(time.Until(flog.start.Add(lastKill + bundle.DefaultLeaseGrace + 10*time.Second)))
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
	fmt.Fprintf(&b, "SOAK SUMMARY seed %d (replay: make soak SEED=%d)\n", p.seed, p.seed)
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
