// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package phase

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
)

func testClients(t *testing.T) *kubeclient.Clients {
	t.Helper()
	cfg, _ := acctest.Clients(t)
	acctest.Parallel(t)
	c, err := kubeclient.NewClients(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// within is a context with a deadline d away, as the provider gives the
// engine its operation's timeout.
func within(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func rnd(prefix string) string { return fmt.Sprintf("%s-%06x", prefix, rand.IntN(1<<24)) }

// testEngine returns an engine whose inventory namespace is removed at the end.
func testEngine(t *testing.T, c *kubeclient.Clients, phase string) *Engine {
	t.Helper()
	invNS := rnd("kp-inv")
	e, err := NewEngine(c, phase, invNS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Kube.CoreV1().Namespaces().Delete(context.Background(), invNS, metav1.DeleteOptions{}) })
	return e
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

func crdDoc(group string) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.%[1]s
spec:
  group: %[1]s
  scope: Namespaced
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`, group)
}

func mustParse(t *testing.T, docs ...string) []Object {
	t.Helper()
	o, err := Parse(docs)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestEngineLifecycle applies a namespace, a CRD, a custom resource and
// core objects in one phase, checks the ApplySet inventory, prunes, and
// destroys in order.
func TestEngineLifecycle(t *testing.T) {
	c := testClients(t)
	ctx := context.Background()
	ns, group := rnd("kp-eng"), rnd("kp")+".example.com"
	t.Cleanup(func() {
		_ = c.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		_ = c.Dynamic.Resource(crdGVR).Delete(ctx, "widgets."+group, metav1.DeleteOptions{})
	})
	e := testEngine(t, c, "lifecycle")
	docs := []string{
		fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata: {name: w1, namespace: %s}\nspec: {size: 1}\n", group, ns),
		crdDoc(group),
		fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n", ns),
		fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: keep, namespace: %s}\ndata: {a: '1'}\n---\n"+
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: drop, namespace: %s}\n", ns, ns),
	}
	res, err := e.Apply(within(t, time.Minute), mustParse(t, docs...), nil, Options{Policy: PolicyStrict, Prune: true, Wait: true})
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if len(res.Members) != 5 || len(res.Fields) != 5 {
		t.Fatalf("members %v, fields %v: want 5 of each", res.Members, res.Fields)
	}
	cm, err := c.Kube.CoreV1().ConfigMaps(e.Inv.Namespace).Get(ctx, e.Inv.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Labels[LabelApplySetID] != e.Inv.ID || cm.Annotations[AnnotationTooling] != "kubeplay/v1" {
		t.Errorf("inventory labels %v annotations %v", cm.Labels, cm.Annotations)
	}
	wantGK := "ConfigMap,CustomResourceDefinition.apiextensions.k8s.io,Namespace,Widget." + group
	if got := cm.Annotations[AnnotationGroupKinds]; got != wantGK {
		t.Errorf("contains-group-kinds = %q, want %q", got, wantGK)
	}
	if got := cm.Annotations[AnnotationNamespaces]; got != ns {
		t.Errorf("additional-namespaces = %q, want %q", got, ns)
	}
	live, err := c.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "keep", metav1.GetOptions{})
	if err != nil || live.Labels[LabelPartOf] != e.Inv.ID {
		t.Fatalf("member ConfigMap: %v, labels %v", err, live.GetLabels())
	}
	found, err := e.Inspect(ctx, res.Members)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 5 {
		t.Fatalf("Inspect found %d members, want 5: %v", len(found), found)
	}
	for k, l := range found {
		if l.Fields != res.Fields[k] {
			t.Errorf("%s: live fields digest %s differs from the applied %s with no change", k, l.Fields, res.Fields[k])
		}
	}

	// An out-of-band edit of an owned field changes the fields digest.
	live.Data["a"] = "2"
	if _, err := c.Kube.CoreV1().ConfigMaps(ns).Update(ctx, live, metav1.UpdateOptions{FieldManager: "someone"}); err != nil {
		t.Fatal(err)
	}
	found, err = e.Inspect(ctx, res.Members)
	if err != nil {
		t.Fatal(err)
	}
	keepKey := NewRef("", "v1", "ConfigMap", ns, "keep").Key()
	if found[keepKey].Fields == res.Fields[keepKey] {
		t.Error("an edit of an owned field left the fields digest unchanged")
	}

	// Drop one ConfigMap: prune deletes it and the inventory forgets it.
	docs[3] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: keep, namespace: %s}\ndata: {a: '1'}\n", ns)
	_, err = e.Apply(ctx, mustParse(t, docs...), res.Members, Options{Policy: PolicyStrict, Prune: true})
	var conflict *ConflictError
	if !errors.As(err, &conflict) || !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "another field manager owns these fields") {
		t.Fatalf("re-apply over another manager's field: %v, want a *ConflictError", err)
	}
	res, err = e.Apply(ctx, mustParse(t, docs...), res.Members, Options{Policy: PolicyStrict, Prune: true, Force: true})
	if err != nil {
		t.Fatalf("apply with prune: %v", err)
	}
	if _, err := c.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "drop", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pruned ConfigMap: %v, want NotFound", err)
	}
	rec, _, err := e.Inv.Load(ctx)
	if err != nil || len(rec) != 4 {
		t.Fatalf("inventory after prune: %v, %v; want 4 members", rec, err)
	}
	if k, _ := c.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "keep", metav1.GetOptions{}); k.Data["a"] != "1" {
		t.Errorf("re-apply did not restore the edited value: %v", k.Data)
	}

	if err := e.Destroy(within(t, 2*time.Minute), res.Members); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	if _, err := c.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace after destroy: %v, want NotFound", err)
	}
	if _, err := c.Dynamic.Resource(crdGVR).Get(ctx, "widgets."+group, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("CRD after destroy: %v, want NotFound", err)
	}
	if _, found, _ := e.Inv.Load(ctx); found {
		t.Error("inventory ConfigMap survived destroy")
	}
}

// TestEngineWaitConditions: a Job waited on by a condition on
// .status.succeeded; a Job that fails ends the wait at once with kstatus's
// message, long before the timeout.
func TestEngineWaitConditions(t *testing.T) {
	c := testClients(t)
	ctx := context.Background()
	ns := rnd("kp-fail")
	t.Cleanup(func() { _ = c.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}) })
	e := testEngine(t, c, "fail")
	doc := `apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: batch/v1
kind: Job
metadata: {name: boom, namespace: %[1]s}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: c
        image: %[2]s
        imagePullPolicy: IfNotPresent
        command: ["%[3]s"]
        resources: {requests: {cpu: 100m}}
`
	conds := []Condition{{APIVersion: "batch/v1", Kind: "Job", JSONPath: "{.status.succeeded}", Value: "1"}}
	if _, err := e.Apply(within(t, 2*time.Minute), mustParse(t, fmt.Sprintf(doc, ns, acctest.TestImage(), "true")), nil,
		Options{Policy: PolicyStrict, Wait: true, Conditions: conds}); err != nil {
		t.Fatalf("waiting for a succeeding Job: %v", err)
	}
	job, err := c.Kube.BatchV1().Jobs(ns).Get(ctx, "boom", metav1.GetOptions{})
	if err != nil || job.Status.Succeeded != 1 {
		t.Fatalf("the wait ended before the condition was met: %v, succeeded %d", err, job.Status.Succeeded)
	}
	// The namespace goes once the namespace controller has deleted its Job
	// and the Job's pod: over a minute on the loaded machine of make
	// test-all (once in five runs here). The bound is the test's, not the engine's.
	if err := e.Destroy(within(t, 3*time.Minute), nil); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = e.Apply(within(t, 5*time.Minute), mustParse(t, fmt.Sprintf(doc, ns, acctest.TestImage(), "false")), nil,
		Options{Policy: PolicyStrict, Wait: true, Conditions: conds})
	var we *WaitError
	if !errors.Is(err, ErrFailed) || !errors.As(err, &we) || !we.Failed || !strings.Contains(err.Error(), "Job "+ns+"/boom failed (kstatus Failed): Job Failed") {
		t.Fatalf("error = %v, want the failed Job named", err)
	}
	if d := time.Since(start); d > 2*time.Minute {
		t.Errorf("the wait took %s: a failed resource should end it early", d)
	}
	t.Logf("failed after %s: %v", time.Since(start).Round(time.Millisecond), err)
}

// TestEngineStrictAndPartialFailure: strict refuses another phase's object;
// when the fifth of ten documents is refused the applied ones are in the
// inventory, and a fixed bundle applies on the next run.
func TestEngineStrictAndPartialFailure(t *testing.T) {
	c := testClients(t)
	ctx := context.Background()
	ns := rnd("kp-strict")
	if _, err := c.Kube.CoreV1().Namespaces().Apply(ctx, nsApply(ns), metav1.ApplyOptions{FieldManager: "test"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}) })
	a := testEngine(t, c, "a")
	b, err := NewEngine(c, "b", a.Inv.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	shared := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shared, namespace: %s}\n", ns)
	if _, err := a.Apply(ctx, mustParse(t, shared), nil, Options{Policy: PolicyStrict}); err != nil {
		t.Fatal(err)
	}
	for _, policy := range []Policy{PolicyStrict, PolicyAdopt} {
		_, err = b.Apply(ctx, mustParse(t, shared), nil, Options{Policy: policy})
		de, owned := soleDocError(err), &OwnedError{}
		if de == nil || de.Obj.Doc != 0 || de.Obj.String() != "ConfigMap "+ns+"/shared" || !errors.As(err, &owned) || owned.Owner != "a" ||
			!strings.Contains(err.Error(), `ConfigMap `+ns+`/shared (element 0): the object belongs to phase "a"`) {
			t.Fatalf("%s apply of another phase's object: %v", policy, err)
		}
	}

	var docs []string
	for i := range 10 {
		d := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm%d, namespace: %s}\n", i, ns)
		if i == 4 {
			d += "data: {bad: {nested: map}}\n" // refused by the API server
		}
		docs = append(docs, d)
	}
	res, err := b.Apply(ctx, mustParse(t, docs...), nil, Options{Policy: PolicyStrict})
	if de := soleDocError(err); de == nil || de.Obj.Doc != 4 || de.Obj.String() != "ConfigMap "+ns+"/cm4" {
		t.Fatalf("error = %v, want cm4 refused", err)
	}
	rec, _, lerr := b.Inv.Load(ctx)
	if lerr != nil {
		t.Fatal(lerr)
	}
	live, lerr := c.Kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: LabelPartOf + "=" + b.Inv.ID})
	if lerr != nil {
		t.Fatal(lerr)
	}
	if len(live.Items) < 4 || len(rec) != len(live.Items) || len(res.Members) != len(live.Items) {
		t.Fatalf("%d live members, %d in the inventory, %d in the result: want equal and at least 4", len(live.Items), len(rec), len(res.Members))
	}
	for _, r := range rec {
		if r.Name == "cm4" {
			t.Error("the refused object is in the inventory")
		}
	}
	docs[4] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm4, namespace: %s}\n", ns)
	if res, err = b.Apply(ctx, mustParse(t, docs...), res.Members, Options{Policy: PolicyStrict}); err != nil || len(res.Members) != 10 {
		t.Fatalf("second apply: %v, %d members", err, len(res.Members))
	}
}

// soleDocError returns the *DocError when err holds exactly one.
func soleDocError(err error) *DocError {
	docs, rest := DocErrors(err)
	if len(docs) != 1 || len(rest) != 0 {
		return nil
	}
	return docs[0]
}

func nsApply(name string) *applycorev1.NamespaceApplyConfiguration {
	return applycorev1.Namespace(name)
}

// TestEngineAbandon: with prune off, an object that leaves the bundle stays
// in the cluster, loses the membership label and leaves the inventory, so
// destroy does not delete it.
func TestEngineAbandon(t *testing.T) {
	c := testClients(t)
	ctx := context.Background()
	ns := rnd("kp-abandon")
	if _, err := c.Kube.CoreV1().Namespaces().Apply(ctx, nsApply(ns), metav1.ApplyOptions{FieldManager: "test"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}) })
	e := testEngine(t, c, "abandon")
	cm := func(n string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: %s}\n", n, ns)
	}
	res, err := e.Apply(ctx, mustParse(t, cm("stay"), cm("left")), nil, Options{Policy: PolicyStrict})
	if err != nil {
		t.Fatal(err)
	}
	if res, err = e.Apply(ctx, mustParse(t, cm("stay")), res.Members, Options{Policy: PolicyStrict}); err != nil {
		t.Fatal(err)
	}
	left, err := c.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "left", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("abandoned ConfigMap: %v", err)
	}
	if _, labelled := left.Labels[LabelPartOf]; labelled {
		t.Errorf("abandoned ConfigMap still carries %s", LabelPartOf)
	}
	if err := e.Destroy(within(t, time.Minute), res.Members); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "left", metav1.GetOptions{}); err != nil {
		t.Errorf("destroy deleted the abandoned ConfigMap: %v", err)
	}
	if _, err := c.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "stay", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("member after destroy: %v, want NotFound", err)
	}
}
