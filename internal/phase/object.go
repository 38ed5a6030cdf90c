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

	"github.com/fluxcd/cli-utils/pkg/object"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Labels that opt a document out of the phase: kubeplay's own and airship's.
const (
	LabelApply     = "kubeplay.io/apply"
	LabelDeployK8s = "airshipit.org/deploy-k8s"
)

// Ref identifies an object in a cluster: kstatus's object.ObjMetadata (the
// identity set operations and the status watcher use) plus the API version
// the object was written in, which the inventory records.
type Ref struct {
	object.ObjMetadata
	Version string
}

// refJSON is how the inventory and private state encode a Ref.
type refJSON struct {
	Group     string `json:"group,omitempty"`
	Version   string `json:"version"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// NewRef returns the Ref of an object of group, version and kind.
func NewRef(group, version, kind, namespace, name string) Ref {
	return Ref{ObjMetadata: object.ObjMetadata{
		GroupKind: schema.GroupKind{Group: group, Kind: kind}, Namespace: namespace, Name: name,
	}, Version: version}
}

// RefFromAPIVersion returns the Ref of an object written with apiVersion
// (group/version, or the version alone for the core group).
func RefFromAPIVersion(apiVersion, kind, namespace, name string) Ref {
	g, v, ok := strings.Cut(apiVersion, "/")
	if !ok {
		g, v = "", apiVersion
	}
	return NewRef(g, v, kind, namespace, name)
}

// MarshalJSON keeps the inventory's encoding of a member.
func (r Ref) MarshalJSON() ([]byte, error) {
	return json.Marshal(refJSON{Group: r.GroupKind.Group, Version: r.Version, Kind: r.GroupKind.Kind, Namespace: r.Namespace, Name: r.Name})
}

// UnmarshalJSON reads the inventory's encoding of a member.
func (r *Ref) UnmarshalJSON(b []byte) error {
	var j refJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*r = NewRef(j.Group, j.Version, j.Kind, j.Namespace, j.Name)
	return nil
}

// APIVersion returns group/version, or the version alone for the core group.
func (r Ref) APIVersion() string {
	return schema.GroupVersion{Group: r.GroupKind.Group, Version: r.Version}.String()
}

// Key identifies the object regardless of the API version it was written
// in; private state keys field digests by it.
func (r Ref) Key() string {
	return r.GroupKind.Group + "/" + r.GroupKind.Kind + "/" + r.Namespace + "/" + r.Name
}

// DocKey identifies the object as written: apiVersion, kind, namespace and
// name as the document gives them.
func (r Ref) DocKey() string {
	return r.APIVersion() + "|" + r.GroupKind.Kind + "|" + r.Namespace + "|" + r.Name
}

// String names the object as a user reads it: Kind namespace/name.
func (r Ref) String() string {
	if r.Namespace == "" {
		return r.GroupKind.Kind + " " + r.Name
	}
	return r.GroupKind.Kind + " " + r.Namespace + "/" + r.Name
}

// Object is one document of a phase.
type Object struct {
	Ref
	// Doc is the index of the bundle element it came from.
	Doc int
	// Digest summarizes the document's content as written.
	Digest string
	U      *unstructured.Unstructured
}

func refOf(u *unstructured.Unstructured) Ref {
	gvk := u.GroupVersionKind()
	return NewRef(gvk.Group, gvk.Version, gvk.Kind, u.GetNamespace(), u.GetName())
}

// Skipped reports whether a document opts out of being applied.
func Skipped(u *unstructured.Unstructured) bool {
	l := u.GetLabels()
	return l[LabelApply] == "false" || l[LabelDeployK8s] == "false"
}

// Parse decodes multi-document YAML or JSON strings into the objects to
// apply, in document order, leaving out opted-out documents. It fails with
// a *ParseError on a document without apiVersion, kind or name, and with a
// *DuplicateError on an object written twice.
func Parse(docs []string) ([]Object, error) {
	var out []Object
	seen := map[object.ObjMetadata]int{}
	for i, d := range docs {
		dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(d), 4096)
		for n := 1; ; n++ {
			var m map[string]any
			err := dec.Decode(&m)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, &ParseError{Doc: i, Part: n, Err: err}
			}
			if len(m) == 0 {
				continue
			}
			u := &unstructured.Unstructured{Object: m}
			if err := checkDocument(u); err != nil {
				return nil, &ParseError{Doc: i, Part: n, Err: err}
			}
			if Skipped(u) {
				continue
			}
			o := Object{Ref: refOf(u), Doc: i, U: u}
			if o.Digest, err = digest(m); err != nil {
				return nil, &ParseError{Doc: i, Part: n, Err: err}
			}
			if j, dup := seen[o.ObjMetadata]; dup {
				return nil, &DuplicateError{Ref: o.Ref, Doc: i, First: j}
			}
			seen[o.ObjMetadata] = i
			out = append(out, o)
		}
	}
	return out, nil
}

func checkDocument(u *unstructured.Unstructured) error {
	if u.IsList() {
		return fmt.Errorf("kind %s is a list; write its items as separate documents", u.GetKind())
	}
	if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
		return fmt.Errorf("every document needs apiVersion, kind and metadata.name (got apiVersion %q, kind %q, name %q)",
			u.GetAPIVersion(), u.GetKind(), u.GetName())
	}
	return nil
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
		if stage(o.GroupKind) < 2 {
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
		w := 2 - stage(r.GroupKind)
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

// IDs returns the identities of refs, in order.
func IDs(refs []Ref) object.ObjMetadataSet {
	out := make(object.ObjMetadataSet, len(refs))
	for i, r := range refs {
		out[i] = r.ObjMetadata
	}
	return out
}

// pick returns, for each id, the first ref of the lists with that identity.
func pick(ids object.ObjMetadataSet, lists ...[]Ref) []Ref {
	byID := make(map[object.ObjMetadata]Ref, len(ids))
	for i := len(lists) - 1; i >= 0; i-- {
		for j := len(lists[i]) - 1; j >= 0; j-- {
			byID[lists[i][j].ObjMetadata] = lists[i][j]
		}
	}
	out := make([]Ref, 0, len(ids))
	for _, id := range ids {
		out = append(out, byID[id])
	}
	return out
}

// Union merges refs by identity (object.ObjMetadataSet.Union), keeping the
// first Ref, and so the first version, of each object.
func Union(a, b []Ref) []Ref { return pick(IDs(a).Union(IDs(b)), a, b) }

// Removed returns the refs of old that are not in current, by identity
// (object.ObjMetadataSet.Diff): the version does not matter.
func Removed(old, current []Ref) []Ref { return pick(IDs(old).Diff(IDs(current)), old) }
