// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

// Package phase applies a bundle of Kubernetes documents as one airshipctl
// phase: server-side apply in dependency order, readiness by kstatus, an
// ApplySet inventory beside the objects, prune and ordered destroy.
package phase

import (
	"bufio"
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
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/strictyaml"
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

// Bundle is a phase's input. Documents may show in plan output; Sensitive
// never do, so only they may hold Secrets.
type Bundle struct {
	Documents, Sensitive []string
}

// Parse decodes the bundle as Parse does, numbering the elements of
// Sensitive after those of Documents. A Secret in Documents, even one opted
// out of the phase, is a *SecretError.
func (b Bundle) Parse() ([]Object, error) {
	docs := make([]string, 0, len(b.Documents)+len(b.Sensitive))
	docs = append(append(docs, b.Documents...), b.Sensitive...)
	return parse(docs, len(b.Documents))
}

// Parse decodes multi-document YAML or JSON strings into the objects to
// apply, in document order, leaving out opted-out documents. It fails with
// a *ParseError on a document that is not strict YAML or JSON (a key set
// twice in a mapping is an error) or lacks apiVersion, kind or name, and
// with a *DuplicateError on an object written twice.
func Parse(docs []string) ([]Object, error) { return parse(docs, 0) }

// parse decodes docs; the first visible elements may hold no Secret.
func parse(docs []string, visible int) ([]Object, error) {
	var out []Object
	seen := map[object.ObjMetadata]int{}
	for i, d := range docs {
		parts, splitErr := splitDocuments(d)
		for n, m := range parts {
			if len(m) == 0 {
				continue
			}
			u := &unstructured.Unstructured{Object: m}
			if err := checkDocument(u); err != nil {
				return nil, &ParseError{Doc: i, Part: n + 1, Err: err}
			}
			if i < visible && IsSecret(u) {
				return nil, &SecretError{Doc: i, Part: n + 1, Ref: refOf(u)}
			}
			if Skipped(u) {
				continue
			}
			o := Object{Ref: refOf(u), Doc: i, U: u}
			var err error
			if o.Digest, err = digest(m); err != nil {
				return nil, &ParseError{Doc: i, Part: n + 1, Err: err}
			}
			if j, dup := seen[o.ObjMetadata]; dup {
				return nil, &DuplicateError{Ref: o.Ref, Doc: i, First: j}
			}
			seen[o.ObjMetadata] = i
			out = append(out, o)
		}
		if splitErr != nil {
			return nil, &ParseError{Doc: i, Part: len(parts) + 1, Err: splitErr}
		}
	}
	return out, nil
}

// IsSecret reports whether a document is a core Secret.
func IsSecret(u *unstructured.Unstructured) bool {
	gvk := u.GroupVersionKind()
	return gvk.Group == "" && gvk.Kind == "Secret"
}

// splitDocuments decodes one bundle element, a stream of JSON objects or
// of YAML documents separated by ---, strictly. It returns the documents
// decoded before an error, and the error; a null or empty document is nil.
func splitDocuments(text string) ([]map[string]any, error) {
	var out []map[string]any
	if utilyaml.IsJSONBuffer([]byte(text)) {
		dec := json.NewDecoder(strings.NewReader(text))
		for {
			var raw json.RawMessage
			if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
				return out, nil
			} else if err != nil {
				return out, err
			}
			if err := strictyaml.CheckJSON(raw); err != nil {
				return out, err
			}
			m, err := decodeObject(raw)
			if err != nil {
				return out, err
			}
			out = append(out, m)
		}
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(text)))
	for {
		chunk, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		j, err := strictyaml.ToJSON(chunk)
		if err != nil {
			return out, err
		}
		m, err := decodeObject(j)
		if err != nil {
			return out, err
		}
		out = append(out, m)
	}
}

// decodeObject decodes a JSON document into the types unstructured objects
// hold (int64 for integers, never float64).
func decodeObject(j []byte) (map[string]any, error) {
	var v any
	if err := utiljson.Unmarshal(j, &v); err != nil {
		return nil, err
	}
	switch m := v.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		return m, nil
	default:
		return nil, fmt.Errorf("a document must be a mapping of fields such as apiVersion and kind, not a %T", v)
	}
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
