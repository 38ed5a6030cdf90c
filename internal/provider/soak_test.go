// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

// TestAccSoak applies many runs through several Terraform workspaces at once
// (separate terraform processes, each provider's kubeconfig through one
// cutProxy) while a nemesis injects faults at random moments, then checks
// what the runs left. make soak runs it long; make test-all runs its short
// default. It runs on the local second cluster, whose API server and kubelet
// the nemesis restarts: make test-all runs it in its first phase, after the
// other tests of the second cluster (TESTACC_EARLY). Parameters
// (environment):
//
//	KUBEPLAY_SOAK_SEED        the nemesis' and the run plan's seed (default: random, printed)
//	KUBEPLAY_SOAK_RUNS        at least this many runs (default 12; the soak goes on until the faults are done)
//	KUBEPLAY_SOAK_FAULTS      faults to inject, every kind at least once when >= 6 (default 6)
//	KUBEPLAY_SOAK_WORKSPACES  terraform working directories applying at once (default 2)
//	KUBEPLAY_SOAK_PAUSE       the nemesis' pause before each fault, at random in MIN-MAX (default 3s-8s)
//	KUBEPLAY_SOAK_MAX_RSS_MB  the bound on any provider process' VmHWM (default 256)
//
// The faults (soakFaultKinds), and the outcomes each one explains:
//
//	apiserver_restart  cluster2.sh restart kube-apiserver none: runs re-attach and succeed
//	kubelet_restart    cluster2.sh kubelet stop; start  none: containers live on, runs re-attach
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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
)

// soakParams are the soak's size and seed.
type soakParams struct {
	seed                     uint64
	runs, faults, workspaces int
	maxRSS                   int64 // bytes
	pauseMin, pauseMax       time.Duration
}

// replay is the make soak command that runs these parameters again.
func (p soakParams) replay() string {
	return fmt.Sprintf("make soak SEED=%d RUNS=%d FAULTS=%d WORKSPACES=%d PAUSE=%s-%s",
		p.seed, p.runs, p.faults, p.workspaces, p.pauseMin, p.pauseMax)
}

// parseSoakPause reads KUBEPLAY_SOAK_PAUSE's MIN-MAX.
func parseSoakPause(s string) (lo, hi time.Duration, err error) {
	a, b, ok := strings.Cut(s, "-")
	if ok {
		lo, err = time.ParseDuration(a)
		if err == nil {
			hi, err = time.ParseDuration(b)
		}
	}
	if !ok || err != nil || lo < 0 || hi < lo {
		return 0, 0, fmt.Errorf("KUBEPLAY_SOAK_PAUSE=%q: want MIN-MAX, two durations with MIN at most MAX, as 3s-8s", s)
	}
	return lo, hi, nil
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
	pause := os.Getenv("KUBEPLAY_SOAK_PAUSE")
	if pause == "" {
		pause = "3s-8s"
	}
	var err error
	if p.pauseMin, p.pauseMax, err = parseSoakPause(pause); err != nil {
		t.Fatal(err)
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
	p     soakParams // the seed and what replays it
	start time.Time
	mu    sync.Mutex
	list  []soakFault
}

func (l *soakLog) add(f soakFault) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f.N, f.At = len(l.list)+1, time.Since(l.start)
	l.list = append(l.list, f)
	l.t.Logf("SOAK FAULT #%d at +%.1f s (seed %d): %s %s", f.N, f.At.Seconds(), l.p.seed, f.Kind, f.Detail)
}

func (l *soakLog) faults() []soakFault {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.list)
}

func (l *soakLog) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "fault log (seed %d; replay: %s), times from %s:\n", l.p.seed, l.p.replay(), l.start.UTC().Format(time.RFC3339))
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
	p := soakParamsFromEnv(t)
	// On the second cluster, so that make test-all runs it beside the tests
	// that share the first.
	e := newSecondDisruptiveEnv(t, "restarts the second cluster's control plane and kubelet, fills its node")
	t.Logf("SOAK seed %d (replay: %s), at least %d runs, %d faults, %d workspaces, pauses %s to %s",
		p.seed, p.replay(), p.runs, p.faults, p.workspaces, p.pauseMin, p.pauseMax)
	began := time.Now()
	flog := &soakLog{t: t, p: p, start: began}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(flog.String())
		}
	})
	t.Cleanup(func() { acctest.StartSecondKubelet(t) })

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
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	n := &soakNemesis{t: t, e: e, log: flog, proxy: proxy, wss: wss,
		restartAPIServer: acctest.RestartSecondAPIServer, restartKubelet: acctest.RestartSecondKubelet,
		rng:     rand.New(rand.NewPCG(p.seed, 0)),
		target:  rand.New(rand.NewPCG(p.seed, 1<<32)),
		runPods: watchRunPods(ctx, t, e.kube, []string{setup.groups[soakCold].ns, setup.groups[soakWarm].ns}),
		fillNS:  e.namespace("kp-soak-fill")}
	memDone := mem.sample(ctx, wss)
	nemesisDone := make(chan struct{})
	go func() {
		defer close(nemesisDone)
		n.run(n.plan(p.faults), p.pauseMin, p.pauseMax)
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
