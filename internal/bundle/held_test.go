// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package bundle

import (
	"bytes"
	"context"
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
		dirs[i] = extract(t, &b)
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := scriptCommand(context.Background(), dirs[i])
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			closeStdin := heldStdin(t, cmd, nil)
			defer closeStdin()
			ackResult(cmd, closeStdin)
			if err := cmd.Run(); err != nil {
				t.Errorf("run %d: %v; stderr %s", i, err, errOut.String())
			}
			if !strings.Contains(errOut.String(), `{"rc":0,`) {
				t.Errorf("run %d reported %q", i, errOut.String())
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
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("run %d left its directory: %v", i, err)
		}
	}
}

// When a held run's client goes, the script ends the playbook but not the
// worker: the node outlives its runs.
func TestHeldRunSparesTheWorker(t *testing.T) {
	for _, tool := range []string{"sleep", "setsid", "flock"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	_, worker := fakeWorker(t)
	b := Bundle{Command: []string{"sh", "-c", `sleep 300 & echo $! > child.pid; wait`}, Marker: testMarker, Held: true}
	dir := extract(t, &b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := scriptCommand(ctx, dir)
	closeStdin := heldStdin(t, cmd, nil)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	child := childPID(t, dir)
	closeStdin()
	_ = cmd.Wait()
	if !gone(child) {
		t.Errorf("the playbook's process %d outlived its client", child)
	}
	select {
	case err := <-worker:
		t.Errorf("the held node's worker was ended: %v", err)
	case <-time.After(time.Second):
	}
}
