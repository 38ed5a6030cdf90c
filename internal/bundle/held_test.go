// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package bundle

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Two runs on one held node take turns: the second starts its command
// only once the first has ended. Each removes its directory when it ends.
func TestHeldRunsTakeTurns(t *testing.T) {
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("flock is not installed")
	}
	log := filepath.Join(t.TempDir(), "log")
	var wg sync.WaitGroup
	dirs := make([]string, 2)
	for i := range 2 {
		b := Bundle{Command: []string{"sh", "-c", `echo "start $(date +%s%N)" >>"$LOG"; sleep 1; echo "end $(date +%s%N)" >>"$LOG"`},
			Env: map[string]string{"LOG": log}, Marker: testMarker, Held: true}
		dirs[i] = runDir(t)
		s := deliver(t, dirs[i], &b, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := s.finish(); r.ExitCode != 0 {
				t.Errorf("run %d: result %+v, output %q", i, r, s.output())
			}
		}()
	}
	wg.Wait()
	raw, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		kinds = append(kinds, strings.Fields(l)[0])
	}
	if got := strings.Join(kinds, " "); got != "start end start end" {
		t.Errorf("the runs overlapped: %s", raw)
	}
	for i, d := range dirs {
		// The script removes it once the provider has said done.
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			if _, err := os.Stat(d); os.IsNotExist(err) {
				break
			}
		}
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("run %d left its directory: %v", i, err)
		}
	}
}

// When a held run's client goes for longer than the grace, the pod ends
// the playbook but not the worker: the node outlives its runs.
func TestHeldRunSparesTheWorker(t *testing.T) {
	for _, tool := range []string{"sleep", "setsid", "flock"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	worker := fakeWorker(t)
	b := Bundle{Command: []string{"sh", "-c", `sleep 300 & echo $! > child.pid; wait`}, Marker: testMarker, Held: true, LeaseGrace: time.Second}
	dir := runDir(t)
	s := deliver(t, dir, &b, 1)
	child := childPID(t, filepath.Join(dir, "b"))
	s.cut()
	time.Sleep(4 * time.Second) // the grace, and a watchdog's tick
	if !gone(child) {
		t.Errorf("the playbook's process %d outlived its client's grace", child)
	}
	select {
	case err := <-worker:
		t.Errorf("the held node's worker was ended: %v", err)
	case <-time.After(time.Second):
	}
}
