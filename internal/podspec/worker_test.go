// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package podspec

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
)

// The worker script names the paths the run's script uses, and has nothing
// the kubelet would expand ($(VAR), $$).
func TestWorkerArgsPaths(t *testing.T) {
	s := WorkerArgs[2]
	for _, want := range []string{bundle.WorkerPIDFile, bundle.RunDirPrefix + "*", "sleep 45 ", "trap 'exit 0' TERM"} {
		if !strings.Contains(s, want) {
			t.Errorf("the worker script lacks %q: %s", want, s)
		}
	}
	if strings.Contains(s, "$$") || strings.Contains(s, "$(") {
		t.Errorf("the kubelet would expand the worker script: %s", s)
	}
}

// worker runs the worker script on this host, with its paths in dir and a
// start timeout of one second.
func worker(t *testing.T, dir string) (*exec.Cmd, <-chan error) {
	t.Helper()
	s := strings.NewReplacer(bundle.WorkerPIDFile, filepath.Join(dir, "worker.pid"),
		bundle.RunDirPrefix, filepath.Join(dir, "kubeplay."), "sleep 45 ", "sleep 1 ").Replace(WorkerArgs[2])
	cmd := exec.Command(WorkerArgs[0], WorkerArgs[1], s)
	// A group of its own: in a pod the worker's sleeps end with the
	// container, here they would outlive it (a `sleep infinity` did).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return cmd, done
}

func TestWorkerStartTimeout(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	t.Run("no run came", func(t *testing.T) {
		_, done := worker(t, t.TempDir())
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the worker without a run ended with %v, want exit 0", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the worker without a run did not end after its start timeout")
		}
	})
	t.Run("a run came", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, "kubeplay.abc123"), 0o700); err != nil {
			t.Fatal(err)
		}
		cmd, done := worker(t, dir)
		select {
		case err := <-done:
			t.Fatalf("the worker of a run ended (%v)", err)
		case <-time.After(2500 * time.Millisecond):
		}
		pid, err := os.ReadFile(filepath.Join(dir, "worker.pid"))
		if err != nil || strings.TrimSpace(string(pid)) != strconv.Itoa(cmd.Process.Pid) {
			t.Errorf("pid file %q (%v), want the worker's pid %d", pid, err, cmd.Process.Pid)
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the worker ended with %v on SIGTERM, want exit 0", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the worker ignored SIGTERM")
		}
	})
}
