// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

// Package managed is the one home of the labels, annotations and field
// manager that kubeplay writes on the Kubernetes objects it owns, and of the
// checks that an object is kubeplay's before kubeplay changes or deletes it.
package managed

import (
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// FieldManager is the server-side apply field manager of everything kubeplay writes.
const FieldManager = "kubeplay"

// Labels kubeplay puts on the objects it owns.
const (
	LabelManagedBy      = "app.kubernetes.io/managed-by"
	ManagedByValue      = "kubeplay"
	LabelComponent      = "kubeplay.io/component"
	LabelContainerGroup = "kubeplay.io/container-group"
	LabelNodeLabel      = "kubeplay.io/node-label"
	LabelCredential     = "kubeplay.io/credential"
	LabelRun            = "kubeplay.io/run"
	LabelPhase          = "kubeplay.io/phase"
)

// Values of LabelComponent on catalog objects.
const (
	ComponentCredential     = "credential"
	ComponentContainerGroup = "container-group"
	ComponentNodeLabel      = "node-label"
)

// AnnotationDeadline is the RFC 3339 time after which a run's pod or
// namespace belongs to nobody.
const AnnotationDeadline = "kubeplay.io/deadline"

// Labels returns kubeplay's managed-by label plus the given key/value pairs.
func Labels(kv ...string) map[string]string {
	out := map[string]string{LabelManagedBy: ManagedByValue}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// Selector is the label selector for Labels(kv...). A pair whose value is
// empty selects objects that merely have the key.
func Selector(kv ...string) string {
	terms := []string{LabelManagedBy + "=" + ManagedByValue}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			terms = append(terms, kv[i])
			continue
		}
		terms = append(terms, kv[i]+"="+kv[i+1])
	}
	return strings.Join(terms, ",")
}

// Owns reports whether obj carries kubeplay's managed-by label and every
// given key/value pair.
func Owns(obj metav1.Object, kv ...string) bool {
	l := obj.GetLabels()
	if l[LabelManagedBy] != ManagedByValue {
		return false
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if l[kv[i]] != kv[i+1] {
			return false
		}
	}
	return true
}

// Merge returns the union of label maps, later maps winning; nil when all are empty.
func Merge(ms ...map[string]string) map[string]string {
	var out map[string]string
	for _, m := range ms {
		if len(m) == 0 {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		maps.Copy(out, m)
	}
	return out
}

// DeleteOptions deletes exactly the object that was checked: a UID
// precondition makes the API server refuse when the name now belongs to
// another object.
func DeleteOptions(uid types.UID) metav1.DeleteOptions {
	if uid == "" {
		return metav1.DeleteOptions{}
	}
	return metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
}

// SortedKeys returns m's keys in order, for stable messages.
func SortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
