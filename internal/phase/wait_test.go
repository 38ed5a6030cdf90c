// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package phase

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"
)

func mustObject(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	b, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	return u
}

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ns, generation: 2}
spec: {replicas: 2}
`

// TestStatusFunc: kstatus's verdict on typical objects, and conditions
// deciding readiness for their kind except over a Failed status.
func TestStatusFunc(t *testing.T) {
	widgetCond := []Condition{{APIVersion: "example.com/v1", Kind: "Widget", JSONPath: "{.status.phase}", Value: "Ready"}}
	cases := []struct {
		name  string
		obj   string
		conds []Condition
		want  status.Status
		msg   string
	}{
		{"deployment without status", deployment, nil, status.InProgressStatus, ""},
		{"deployment rolling out", deployment + "status: {observedGeneration: 2, replicas: 2, updatedReplicas: 2, readyReplicas: 1, availableReplicas: 1}\n",
			nil, status.InProgressStatus, "Available: 1/2"},
		{"deployment available", deployment + "status:\n  observedGeneration: 2\n  replicas: 2\n  updatedReplicas: 2\n  readyReplicas: 2\n" +
			"  availableReplicas: 2\n  conditions: [{type: Available, status: 'True'}, {type: Progressing, status: 'True', reason: NewReplicaSetAvailable}]\n",
			nil, status.CurrentStatus, ""},
		{"job failed", "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j, namespace: ns}\nspec: {completions: 1}\n" +
			"status: {failed: 1, conditions: [{type: Failed, status: 'True'}]}\n", nil, status.FailedStatus, "Job Failed"},
		{"job complete", "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j, namespace: ns}\nspec: {completions: 1}\n" +
			"status: {succeeded: 1, conditions: [{type: Complete, status: 'True'}]}\n", nil, status.CurrentStatus, ""},
		{"crd not established", widgetCRD, nil, status.InProgressStatus, ""},
		{"crd established", widgetCRD + "status: {conditions: [{type: Established, status: 'True'}, {type: NamesAccepted, status: 'True'}]}\n",
			nil, status.CurrentStatus, ""},
		{"condition unmet", widget + "status: {phase: Pending}\n", widgetCond, status.InProgressStatus,
			`waiting for {.status.phase} to be "Ready", it is "Pending"`},
		{"condition met", widget + "status: {phase: Ready}\n", widgetCond, status.CurrentStatus, "wait conditions met"},
		{"condition of another kind", cm("ns", "c"), widgetCond, status.CurrentStatus, ""},
		{"failed over a condition", "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j, namespace: ns}\nspec: {completions: 1}\n" +
			"status: {failed: 1, conditions: [{type: Failed, status: 'True'}]}\n",
			[]Condition{{APIVersion: "batch/v1", Kind: "Job", JSONPath: ".status.failed", Value: "1"}}, status.FailedStatus, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := statusFunc(c.conds)(mustObject(t, c.obj))
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != c.want || !strings.Contains(res.Message, c.msg) {
				t.Errorf("status %s %q, want %s containing %q", res.Status, res.Message, c.want, c.msg)
			}
		})
	}
}

// applied applies docs with the fake and returns the members.
func applied(t *testing.T, e *Engine, docs ...string) []Ref {
	t.Helper()
	res, err := e.Apply(context.Background(), mustParse(t, docs...), nil, Options{Policy: PolicyStrict})
	if err != nil {
		t.Fatal(err)
	}
	return res.Members
}

// TestWaitReady: a Deployment without status keeps the wait until its
// deadline, which names it and its status; one that becomes available ends
// it; a failed Job ends it at once.
func TestWaitReady(t *testing.T) {
	f := newFakeCluster(t)
	e := f.engine("ready")
	refs := applied(t, e, deployment, cm("ns", "c"))

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	err := e.WaitReady(ctx, refs, nil)
	cancel()
	var we *WaitError
	if !errors.As(err, &we) || we.Failed || we.Want != "ready" || len(we.NotReady) != 1 || we.NotReady[0].Ref.Name != "web" ||
		!strings.HasPrefix(err.Error(), "timed out waiting for resources to be ready: Deployment ns/web: InProgress") {
		t.Fatalf("wait for a Deployment without status: %v", err)
	}

	go func() {
		time.Sleep(50 * time.Millisecond) // after the watch has started
		f.setStatus(gvrDeployment, "ns", "web", map[string]any{"observedGeneration": int64(2), "replicas": int64(2), "updatedReplicas": int64(2),
			"readyReplicas": int64(2), "availableReplicas": int64(2), "conditions": []any{map[string]any{"type": "Available", "status": "True"}}})
	}()
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.WaitReady(ctx, refs, nil); err != nil {
		t.Fatalf("wait for a Deployment that becomes available: %v", err)
	}

	job := applied(t, e, "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j, namespace: ns}\nspec: {completions: 1}\n")
	f.setStatus(gvrJob, "ns", "j", map[string]any{"failed": int64(1), "conditions": []any{map[string]any{"type": "Failed", "status": "True"}}})
	start := time.Now()
	err = e.WaitReady(ctx, job, nil)
	if !errors.Is(err, ErrFailed) || !errors.As(err, &we) || !we.Failed || len(we.Refs()) != 1 ||
		!strings.HasPrefix(err.Error(), "Job ns/j failed (kstatus Failed): Job Failed") || time.Since(start) > 10*time.Second {
		t.Fatalf("wait for a failed Job: %v after %s", err, time.Since(start))
	}
	if outs := Outcomes(mustParse(t, deployment, "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j, namespace: ns}\n"), append(refs, job...), err); len(outs) != 2 ||
		outs[0].NotReady || !outs[1].NotReady {
		t.Errorf("outcomes %+v: want the Job alone not ready", outs)
	}
}

// TestWaitReadyDeleted: an object deleted while waited for says so.
func TestWaitReadyDeleted(t *testing.T) {
	f := newFakeCluster(t)
	e := f.engine("deleted")
	refs := applied(t, e, deployment)
	// Deleted once the wait watches, so after its list saw the Deployment: a
	// delete at a fixed delay came before the list under make test-all's
	// load, and the wait saw one that never existed.
	watching := make(chan struct{})
	var once sync.Once
	f.dyn.PrependWatchReactor("deployments", func(k8stesting.Action) (bool, watch.Interface, error) {
		once.Do(func() { close(watching) })
		return false, nil, nil
	})
	go func() {
		<-watching
		time.Sleep(50 * time.Millisecond) // the watch is registered after the reactors
		_ = f.dyn.Tracker().Delete(gvrDeployment, "ns", "web")
	}()
	// The wait goes on to its end, then says what became of the Deployment.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := e.WaitReady(ctx, refs, nil); err == nil || !strings.Contains(err.Error(), "Deployment ns/web: deleted while waiting") {
		t.Fatalf("wait for a deleted Deployment: %v", err)
	}
	if err := e.WaitReady(context.Background(), nil, nil); err != nil {
		t.Errorf("wait for nothing: %v", err)
	}
	cctx, ccancel := context.WithCancel(context.Background())
	ccancel()
	if err := e.WaitReady(cctx, refs, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("wait with a cancelled context: %v", err)
	}
}

// TestWaitGone: objects already gone, deleted during the wait, or of a kind
// the cluster no longer serves end the wait; one that stays times out.
func TestWaitGone(t *testing.T) {
	f := newFakeCluster(t)
	e := f.engine("gone")
	refs := applied(t, e, cm("ns", "a"), cm("ns", "b"), cm("ns", "stays"))
	if err := f.dyn.Tracker().Delete(gvrConfigMap, "ns", "a"); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		_ = f.dyn.Tracker().Delete(gvrConfigMap, "ns", "b")
	}()
	unserved := NewRef("gone.example.com", "v1", "Gadget", "ns", "g")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.WaitGone(ctx, append(refs[:2:2], unserved)); err != nil {
		t.Fatalf("wait for deleted objects: %v", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := e.WaitGone(ctx, refs)
	var we *WaitError
	if !errors.As(err, &we) || we.Want != "deleted" || len(we.NotReady) != 1 ||
		err.Error() != "timed out waiting for resources to be deleted: ConfigMap ns/stays: Current: Resource is always ready" {
		t.Fatalf("wait for an object that stays: %v", err)
	}
}
