// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/waitfor"
)

// signalEnv is a working directory whose configuration runs a long command,
// applied by a terraform process the test can interrupt or kill.
type signalEnv struct {
	e                       *testEnv
	ns, dir                 string
	terraformBin, cliConfig string
	// providerLog, when set, is where start has the provider log at INFO.
	providerLog string
}

func newSignalEnv(t *testing.T, timeout string) *signalEnv {
	e := newTestEnv(t)
	s := &signalEnv{e: e, ns: e.namespace("kp-signal"), dir: t.TempDir()}
	var err error
	if s.terraformBin, s.cliConfig, err = providerCLI(t); err != nil {
		t.Fatal(err)
	}
	s.write(t, "sleep 300", timeout)
	return s
}

func (s *signalEnv) write(t *testing.T, command, timeout string) {
	cfg := cliHeader(s.e.kubeconfig, s.e.catalog) + fmt.Sprintf(`resource "kubeplay_container_group" "g" {
  name      = "signals"
  namespace = %q
  image     = %q
}

resource "kubeplay_run" "r" {
  container_group = kubeplay_container_group.g.name
  command         = ["sh", "-c", %q]
  timeouts {
    create = %q
  }
}
`, s.ns, acctest.TestImage(), command, timeout)
	if err := os.WriteFile(filepath.Join(s.dir, "main.tf"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = terraformCLI(s.terraformBin, s.cliConfig, s.dir, "destroy", "-auto-approve", "-no-color") })
}

// start runs terraform apply in a process group of its own.
func (s *signalEnv) start(t testing.TB) (*exec.Cmd, *syncBuffer) {
	cmd := exec.Command(s.terraformBin, "apply", "-auto-approve", "-input=false", "-no-color")
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+s.cliConfig, "TF_IN_AUTOMATION=1", "TF_LOG=", "CHECKPOINT_DISABLE=1")
	if s.providerLog != "" {
		cmd.Env = append(cmd.Env, "TF_LOG_PROVIDER=INFO", "TF_LOG_PATH="+s.providerLog)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("terraform apply's output:\n%s", out.String())
		}
	})
	return cmd, out
}

// syncBuffer is terraform's output, read while terraform writes it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitPod lists, then watches, the namespace's run pods until cond holds for
// one of them: a pod that met cond before the wait began counts too.
func (s *signalEnv) waitPod(t testing.TB, what string, timeout time.Duration, cond func(*corev1.Pod) bool) string {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ev, err := waitfor.Until(ctx, runPodsListWatch(s.e.kube, s.ns), &corev1.Pod{}, func(ev watch.Event) (bool, error) {
		p, ok := ev.Object.(*corev1.Pod)
		return ok && ev.Type != watch.Deleted && cond(p), nil
	})
	if err != nil {
		t.Fatalf("waiting for a run pod that is %s: %v", what, err)
	}
	p, _ := ev.Object.(*corev1.Pod)
	return p.Name
}

// runPodsListWatch lists and watches the run pods of ns.
func runPodsListWatch(kube kubernetes.Interface, ns string) cache.ListerWatcher {
	pods := kube.CoreV1().Pods(ns)
	runs := func(o metav1.ListOptions) metav1.ListOptions { o.LabelSelector = "kubeplay.io/run"; return o }
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return pods.List(ctx, runs(o))
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return pods.Watch(ctx, runs(o))
		},
	}
}

func running(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }

func (s *signalEnv) runPods(t *testing.T) []string {
	pods, err := s.e.kube.CoreV1().Pods(s.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "kubeplay.io/run"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods.Items {
		names = append(names, p.Name)
	}
	return names
}

// TestAccRun_interrupt: Ctrl-C during a run cancels it, deletes its pod and
// ends the apply with the run canceled.
func TestAccRun_interrupt(t *testing.T) {
	s := newSignalEnv(t, "10m")
	cmd, out := s.start(t)
	s.waitPod(t, "running", 5*time.Minute, running)
	clock := startFault(t, "ctrl_c")
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	took := clock.end(applyOutcome(out.String(), err))
	if err == nil {
		t.Fatalf("an interrupted apply must fail:\n%s", out)
	}
	if !strings.Contains(out.String(), "Run Canceled") {
		t.Fatalf("the apply does not report the run as canceled:\n%s", out)
	}
	if left := s.runPods(t); len(left) > 0 {
		t.Fatalf("pods left after Ctrl-C: %v", left)
	}
	acctest.CheckNoLeaks(t, s.e.kube, groupLeaks(s.ns, "signals"))
	t.Logf("Ctrl-C: terraform exited %s after the signal, run pod gone", took.Round(time.Millisecond))
}

// TestAccRun_killedReaped: a terraform process killed with its provider
// leaves its pod; the pod ends itself (no beat for the disconnect grace) or the
// cluster ends it at its deadline, and the next apply in the group removes
// it.
func TestAccRun_killedReaped(t *testing.T) {
	// The create timeout is the pod's deadline, the fallback that ends an
	// orphan; it must also leave room for the scheduler of a busy node (CI
	// saw 15 s pass with the pod Pending on "Insufficient cpu").
	s := newSignalEnv(t, "3m")
	cmd, _ := s.start(t)
	orphan := s.waitPod(t, "running", 5*time.Minute, running)
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed := time.Now()
	// The worker ends it (Succeeded) when no beat came for the grace;
	// activeDeadlineSeconds (the create timeout) would let the kubelet end
	// it (Failed) otherwise.
	var ended corev1.PodPhase
	s.waitPod(t, "ended", 4*time.Minute, func(p *corev1.Pod) bool {
		if p.Name == orphan && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed) {
			ended = p.Status.Phase
		}
		return ended != ""
	})
	t.Logf("the orphan %s ended %s, %s after the kill", orphan, ended, time.Since(killed).Round(time.Second))
	// A fresh state: the killed apply never recorded its run.
	for _, f := range []string{"terraform.tfstate", "terraform.tfstate.backup", ".terraform.tfstate.lock.info"} {
		_ = os.Remove(filepath.Join(s.dir, f))
	}
	if err := s.e.kube.CoreV1().ConfigMaps(s.e.catalog).Delete(context.Background(), "signals", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.write(t, "true", "10m")
	if err := terraformCLI(s.terraformBin, s.cliConfig, s.dir, "apply", "-auto-approve", "-input=false", "-no-color"); err != nil {
		t.Fatal(err)
	}
	if left := s.runPods(t); len(left) > 0 {
		t.Fatalf("the orphan (%s) was not reaped by the next apply: pods %v", orphan, left)
	}
	acctest.CheckNoLeaks(t, s.e.kube, groupLeaks(s.ns, "signals"))
}

// TestAccRun_interruptSliced: Ctrl-C during a run of 3 slices, while one
// runs and the others start or wait: every slice is canceled, every pod
// deleted and every claim released.
func TestAccRun_interruptSliced(t *testing.T) {
	s := newSignalEnv(t, "10m")
	cfg := cliHeader(s.e.kubeconfig, s.e.catalog) + fmt.Sprintf(`resource "kubeplay_container_group" "g" {
  name                = "signals"
  namespace           = %q
  image               = %q
  max_concurrent_runs = 2
}

resource "kubeplay_run" "r" {
  container_group = kubeplay_container_group.g.name
  slices          = 3
  inventory       = "h1\nh2\nh3\n[all:vars]\nansible_connection=local\nansible_python_interpreter=/usr/bin/python3\n"
  playbook        = "- hosts: all\n  gather_facts: false\n  tasks:\n    - command: sleep 300\n"
}
`, s.ns, acctest.TestImage())
	if err := os.WriteFile(filepath.Join(s.dir, "main.tf"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd, out := s.start(t)
	s.waitPod(t, "running", 5*time.Minute, running)
	clock := startFault(t, "ctrl_c_sliced")
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	took := clock.end(applyOutcome(out.String(), err))
	if err == nil || !strings.Contains(out.String(), "Run Canceled") {
		t.Fatalf("an interrupted sliced apply must fail with the run canceled (%v):\n%s", err, out)
	}
	if left := s.runPods(t); len(left) > 0 {
		t.Fatalf("pods left after Ctrl-C: %v", left)
	}
	acctest.CheckNoLeaks(t, s.e.kube, groupLeaks(s.ns, "signals"))
	t.Logf("Ctrl-C of a sliced run: terraform exited %s after the signal, every slice's pod gone", took.Round(time.Millisecond))
}
