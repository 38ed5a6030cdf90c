// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runner_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
)

// TestAccRunCleanupSparesSameNamePod: the run's pod is deleted during the
// run and another pod, not kubeplay's, is created under its name at once;
// the run ends as error and its clean-up leaves the other pod alone.
func TestAccRunCleanupSparesSameNamePod(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pods := e.kube.CoreV1().Pods(e.ns)
	s := e.spec(bundle.Bundle{Command: []string{"sh", "-c", "echo started; sleep 300"}})
	var (
		once     sync.Once
		replaced = make(chan *corev1.Pod, 1)
	)
	s.OnLine = func(l string) {
		if l != "started" {
			return
		}
		once.Do(func() {
			go func() {
				defer close(replaced)
				list, err := pods.List(ctx, metav1.ListOptions{})
				if err != nil || len(list.Items) != 1 {
					t.Errorf("listing the run pod: %v", err)
					return
				}
				run := list.Items[0]
				if err := pods.Delete(ctx, run.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
					t.Errorf("deleting the run pod: %v", err)
					return
				}
				if err := runner.WaitPodGone(ctx, e.kube, e.ns, run.Name, run.UID); err != nil {
					t.Errorf("waiting for the run pod to go: %v", err)
					return
				}
				foreign := e.pod(acctest.TestImage())
				foreign.Name, foreign.GenerateName, foreign.Labels = run.Name, "", map[string]string{"owner": "someone-else"}
				foreign.Spec.Containers[0].Command, foreign.Spec.Containers[0].Args = []string{"sleep", "300"}, nil
				p, err := pods.Create(ctx, foreign, metav1.CreateOptions{})
				if err != nil {
					t.Errorf("creating the other pod: %v", err)
					return
				}
				replaced <- p
			}()
		})
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	res := e.r.Run(rctx, s)
	// A run that ended before it printed "started" never replaced its pod:
	// the receive below must not wait for a goroutine that never began.
	once.Do(func() { close(replaced) })
	foreign, ok := <-replaced
	if !ok {
		t.Fatalf("the pod was not replaced; the run: %+v", res)
	}
	defer func() {
		_ = runner.DeletePod(context.Background(), e.kube, e.ns, foreign.Name, foreign.UID)
		acctest.CheckNoLeaks(t, e.kube, acctest.LeakScope{Namespaces: []string{e.ns}})
	}()
	if res.Status != runner.StatusError || !strings.Contains(res.Message, "was deleted") {
		t.Errorf("a run whose pod was deleted: %s: %s", res.Status, res.Message)
	}
	t.Logf("the run: %s: %s", res.Status, res.Message)
	p, err := pods.Get(ctx, foreign.Name, metav1.GetOptions{})
	switch {
	case err != nil:
		t.Fatalf("the run's clean-up deleted the other pod of its name: %v", err)
	case p.UID != foreign.UID || p.DeletionTimestamp != nil:
		t.Fatalf("the run's clean-up deleted the other pod of its name (uid %s, deleting %v)", p.UID, p.DeletionTimestamp)
	}
}
