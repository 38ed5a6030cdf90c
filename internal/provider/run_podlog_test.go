// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestAccRun_podLogShowsOutput: the log of a run's pod (`kubectl logs`,
// container worker) shows the playbook's output while the run is still
// running: the test reads it, through to a task's message, while the
// apply waits on the playbook's next task, and the run then succeeds.
func TestAccRun_podLogShowsOutput(t *testing.T) {
	f := newFaultEnv(t, faultGroup{attrs: faultLimits})
	playbook := `- hosts: all
  gather_facts: false
  tasks:
    - shell: "echo ` + faultStarted + ` >/proc/1/fd/1"
    - debug: {msg: kubeplay-in-the-pod-log}
    - command: sleep 30
`
	s := f.runDir(t, fmt.Sprintf("playbook = %q\n  timeouts {\n    create = \"10m\"\n  }", playbook))
	cmd, out := s.start(t)
	pod := f.waitStarted(t, s, out)
	applied := make(chan error, 1)
	go func() { applied <- cmd.Wait() }()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	logs, err := f.e.kube.CoreV1().Pods(f.ns).GetLogs(pod, &corev1.PodLogOptions{Container: "worker", Follow: true}).Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	var seen []string
	sc := bufio.NewScanner(logs)
	found := false
	for !found && sc.Scan() {
		seen = append(seen, sc.Text())
		found = strings.Contains(sc.Text(), `"msg": "kubeplay-in-the-pod-log"`)
	}
	if !found {
		t.Fatalf("pod %s's log never showed the debug task's message (%v):\n%s", pod, sc.Err(), strings.Join(seen, "\n"))
	}
	select {
	case err := <-applied:
		t.Fatalf("the apply ended (%v) before the test read the log: the log was not read during the run", err)
	default:
	}
	log := strings.Join(seen, "\n")
	for _, want := range []string{"PLAY [all]", "TASK [debug]"} {
		if !strings.Contains(log, want) {
			t.Errorf("pod %s's log lacks %q of the playbook's output:\n%s", pod, want, log)
		}
	}
	t.Logf("pod %s's log during the run:\n%s", pod, log)
	if err := <-applied; err != nil {
		t.Fatalf("the run: %v\n%s", err, out)
	}
	s.expectRecord(t, "successful", nil)
	f.checkNoLeaks(t)
}
