// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runnamespace

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

func TestName(t *testing.T) {
	const id = "0123456789abcdef"
	for _, label := range []string{"small", strings.Repeat("a", 46), strings.Repeat("b", 63)} {
		n := Name(label, id)
		if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
			t.Errorf("Name(%q) = %q: %v", label, n, errs)
		}
		if !strings.HasSuffix(n, "-"+id) || !strings.HasPrefix(label, strings.TrimSuffix(n, "-"+id)) {
			t.Errorf("Name(%q) = %q: want a prefix of the label and the run id", label, n)
		}
	}
}

func TestObjectsKeepOwnLabels(t *testing.T) {
	deadline := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	ns, objs := Spec{
		Label: "lbl", Group: "grp", RunID: "r1", Deadline: deadline,
		// A label may not take over the labels kubeplay finds its namespaces by.
		Labels:      map[string]string{"team": "qa", "app.kubernetes.io/managed-by": "someone", managed.LabelRun: "forged"},
		Annotations: map[string]string{"note": "x"},
	}.Objects()
	want := map[string]string{"team": "qa", "app.kubernetes.io/managed-by": "kubeplay", managed.LabelRun: "r1",
		"kubeplay.io/container-group": "grp", "kubeplay.io/node-label": "lbl"}
	for k, v := range want {
		if ns.Labels[k] != v {
			t.Errorf("label %s = %q, want %q (all: %v)", k, ns.Labels[k], v, ns.Labels)
		}
	}
	if ns.Name != "lbl-r1" || ns.Annotations["note"] != "x" || ns.Annotations[managed.AnnotationDeadline] != "2026-11-22T10:00:00Z" {
		t.Errorf("namespace %s, annotations %v", ns.Name, ns.Annotations)
	}
	if len(objs) != 3 {
		t.Fatalf("%d objects in the namespace, want a ServiceAccount, a Role and a RoleBinding", len(objs))
	}
	if !Expired(ns, deadline.Add(time.Second)) || Expired(ns, deadline.Add(-time.Second)) {
		t.Error("Expired does not follow the deadline annotation")
	}
	if Expired(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, deadline) {
		t.Error("a namespace without a deadline is never expired")
	}
}
