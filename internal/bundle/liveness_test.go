// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package bundle

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeWorker starts a process that stands for the pod's worker and writes
// its pid where the script looks for it. The channel gets its exit.
func fakeWorker(t *testing.T) (*exec.Cmd, <-chan error) {
	t.Helper()
	w := exec.Command("sleep", "60")
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Process.Kill() })
	if err := os.WriteFile(workerPIDFile, []byte(strconv.Itoa(w.Process.Pid)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(workerPIDFile) })
	done := make(chan error, 1)
	go func() { done <- w.Wait() }()
	return w, done
}

// childPID waits up to 10 s for the command to write its child's pid to
// child.pid in dir, and returns it.
func childPID(t *testing.T, dir string) int {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		c, _ := os.ReadFile(filepath.Join(dir, "child.pid"))
		if child, _ := strconv.Atoi(strings.TrimSpace(string(c))); child != 0 {
			return child
		}
	}
	t.Fatal("the command did not start")
	return 0
}

// gone waits up to 5 s for pid to be no more.
func gone(pid int) bool {
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			return true
		}
	}
	return false
}

// When stdin ends before the run (the client is gone), the script ends the
// playbook with every process it started, and signals the worker.
func TestScriptEndsTheRunWhenStdinEnds(t *testing.T) {
	for _, tool := range []string{"sleep", "setsid"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	_, worker := fakeWorker(t)
	b := Bundle{Command: []string{"sh", "-c", `sleep 300 & echo $! > child.pid; wait`}, Marker: testMarker}
	dir := extract(t, &b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := scriptCommand(ctx, dir)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	closeStdin := heldStdin(t, cmd, nil)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	child := childPID(t, dir)
	start := time.Now()
	closeStdin()
	err := cmd.Wait()
	took := time.Since(start)
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || took > 5*time.Second {
		t.Fatalf("the script exited with %v %s after its stdin ended; want a failure at once (stderr %q)", err, took, errOut.String())
	}
	if r := report(t, errOut.String()); r.ExitCode == 0 {
		t.Errorf("report %+v, want the killed command's status", r)
	}
	if !gone(child) {
		t.Errorf("the command's child %d outlived the run", child)
	}
	select {
	case werr := <-worker:
		if ws, ok := exitStatus(werr); !ok || ws.Signal() != syscall.SIGTERM {
			t.Errorf("the worker ended with %v, want SIGTERM", werr)
		}
	case <-time.After(5 * time.Second):
		t.Error("the worker was not signalled")
	}
}

// A run that ends by itself stops the watcher: the end of stdin afterwards
// leaves the worker alone (keep_pod_on_failure keeps the pod running).
func TestScriptLeavesTheWorkerAfterARun(t *testing.T) {
	w, worker := fakeWorker(t)
	b := Bundle{Command: []string{"sh", "-c", "exit 3"}, Marker: testMarker}
	dir := extract(t, &b)
	cmd := scriptCommand(context.Background(), dir)
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	closeStdin := heldStdin(t, cmd, nil)
	ackResult(cmd, closeStdin)
	err := cmd.Run()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 3 {
		t.Fatalf("exit %v, want 3 (stderr %q)", err, errOut.String())
	}
	closeStdin()
	select {
	case werr := <-worker:
		t.Fatalf("the worker ended (%v) after a run that ended by itself", werr)
	case <-time.After(time.Second):
	}
	if err := w.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("worker: %v", err)
	}
}

func exitStatus(err error) (syscall.WaitStatus, bool) {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return 0, false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ws, ok
}

// TestScriptWaitsForTheClientToReadTheResult: after its result, the script
// waits until the client closes stdin, and then ends with the run's exit
// code, leaving the worker alone; the result is the document alone.
func TestScriptWaitsForTheClientToReadTheResult(t *testing.T) {
	_, worker := fakeWorker(t)
	b := Bundle{Command: []string{"sh", "-c", "exit 5"}, Marker: testMarker}
	dir := extract(t, &b)
	cmd := scriptCommand(context.Background(), dir)
	rs := NewResultStream(testMarker, io.Discard, MaxResultSize)
	cmd.Stderr = rs
	closeStdin := heldStdin(t, cmd, nil)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-rs.Done():
	case err := <-exited:
		t.Fatalf("the script ended (%v) before its whole result came", err)
	case <-time.After(20 * time.Second):
		t.Fatal("no whole result in 20 s")
	}
	select {
	case err := <-exited:
		t.Fatalf("the script ended (%v) before the client closed stdin", err)
	case <-time.After(500 * time.Millisecond):
	}
	closeStdin()
	select {
	case err := <-exited:
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) || exitErr.ExitCode() != 5 {
			t.Errorf("exit %v, want 5", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the script still runs 10 s after the client closed stdin")
	}
	if r, err := rs.Result(); err != nil || r.ExitCode != 5 {
		t.Errorf("result %+v, %v; want rc 5", r, err)
	}
	select {
	case werr := <-worker:
		t.Errorf("the worker ended (%v) after the client read the result", werr)
	case <-time.After(time.Second):
	}
}
