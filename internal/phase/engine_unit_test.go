// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package phase

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Widget, plural: widgets}
`

// widget is a Widget, w in ns.
const widget = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: ns}\n"

// TestApplyCRDsFirst: namespaces and CRDs are applied first, and custom
// resources only once their CRD is Established, whatever the document order.
func TestApplyCRDsFirst(t *testing.T) {
	f := newFakeCluster(t)
	f.establish = true
	f.refuse = func(u *unstructured.Unstructured) error {
		if u.GetKind() != "Widget" {
			return nil
		}
		crd, err := f.get(gvrCRD, "", "widgets.example.com")
		if err != nil {
			return err
		}
		if conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions"); len(conds) == 0 {
			return errors.New("no matches for kind Widget: the CRD is not established")
		}
		return nil
	}
	e := f.engine("crd")
	objs := mustParse(t, widget, cm("ns", "c"), widgetCRD, "apiVersion: v1\nkind: Namespace\nmetadata: {name: ns}\n")
	res, err := e.Apply(context.Background(), objs, nil, Options{Policy: PolicyStrict})
	if err != nil {
		t.Fatal(err)
	}
	got := f.appliedKinds()
	first := got[:2]
	slices.Sort(first)
	if len(got) != 4 || !slices.Equal(first, []string{"CustomResourceDefinition widgets.example.com", "Namespace ns"}) {
		t.Fatalf("applied %v, want the Namespace and the CRD first", got)
	}
	if len(res.Members) != 4 || len(res.Fields) != 4 {
		t.Errorf("members %v fields %v, want 4 of each", res.Members, res.Fields)
	}
	rec, found, err := e.Inv.Load(context.Background())
	if err != nil || !found || len(rec) != 4 {
		t.Errorf("inventory %v, %v, %v: want the 4 members", rec, found, err)
	}
	w, err := f.get(gvrWidget, "ns", "w")
	if err != nil || w.GetLabels()[LabelPartOf] != e.Inv.ID {
		t.Errorf("widget %v, labels %v: want it applied with the membership label", err, w.GetLabels())
	}
}

// TestApplyNamespaceDefault: a namespaced document without a namespace goes
// to "default"; a cluster-scoped one loses a namespace it was given.
func TestApplyNamespaceDefault(t *testing.T) {
	f := newFakeCluster(t)
	e := f.engine("default")
	objs := mustParse(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n", "apiVersion: v1\nkind: Namespace\nmetadata: {name: nsx, namespace: x}\n")
	res, err := e.Apply(context.Background(), objs, nil, Options{Policy: PolicyStrict})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/ConfigMap/default/c", "/Namespace//nsx"}
	var got []string
	for _, m := range res.Members {
		got = append(got, m.Key())
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("members %v, want %v", got, want)
	}
	if _, err := f.get(gvrConfigMap, "default", "c"); err != nil {
		t.Error(err)
	}
	outs := Outcomes(objs, res.Members, nil)
	if len(outs) != 2 || outs[0].NotReady {
		t.Errorf("outcomes %+v: want both documents matched to their members", outs)
	}
}

// TestApplyPruneAndAbandon: objects that leave the bundle are deleted with
// prune (one delete-collection when a whole kind and namespace goes, single
// deletes otherwise), or released from the phase without it.
func TestApplyPruneAndAbandon(t *testing.T) {
	ctx := context.Background()
	f := newFakeCluster(t)
	e := f.engine("prune")
	res, err := e.Apply(ctx, mustParse(t, cm("a", "keep"), cm("a", "drop1"), cm("a", "drop2"), cm("b", "x1"), cm("b", "x2")), nil, Options{Policy: PolicyStrict})
	if err != nil {
		t.Fatal(err)
	}
	f.dyn.ClearActions()
	res, err = e.Apply(ctx, mustParse(t, cm("a", "keep"), cm("c", "new")), res.Members, Options{Policy: PolicyStrict, Prune: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range [][2]string{{"a", "drop1"}, {"a", "drop2"}, {"b", "x1"}, {"b", "x2"}} {
		if _, err := f.get(gvrConfigMap, n[0], n[1]); !apierrors.IsNotFound(err) {
			t.Errorf("pruned %s/%s: %v, want NotFound", n[0], n[1], err)
		}
	}
	var verbs []string
	for _, a := range f.dyn.Actions() {
		if a.GetVerb() == "delete" || a.GetVerb() == "delete-collection" {
			verbs = append(verbs, a.GetVerb()+" "+a.GetNamespace())
		}
	}
	slices.Sort(verbs)
	if want := []string{"delete a", "delete a", "delete-collection b"}; !slices.Equal(verbs, want) {
		t.Errorf("deletes %v, want %v", verbs, want)
	}
	if keys := refKeys(res.Members); !slices.Equal(keys, []string{"/ConfigMap/a/keep", "/ConfigMap/c/new"}) {
		t.Errorf("members after prune %v", keys)
	}

	// Without prune the object stays, without the membership label.
	if _, err = e.Apply(ctx, mustParse(t, cm("a", "keep")), res.Members, Options{Policy: PolicyStrict}); err != nil {
		t.Fatal(err)
	}
	left, err := f.get(gvrConfigMap, "c", "new")
	if err != nil {
		t.Fatalf("released object: %v", err)
	}
	if _, ok := left.GetLabels()[LabelPartOf]; ok {
		t.Errorf("released object keeps %s", LabelPartOf)
	}
	if rec, _, _ := e.Inv.Load(ctx); len(rec) != 1 {
		t.Errorf("inventory %v, want only the kept object", rec)
	}
}

func refKeys(refs []Ref) []string {
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = r.Key()
	}
	slices.Sort(out)
	return out
}

// TestApplyOwnership: strict refuses an object no phase owns, adopt takes
// it; strict and adopt refuse another phase's object, naming the phase;
// force_adopt takes it.
func TestApplyOwnership(t *testing.T) {
	ctx := context.Background()
	f := newFakeCluster(t)
	orphan := &unstructured.Unstructured{}
	orphan.SetAPIVersion("v1")
	orphan.SetKind("ConfigMap")
	orphan.SetName("orphan")
	orphan.SetNamespace("ns")
	if err := f.dyn.Tracker().Create(gvrConfigMap, orphan, "ns"); err != nil {
		t.Fatal(err)
	}
	a, b := f.engine("a"), f.engine("b")
	_, err := a.Apply(ctx, mustParse(t, cm("ns", "orphan")), nil, Options{Policy: PolicyStrict})
	var owned *OwnedError
	if !errors.As(err, &owned) || owned.Owner != "" || owned.OwnerID != "" || owned.Policy != PolicyStrict {
		t.Fatalf("strict over an unowned object: %v", err)
	}
	if _, err := a.Apply(ctx, mustParse(t, cm("ns", "orphan"), cm("ns", "other")), nil, Options{Policy: PolicyAdopt}); err != nil {
		t.Fatalf("adopt: %v", err)
	}
	for _, p := range []Policy{PolicyStrict, PolicyAdopt} {
		_, err = b.Apply(ctx, mustParse(t, cm("ns", "orphan")), nil, Options{Policy: p})
		de := soleDocError(err)
		if de == nil || !errors.As(err, &owned) || owned.Owner != "a" || de.Obj.Doc != 0 ||
			err.Error() != `ConfigMap ns/orphan (element 0): the object belongs to phase "a"; policy "`+string(p)+`" never takes over another inventory's object` {
			t.Errorf("%s over phase a's object: %v", p, err)
		}
	}
	if _, err := b.Apply(ctx, mustParse(t, cm("ns", "orphan")), nil, Options{Policy: PolicyForceAdopt}); err != nil {
		t.Fatalf("force_adopt: %v", err)
	}
	// An ApplySet no phase's inventory names is named by its id.
	c := f.engine("c")
	c.Inv.Namespace = "elsewhere"
	_, err = c.Apply(ctx, mustParse(t, cm("ns", "orphan")), nil, Options{Policy: PolicyStrict})
	if !errors.As(err, &owned) || owned.OwnerID != b.Inv.ID || !strings.Contains(err.Error(), "belongs to ApplySet "+b.Inv.ID) {
		t.Errorf("strict over an unknown ApplySet's object: %v", err)
	}
}

// TestApplyPartialFailure: after a refused document the inventory holds
// what was applied and what it held before, and a conflict is typed.
func TestApplyPartialFailure(t *testing.T) {
	ctx := context.Background()
	f := newFakeCluster(t)
	e := f.engine("partial")
	prev, err := e.Apply(ctx, mustParse(t, cm("ns", "old")), nil, Options{Policy: PolicyStrict})
	if err != nil {
		t.Fatal(err)
	}
	f.refuse = func(u *unstructured.Unstructured) error {
		switch u.GetName() {
		case "bad":
			return apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "bad", nil)
		case "owned":
			return apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "owned", errors.New("conflict with \"someone\""))
		}
		return nil
	}
	docs := []string{cm("ns", "old"), cm("ns", "good"), cm("ns", "bad")}
	res, err := e.Apply(ctx, mustParse(t, docs...), prev.Members, Options{Policy: PolicyStrict, Prune: true})
	de := soleDocError(err)
	if de == nil || de.Obj.Name != "bad" || de.Obj.Doc != 2 || !apierrors.IsInvalid(err) {
		t.Fatalf("error %v, want the bad document refused", err)
	}
	rec, _, _ := e.Inv.Load(ctx)
	if got := refKeys(rec); !slices.Equal(got, refKeys(res.Members)) || slices.Contains(got, "/ConfigMap/ns/bad") || !slices.Contains(got, "/ConfigMap/ns/old") {
		t.Errorf("inventory %v, result %v: want the same, without the refused object", got, refKeys(res.Members))
	}
	if outs := Outcomes(mustParse(t, docs...), res.Members, err); len(outs) != len(res.Members) {
		t.Errorf("outcomes %v for members %v", outs, res.Members)
	}
	_, err = e.Apply(ctx, mustParse(t, cm("ns", "owned")), res.Members, Options{Policy: PolicyStrict})
	var conflict *ConflictError
	if !errors.As(err, &conflict) || !apierrors.IsConflict(err) || !strings.HasSuffix(err.Error(), "; another field manager owns these fields") {
		t.Errorf("conflict: %v, want a *ConflictError", err)
	}
}

// TestApplyUnknownKind: a kind the cluster does not serve names its
// document and points at the CRD.
func TestApplyUnknownKind(t *testing.T) {
	f := newFakeCluster(t)
	e := newEngine(f.dyn, dynMeta{f.dyn}, newTestMapper(false), f.kube, "nokind", "kubeplay-system")
	_, err := e.Apply(context.Background(), mustParse(t, widget), nil, Options{Policy: PolicyStrict})
	de := soleDocError(err)
	if de == nil || !strings.Contains(err.Error(), "the cluster has no kind Widget in apiVersion example.com/v1; install its CustomResourceDefinition first") {
		t.Fatalf("error %v", err)
	}
}

// TestDryRun: refusals come back as checked errors; documents that cannot
// be judged yet (missing kind or namespace, unreachable cluster) unchecked;
// nothing is stored.
func TestDryRun(t *testing.T) {
	f := newFakeCluster(t)
	f.refuse = func(u *unstructured.Unstructured) error {
		switch u.GetName() {
		case "bad":
			return apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "bad", nil)
		case "nons":
			return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonNotFound,
				Code: 404, Details: &metav1.StatusDetails{Kind: "namespaces", Name: "missing"}}}
		case "offline":
			return errors.New("connection refused")
		}
		return nil
	}
	e := newEngine(f.dyn, dynMeta{f.dyn}, newTestMapper(false), f.kube, "dry", "kubeplay-system")
	objs := mustParse(t, cm("ns", "fine"), cm("ns", "bad"), cm("missing", "nons"), widget, cm("ns", "offline"))
	errs := e.DryRun(context.Background(), objs, false)
	var got []string
	for _, de := range errs {
		got = append(got, de.Obj.Name+map[bool]string{true: " unchecked", false: " refused"}[de.Unchecked])
	}
	if want := []string{"bad refused", "nons unchecked", "w unchecked", "offline unchecked"}; !slices.Equal(got, want) {
		t.Fatalf("dry run %v, want %v", got, want)
	}
	if !strings.Contains(errs[1].Err.Error(), `namespace "missing" does not exist yet`) {
		t.Errorf("missing namespace: %v", errs[1].Err)
	}
	if len(f.appliedKinds()) != 0 {
		t.Errorf("a dry run stored %v", f.appliedKinds())
	}
}

// TestObserve: Read's view of the members: present, deleted, and changed
// by another writer (its owned fields digest differs).
func TestObserve(t *testing.T) {
	ctx := context.Background()
	f := newFakeCluster(t)
	e := f.engine("observe")
	objs := mustParse(t, cm("ns", "same"), cm("ns", "gone"), cm("ns", "edited"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: dflt}\n")
	res, err := e.Apply(ctx, objs, nil, Options{Policy: PolicyStrict})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.dyn.Tracker().Delete(gvrConfigMap, "ns", "gone"); err != nil {
		t.Fatal(err)
	}
	ed, _ := f.get(gvrConfigMap, "ns", "edited")
	ed.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubeplay", Operation: metav1.ManagedFieldsOperationApply, FieldsV1: metav1.NewFieldsV1(`{}`)}})
	if err := f.dyn.Tracker().Update(gvrConfigMap, ed, "ns"); err != nil {
		t.Fatal(err)
	}
	obs, err := e.Observe(ctx, res.Members, res.MergeFields(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name            string
		exists, drifted bool
	}{{"same", true, false}, {"gone", false, false}, {"edited", true, true}, {"dflt", true, false}} {
		o := objs[slices.IndexFunc(objs, func(o Object) bool { return o.Name == c.name })]
		if exists, drifted := obs.Check(o.Ref); exists != c.exists || drifted != c.drifted {
			t.Errorf("%s: exists %v drifted %v, want %v %v", c.name, exists, drifted, c.exists, c.drifted)
		}
	}
	if obs.Exists(NewRef("", "v1", "ConfigMap", "ns", "gone")) || !obs.Exists(NewRef("", "v1", "ConfigMap", "ns", "same")) {
		t.Error("Exists disagrees with Check")
	}
}

// TestDestroy deletes members in waves, custom resources and other objects
// before CRDs and namespaces, waits until they are gone, then deletes the
// inventory; an object whose label another phase took is left alone.
func TestDestroy(t *testing.T) {
	ctx := context.Background()
	f := newFakeCluster(t)
	f.establish = true
	e := f.engine("destroy")
	objs := mustParse(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: ns}\n", widgetCRD, widget, cm("ns", "c"), cm("ns", "taken"))
	res, err := e.Apply(ctx, objs, nil, Options{Policy: PolicyStrict})
	if err != nil {
		t.Fatal(err)
	}
	taken, _ := f.get(gvrConfigMap, "ns", "taken")
	taken.SetLabels(map[string]string{LabelPartOf: "applyset-other-v1"})
	if err := f.dyn.Tracker().Update(gvrConfigMap, taken, "ns"); err != nil {
		t.Fatal(err)
	}
	f.dyn.ClearActions()
	if err := e.Destroy(within(t, time.Minute), res.Members); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, a := range f.dyn.Actions() {
		if a.GetVerb() == "delete" || a.GetVerb() == "delete-collection" {
			order = append(order, a.GetResource().Resource)
		}
	}
	if len(order) != 4 || order[2] != "customresourcedefinitions" || order[3] != "namespaces" {
		t.Errorf("deletes %v, want the widget and the ConfigMap, then the CRD, then the namespace", order)
	}
	if _, err := f.get(gvrConfigMap, "ns", "taken"); err != nil {
		t.Errorf("another phase's object: %v", err)
	}
	if _, found, _ := e.Inv.Load(ctx); found {
		t.Error("the inventory survived destroy")
	}
}

// TestInventoryEncoding: the ApplySet parent carries the id label, the
// tooling, group-kinds and namespaces annotations, and the sorted member
// list, which Load reads back.
func TestInventoryEncoding(t *testing.T) {
	ctx := context.Background()
	f := newFakeCluster(t)
	inv := NewInventory(f.kube, "enc", "kubeplay-system")
	refs := []Ref{NewRef("example.com", "v1", "Widget", "ns", "w"), NewRef("", "v1", "ConfigMap", "kubeplay-system", "c"), NewRef("", "v1", "Namespace", "", "ns")}
	if err := inv.Store(ctx, refs); err != nil {
		t.Fatal(err)
	}
	cm, err := f.kube.CoreV1().ConfigMaps("kubeplay-system").Get(ctx, "kubeplay-phase-enc", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Labels[LabelApplySetID] != ApplySetID("kubeplay-phase-enc", "kubeplay-system") || cm.Labels["kubeplay.io/phase"] != "enc" {
		t.Errorf("labels %v", cm.Labels)
	}
	wantAnn := map[string]string{AnnotationTooling: "kubeplay/v1", AnnotationGroupKinds: "ConfigMap,Namespace,Widget.example.com", AnnotationNamespaces: "ns"}
	for k, v := range wantAnn {
		if cm.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, cm.Annotations[k], v)
		}
	}
	want := `[{"version":"v1","kind":"ConfigMap","namespace":"kubeplay-system","name":"c"},{"version":"v1","kind":"Namespace","name":"ns"},` +
		`{"group":"example.com","version":"v1","kind":"Widget","namespace":"ns","name":"w"}]`
	if cm.Data["objects"] != want {
		t.Errorf("objects =\n%s\nwant\n%s", cm.Data["objects"], want)
	}
	got, found, err := inv.Load(ctx)
	if err != nil || !found || len(got) != 3 || got[2] != refs[0] || got[0] != refs[1] {
		t.Errorf("Load = %v, %v, %v", got, found, err)
	}
	if ph := PhaseOf(ctx, f.kube, "kubeplay-system", inv.ID); ph != "enc" {
		t.Errorf("PhaseOf = %q", ph)
	}
	if ph := PhaseOf(ctx, f.kube, "kubeplay-system", "applyset-unknown-v1"); ph != "" {
		t.Errorf("PhaseOf an unknown id = %q", ph)
	}

	cm.Data["objects"] = "{not json"
	if _, err := f.kube.CoreV1().ConfigMaps("kubeplay-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := inv.Load(ctx); err == nil || !strings.Contains(err.Error(), "invalid objects") {
		t.Errorf("Load of invalid JSON: %v", err)
	}
	cm.Labels[LabelApplySetID] = "applyset-other-v1"
	if _, err := f.kube.CoreV1().ConfigMaps("kubeplay-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := inv.Load(ctx); err == nil || !strings.Contains(err.Error(), `is not phase "enc"'s inventory`) {
		t.Errorf("Load of another ApplySet's ConfigMap: %v", err)
	}
	if err := inv.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if _, found, err := inv.Load(ctx); found || err != nil {
		t.Errorf("after Delete: found %v, %v", found, err)
	}
	if err := inv.Delete(ctx); err != nil {
		t.Errorf("deleting a missing inventory: %v", err)
	}
}

func TestRefJSON(t *testing.T) {
	r := NewRef("apps", "v1", "Deployment", "ns", "d")
	b, err := json.Marshal(r)
	if err != nil || string(b) != `{"group":"apps","version":"v1","kind":"Deployment","namespace":"ns","name":"d"}` {
		t.Fatalf("%s, %v", b, err)
	}
	var back Ref
	if err := json.Unmarshal(b, &back); err != nil || back != r {
		t.Errorf("round trip %v, %v", back, err)
	}
	if err := json.Unmarshal([]byte(`[]`), &back); err == nil {
		t.Error("a list decoded as a Ref")
	}
}
