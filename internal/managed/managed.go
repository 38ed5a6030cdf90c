// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

// Package managed is the one home of the labels, annotations and field
// manager that kubeplay writes on the Kubernetes objects it owns, and of the
// checks that an object is kubeplay's before kubeplay changes or deletes it.
package managed

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	// LabelNode marks a held node's pod (kubeplay_node) and names it.
	LabelNode = "kubeplay.io/node"
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

// NotOwnedError: an object that kubeplay would write or delete exists and
// lacks kubeplay's ownership labels. kubeplay neither adopts nor deletes it.
type NotOwnedError struct {
	Kind, Namespace, Name string
	// Labels are the ownership labels the object lacks (some or all).
	Labels map[string]string
}

func (e *NotOwnedError) Error() string {
	ref := e.Name
	if e.Namespace != "" {
		ref = e.Namespace + "/" + e.Name
	}
	pairs := make([]string, 0, len(e.Labels))
	for _, k := range SortedKeys(e.Labels) {
		pairs = append(pairs, k+"="+e.Labels[k])
	}
	return fmt.Sprintf("%s %s exists and was not created by kubeplay: it lacks the ownership labels %s",
		e.Kind, ref, strings.Join(pairs, ", "))
}

// OwnedClient is what a typed client-go client of one resource offers to
// DeleteOwned, for example kube.CoreV1().Secrets(ns).
type OwnedClient[T metav1.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// DeleteOwned reads the object called name and deletes it only when Owns
// (obj, kv...) holds, with a UID precondition from that read: an object
// that someone replaced between the read and the delete is left alone. It
// reports whether it deleted; a missing object, one kubeplay does not own,
// and one replaced in between are left without error.
func DeleteOwned[T metav1.Object](ctx context.Context, c OwnedClient[T], name string, kv ...string) (bool, error) {
	obj, err := c.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !Owns(obj, kv...) {
		return false, nil
	}
	err = c.Delete(ctx, name, DeleteOptions(obj.GetUID()))
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Gone already, or the UID precondition failed: the name now
		// belongs to another object, which is not the one checked.
		return false, nil
	}
	return err == nil, err
}

// SortedKeys returns m's keys in order, for stable messages.
func SortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
