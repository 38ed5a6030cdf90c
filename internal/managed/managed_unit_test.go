// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package managed

import (
	"context"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

func TestLabels(t *testing.T) {
	cases := []struct {
		kv   []string
		want map[string]string
	}{
		{nil, map[string]string{LabelManagedBy: ManagedByValue}},
		{[]string{LabelRun, "r1", LabelContainerGroup, "g"},
			map[string]string{LabelManagedBy: ManagedByValue, LabelRun: "r1", LabelContainerGroup: "g"}},
		// A key without a value is dropped rather than read past the end.
		{[]string{LabelRun, "r1", LabelPhase}, map[string]string{LabelManagedBy: ManagedByValue, LabelRun: "r1"}},
		{[]string{LabelRun, "r1", LabelRun, "r2"}, map[string]string{LabelManagedBy: ManagedByValue, LabelRun: "r2"}},
	}
	for _, c := range cases {
		if got := Labels(c.kv...); !maps.Equal(got, c.want) {
			t.Errorf("Labels(%q) = %v, want %v", c.kv, got, c.want)
		}
	}
	a, b := Labels(), Labels()
	a["x"] = "y"
	if _, ok := b["x"]; ok {
		t.Error("Labels returns a shared map")
	}
}

func TestSelector(t *testing.T) {
	cases := []struct {
		kv   []string
		want string
	}{
		{nil, "app.kubernetes.io/managed-by=kubeplay"},
		{[]string{LabelComponent, ComponentCredential}, "app.kubernetes.io/managed-by=kubeplay,kubeplay.io/component=credential"},
		{[]string{LabelContainerGroup, "g", LabelRun, ""}, "app.kubernetes.io/managed-by=kubeplay,kubeplay.io/container-group=g,kubeplay.io/run"},
		{[]string{LabelRun}, "app.kubernetes.io/managed-by=kubeplay"},
	}
	for _, c := range cases {
		if got := Selector(c.kv...); got != c.want {
			t.Errorf("Selector(%q) = %q, want %q", c.kv, got, c.want)
		}
	}
}

// TestSelectorSelectsLabels: what Labels writes, Selector finds, and the API
// server's selector syntax accepts it.
func TestSelectorSelectsLabels(t *testing.T) {
	sel, err := labels.Parse(Selector(LabelContainerGroup, "g", LabelRun, ""))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		set  map[string]string
		want bool
	}{
		{Labels(LabelContainerGroup, "g", LabelRun, "r1"), true},
		{Labels(LabelContainerGroup, "g", LabelRun, "r2", "extra", "x"), true},
		{Labels(LabelContainerGroup, "g"), false},
		{Labels(LabelContainerGroup, "other", LabelRun, "r1"), false},
		{map[string]string{LabelContainerGroup: "g", LabelRun: "r1"}, false},
		{map[string]string{LabelManagedBy: "someone-else", LabelContainerGroup: "g", LabelRun: "r1"}, false},
	}
	for _, c := range cases {
		if got := sel.Matches(labels.Set(c.set)); got != c.want {
			t.Errorf("selector %s on %v = %v, want %v", sel, c.set, got, c.want)
		}
	}
}

func TestOwns(t *testing.T) {
	obj := func(l map[string]string) *corev1.Pod { return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: l}} }
	cases := []struct {
		name string
		obj  metav1.Object
		kv   []string
		want bool
	}{
		{"kubeplay's", obj(Labels()), nil, true},
		{"no labels", obj(nil), nil, false},
		{"another manager", obj(map[string]string{LabelManagedBy: "helm", LabelRun: "r1"}), []string{LabelRun, "r1"}, false},
		{"matching pairs", obj(Labels(LabelRun, "r1", LabelContainerGroup, "g")), []string{LabelRun, "r1", LabelContainerGroup, "g"}, true},
		{"one pair differs", obj(Labels(LabelRun, "r1", LabelContainerGroup, "g")), []string{LabelRun, "r1", LabelContainerGroup, "h"}, false},
		{"pair missing", obj(Labels(LabelRun, "r1")), []string{LabelPhase, "p"}, false},
		{"a namespace", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Labels: Labels(LabelRun, "r1")}}, []string{LabelRun, "r1"}, true},
	}
	for _, c := range cases {
		if got := Owns(c.obj, c.kv...); got != c.want {
			t.Errorf("%s: Owns = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestMerge(t *testing.T) {
	if got := Merge(); got != nil {
		t.Errorf("Merge() = %v, want nil", got)
	}
	if got := Merge(nil, map[string]string{}); got != nil {
		t.Errorf("Merge of empty maps = %v, want nil", got)
	}
	a := map[string]string{"x": "1", "y": "1"}
	b := map[string]string{"y": "2", "z": "2"}
	got := Merge(a, nil, b)
	if want := map[string]string{"x": "1", "y": "2", "z": "2"}; !maps.Equal(got, want) {
		t.Errorf("Merge = %v, want %v (later maps win)", got, want)
	}
	got["x"] = "changed"
	if a["x"] != "1" || len(a) != 2 || len(b) != 2 {
		t.Errorf("Merge changed or aliased its inputs: %v %v", a, b)
	}
}

func TestDeleteOptions(t *testing.T) {
	if o := DeleteOptions(""); o.Preconditions != nil {
		t.Errorf("DeleteOptions(\"\") = %+v, want no precondition", o)
	}
	o := DeleteOptions(types.UID("u-1"))
	if o.Preconditions == nil || o.Preconditions.UID == nil || *o.Preconditions.UID != "u-1" || o.Preconditions.ResourceVersion != nil {
		t.Errorf("DeleteOptions(u-1) = %+v, want a UID precondition only", o)
	}
	if o.PropagationPolicy != nil || o.GracePeriodSeconds != nil {
		t.Errorf("DeleteOptions sets more than the precondition: %+v", o)
	}
}

func TestSortedKeys(t *testing.T) {
	if got := SortedKeys(map[string]int{"b": 1, "c": 2, "a": 3}); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("SortedKeys = %v", got)
	}
	if got := SortedKeys(map[string]bool(nil)); len(got) != 0 {
		t.Errorf("SortedKeys(nil) = %v", got)
	}
}

// DeleteOwned deletes only what carries kubeplay's labels and the given
// pairs; a missing object is no error.
func TestDeleteOwned(t *testing.T) {
	ctx := context.Background()
	cm := func(name string, labels map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: labels, UID: types.UID(name)}}
	}
	kube := fake.NewClientset(cm("ours", Labels(LabelContainerGroup, "g")), cm("theirs", nil),
		cm("other-group", Labels(LabelContainerGroup, "h")))
	cms := kube.CoreV1().ConfigMaps("ns")
	for name, want := range map[string]bool{"ours": true, "theirs": false, "other-group": false, "missing": false} {
		deleted, err := DeleteOwned(ctx, cms, name, LabelContainerGroup, "g")
		if err != nil || deleted != want {
			t.Errorf("DeleteOwned(%s) = %v, %v; want %v", name, deleted, err, want)
		}
		_, err = cms.Get(ctx, name, metav1.GetOptions{})
		if gone := apierrors.IsNotFound(err); gone != (want || name == "missing") {
			t.Errorf("%s: gone = %v", name, gone)
		}
	}
	err := &NotOwnedError{Kind: "ConfigMap", Namespace: "ns", Name: "x", Labels: Labels(LabelCredential, "c")}
	if want := "ConfigMap ns/x exists and was not created by kubeplay: it lacks the ownership labels " +
		"app.kubernetes.io/managed-by=kubeplay, kubeplay.io/credential=c"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}
