// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package managed

import (
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
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
