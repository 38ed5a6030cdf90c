// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

// Package phase applies a bundle of Kubernetes documents as one airshipctl
// phase: server-side apply in dependency order, readiness by kstatus, an
// ApplySet inventory beside the objects, prune and ordered destroy.
package phase

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Labels that opt a document out of the phase: kubeplay's own and airship's.
const (
	LabelApply     = "kubeplay.io/apply"
	LabelDeployK8s = "airshipit.org/deploy-k8s"
)

// Ref identifies an object in a cluster.
type Ref struct {
	Group     string `json:"group,omitempty"`
	Version   string `json:"version"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// GroupKind returns the object's group and kind.
func (r Ref) GroupKind() schema.GroupKind { return schema.GroupKind{Group: r.Group, Kind: r.Kind} }

// APIVersion returns group/version, or the version alone for the core group.
func (r Ref) APIVersion() string {
	return schema.GroupVersion{Group: r.Group, Version: r.Version}.String()
}

// Key identifies the object regardless of the API version it was written in.
func (r Ref) Key() string {
	return r.Group + "/" + r.Kind + "/" + r.Namespace + "/" + r.Name
}

// String names the object as a user reads it: Kind namespace/name.
func (r Ref) String() string {
	if r.Namespace == "" {
		return r.Kind + " " + r.Name
	}
	return r.Kind + " " + r.Namespace + "/" + r.Name
}

// Object is one document of a phase.
type Object struct {
	Ref
	// Doc is the index of the documents element it came from.
	Doc int
	// Digest summarizes the document's content as written.
	Digest string
	U      *unstructured.Unstructured
}

func refOf(u *unstructured.Unstructured) Ref {
	gvk := u.GroupVersionKind()
	return Ref{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}
}

// Skipped reports whether a document opts out of being applied.
func Skipped(u *unstructured.Unstructured) bool {
	l := u.GetLabels()
	return l[LabelApply] == "false" || l[LabelDeployK8s] == "false"
}

// Parse decodes multi-document YAML or JSON strings into the objects to
// apply, in document order, leaving out opted-out documents. It fails on a
// document without apiVersion, kind or name, and on duplicates.
func Parse(docs []string) ([]Object, error) {
	var out []Object
	seen := map[string]int{}
	for i, d := range docs {
		dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(d), 4096)
		for n := 1; ; n++ {
			var m map[string]any
			err := dec.Decode(&m)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("documents[%d], YAML document %d: %w", i, n, err)
			}
			if len(m) == 0 {
				continue
			}
			u := &unstructured.Unstructured{Object: m}
			if u.IsList() {
				return nil, fmt.Errorf("documents[%d], YAML document %d: kind %s is a list; write its items as separate documents", i, n, u.GetKind())
			}
			if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
				return nil, fmt.Errorf("documents[%d], YAML document %d: every document needs apiVersion, kind and metadata.name "+
					"(got apiVersion %q, kind %q, name %q)", i, n, u.GetAPIVersion(), u.GetKind(), u.GetName())
			}
			if Skipped(u) {
				continue
			}
			o := Object{Ref: refOf(u), Doc: i, U: u}
			if o.Digest, err = digest(m); err != nil {
				return nil, fmt.Errorf("documents[%d], %s: %w", i, o.Ref, err)
			}
			if j, dup := seen[o.Key()]; dup {
				return nil, fmt.Errorf("documents[%d]: %s is also in documents[%d]; each object may appear once in a phase", i, o.Ref, j)
			}
			seen[o.Key()] = i
			out = append(out, o)
		}
	}
	return out, nil
}

// digest is a short hash of the canonical JSON of a document (maps marshal
// with sorted keys, so formatting and key order do not matter).
func digest(m map[string]any) (string, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8]), nil
}

// stage orders kinds: namespaces and CRDs are applied first and deleted last.
func stage(gk schema.GroupKind) int {
	switch gk {
	case schema.GroupKind{Kind: "Namespace"}:
		return 0
	case schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:
		return 1
	default:
		return 2
	}
}

// Split separates the objects that must exist before the rest (namespaces
// and CRDs) from the rest, keeping document order in each.
func Split(objs []Object) (first, rest []Object) {
	for _, o := range objs {
		if stage(o.GroupKind()) < 2 {
			first = append(first, o)
		} else {
			rest = append(rest, o)
		}
	}
	return first, rest
}

// DeleteOrder groups refs into deletion waves: everything else (custom
// resources included) first, then CRDs, then namespaces last.
func DeleteOrder(refs []Ref) [][]Ref {
	waves := make([][]Ref, 3)
	for _, r := range refs {
		w := 2 - stage(r.GroupKind())
		waves[w] = append(waves[w], r)
	}
	out := waves[:0]
	for _, w := range waves {
		if len(w) > 0 {
			sortRefs(w)
			out = append(out, w)
		}
	}
	return out
}

func sortRefs(r []Ref) { sort.Slice(r, func(i, j int) bool { return r[i].Key() < r[j].Key() }) }

// Removed returns the refs of old that are not in current (by Key).
func Removed(old, current []Ref) []Ref {
	keep := map[string]bool{}
	for _, r := range current {
		keep[r.Key()] = true
	}
	var out []Ref
	for _, r := range old {
		if !keep[r.Key()] {
			out = append(out, r)
		}
	}
	return out
}
