// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package phase

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestMemberIndex(t *testing.T) {
	idx := NewMemberIndex([]Ref{
		NewRef("", "v1", "ConfigMap", "default", "c"),
		NewRef("", "v1", "ConfigMap", "other", "o"),
		NewRef("", "v1", "Namespace", "", "n"),
		NewRef("apps", "v1", "Deployment", "ns", "d"),
	})
	for _, c := range []struct {
		ref  Ref
		want string
	}{
		{NewRef("", "v1", "ConfigMap", "", "c"), "/ConfigMap/default/c"},        // went to default
		{NewRef("", "v1", "ConfigMap", "default", "c"), "/ConfigMap/default/c"}, // as written
		{NewRef("", "v1", "ConfigMap", "", "o"), ""},                            // not in default
		{NewRef("", "v1", "ConfigMap", "ns", "c"), ""},                          // another namespace
		{NewRef("", "v1", "Namespace", "x", "n"), "/Namespace//n"},              // cluster-scoped
		{NewRef("apps", "v2", "Deployment", "ns", "d"), "apps/Deployment/ns/d"}, // the version does not matter
		{NewRef("extensions", "v1", "Deployment", "ns", "d"), ""},               // another group
	} {
		m, ok := idx.Find(c.ref)
		if got := map[bool]string{true: m.Key()}[ok]; got != c.want {
			t.Errorf("Find(%v) = %q, want %q", c.ref, got, c.want)
		}
	}
}

func TestRefNames(t *testing.T) {
	r := RefFromAPIVersion("apps/v1", "Deployment", "ns", "d")
	if r.APIVersion() != "apps/v1" || r.String() != "Deployment ns/d" || r.DocKey() != "apps/v1|Deployment|ns|d" || r.Key() != "apps/Deployment/ns/d" {
		t.Errorf("%v: %s %s %s", r, r.APIVersion(), r.DocKey(), r.Key())
	}
	core := RefFromAPIVersion("v1", "Namespace", "", "n")
	if core.GroupKind.Group != "" || core.Version != "v1" || core.APIVersion() != "v1" || core.String() != "Namespace n" {
		t.Errorf("%+v", core)
	}
}

func TestMergeFieldsAndChanged(t *testing.T) {
	a, b, c := NewRef("", "v1", "ConfigMap", "ns", "a"), NewRef("", "v1", "ConfigMap", "ns", "b"), NewRef("", "v1", "ConfigMap", "ns", "c")
	res := Result{Members: []Ref{a, b}, Fields: map[string]string{a.Key(): "new-a"}}
	got := res.MergeFields(map[string]string{a.Key(): "old-a", b.Key(): "old-b", c.Key(): "old-c"})
	if want := map[string]string{a.Key(): "new-a", b.Key(): "old-b"}; !maps.Equal(got, want) {
		t.Errorf("MergeFields = %v, want %v", got, want)
	}
	objs := mustParse(t, cm("ns", "same"), cm("ns", "edited"), cm("ns", "new"))
	known := map[string]string{objs[0].DocKey(): objs[0].Digest, objs[1].DocKey(): "old"}
	var names []string
	for _, o := range Changed(objs, known) {
		names = append(names, o.Name)
	}
	if !slices.Equal(names, []string{"edited", "new"}) {
		t.Errorf("Changed = %v", names)
	}
}

// TestErrorWording: the engine's errors name objects and bundle elements,
// never a caller's attributes, and keep their cause reachable.
func TestErrorWording(t *testing.T) {
	r := NewRef("", "v1", "ConfigMap", "ns", "c")
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "c", errors.New("conflict"))
	for _, c := range []struct {
		err  error
		want string
	}{
		{&ParseError{Doc: 1, Part: 2, Err: errors.New("bad")}, "element 1, YAML document 2: bad"},
		{&DuplicateError{Ref: r, Doc: 3, First: 1}, "element 3: ConfigMap ns/c is also in element 1; each object may appear once in a phase"},
		{&DocError{Obj: Object{Ref: r, Doc: 4}, Err: errors.New("refused")}, "ConfigMap ns/c (element 4): refused"},
		{&OwnedError{Policy: PolicyStrict}, `the object exists and no phase owns it; policy "strict" does not take it over`},
		{&OwnedError{Policy: PolicyAdopt, Owner: "p"}, `the object belongs to phase "p"; policy "adopt" never takes over another inventory's object`},
		{&OwnedError{Policy: PolicyAdopt, OwnerID: "applyset-x-v1"}, `the object belongs to ApplySet applyset-x-v1; policy "adopt" never takes over another inventory's object`},
		{&ConflictError{Err: conflict}, conflict.Error() + "; another field manager owns these fields"},
		{&WaitError{Want: "ready", Failed: true, NotReady: []Pending{{Ref: r, Status: "broken"}}}, "ConfigMap ns/c failed (kstatus Failed): broken"},
		{&WaitError{Want: "deleted", NotReady: []Pending{{Ref: r, Status: "still exists"}, {Ref: NewRef("", "v1", "Namespace", "", "n"), Status: "Terminating"}}},
			"timed out waiting for resources to be deleted: ConfigMap ns/c: still exists; Namespace n: Terminating"},
	} {
		got := c.err.Error()
		if got != c.want {
			t.Errorf("%T:\n got %s\nwant %s", c.err, got, c.want)
		}
		for _, attr := range []string{"documents", "timeouts", "inventory_policy", "force_conflicts", "kustomization"} {
			if strings.Contains(got, attr) {
				t.Errorf("%T names attribute %s: %s", c.err, attr, got)
			}
		}
	}
	if !apierrors.IsConflict(&ConflictError{Err: conflict}) {
		t.Error("a ConflictError hides its cause")
	}
	if errors.Is(&WaitError{Want: "ready"}, ErrFailed) {
		t.Error("a timeout is ErrFailed")
	}
	docs, rest := DocErrors(errors.Join(&DocError{Obj: Object{Ref: r}}, errors.New("other"), fmt.Errorf("wrapped: %w", &DocError{Obj: Object{Ref: r, Doc: 1}})))
	if len(docs) != 2 || docs[1].Obj.Doc != 1 || len(rest) != 1 {
		t.Errorf("DocErrors = %v, %v", docs, rest)
	}
	if docs, rest := DocErrors(nil); docs != nil || rest != nil {
		t.Error("DocErrors(nil) found errors")
	}
}
