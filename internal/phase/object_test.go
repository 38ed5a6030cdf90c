// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package phase

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestParse(t *testing.T) {
	docs := []string{`
apiVersion: v1
kind: ConfigMap
metadata:
  name: a
  namespace: ns1
data: {k: v}
---
# a comment-only document is ignored
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: skipped
  labels:
    kubeplay.io/apply: "false"
---
apiVersion: airshipit.org/v1alpha1
kind: KubernetesApply
metadata:
  name: kubernetes-apply
  labels:
    airshipit.org/deploy-k8s: "false"
`, `{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ns1"}}`}
	objs, err := Parse(docs)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.String())
	}
	want := []string{"ConfigMap ns1/a", "Deployment ns1/d"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("objects = %v, want %v", got, want)
	}
	if objs[1].Doc != 1 || objs[1].GroupKind.Group != "apps" || objs[1].Version != "v1" {
		t.Errorf("second object = %+v, want documents[1], apps/v1", objs[1].Ref)
	}
	if len(objs[0].Digest) != 16 {
		t.Errorf("digest %q, want 16 hex characters", objs[0].Digest)
	}
}

func TestParseDigestIgnoresFormatting(t *testing.T) {
	a, err := Parse([]string{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {x: '1', y: '2'}\n"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse([]string{"kind: ConfigMap\napiVersion: v1\ndata:\n  y: \"2\"\n  x: \"1\"\nmetadata:\n  name: a\n"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse([]string{"kind: ConfigMap\napiVersion: v1\ndata:\n  y: \"3\"\n  x: \"1\"\nmetadata:\n  name: a\n"})
	if err != nil {
		t.Fatal(err)
	}
	if a[0].Digest != b[0].Digest {
		t.Errorf("same content, different digests: %s, %s", a[0].Digest, b[0].Digest)
	}
	if a[0].Digest == c[0].Digest {
		t.Errorf("different content, same digest %s", a[0].Digest)
	}
}

func TestParseErrors(t *testing.T) {
	cases := map[string]struct {
		docs      []string
		doc, part int
		want      string
	}{
		"no name":  {[]string{"apiVersion: v1\nkind: ConfigMap\n"}, 0, 1, "element 0, YAML document 1: every document needs apiVersion, kind and metadata.name"},
		"no kind":  {[]string{"apiVersion: v1\nmetadata: {name: a}\n"}, 0, 1, `kind ""`},
		"bad yaml": {[]string{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\nkey: [unclosed\n"}, 0, 2, "element 0, YAML document 2"},
		"list":     {[]string{"{}", "apiVersion: v1\nkind: List\nitems: []\nmetadata: {name: l}\n"}, 1, 1, "is a list"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(c.docs)
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Doc != c.doc || pe.Part != c.part || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error = %#v (%v), want a *ParseError at %d/%d containing %q", err, err, c.doc, c.part, c.want)
			}
		})
	}
	_, err := Parse([]string{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n", "{}", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"})
	var dup *DuplicateError
	if !errors.As(err, &dup) || dup.Doc != 2 || dup.First != 0 || dup.Ref.String() != "ConfigMap a" ||
		err.Error() != "element 2: ConfigMap a is also in element 0; each object may appear once in a phase" {
		t.Fatalf("duplicate: %v", err)
	}
}

func TestSkipped(t *testing.T) {
	for labels, want := range map[string]bool{
		"":                                   false,
		"kubeplay.io/apply=true":             false,
		"kubeplay.io/apply=false":            true,
		"airshipit.org/deploy-k8s=false":     true,
		"airshipit.org/deploy-k8s=true":      false,
		"airshipit.org/deploy-k8s=False":     false,
		"kubeplay.io/apply=false,other=true": true,
	} {
		u := &unstructured.Unstructured{}
		l := map[string]string{}
		for _, kv := range strings.Split(labels, ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				l[k] = v
			}
		}
		u.SetLabels(l)
		if got := Skipped(u); got != want {
			t.Errorf("Skipped(%q) = %v, want %v", labels, got, want)
		}
	}
}

func refs(specs ...string) []Ref {
	var out []Ref
	for _, s := range specs {
		p := strings.Split(s, "/")
		out = append(out, NewRef(p[0], "v1", p[1], p[2], p[3]))
	}
	return out
}

func TestSplitAndDeleteOrder(t *testing.T) {
	objs, err := Parse([]string{`
apiVersion: example.com/v1
kind: Widget
metadata: {name: w, namespace: ns}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c, namespace: ns}
---
apiVersion: v1
kind: Namespace
metadata: {name: ns}
`})
	if err != nil {
		t.Fatal(err)
	}
	first, rest := Split(objs)
	names := func(os []Object) (s []string) {
		for _, o := range os {
			s = append(s, o.GroupKind.Kind)
		}
		return s
	}
	if got := names(first); !reflect.DeepEqual(got, []string{"CustomResourceDefinition", "Namespace"}) {
		t.Errorf("first = %v", got)
	}
	if got := names(rest); !reflect.DeepEqual(got, []string{"Widget", "ConfigMap"}) {
		t.Errorf("rest = %v", got)
	}
	var rs []Ref
	for _, o := range objs {
		rs = append(rs, o.Ref)
	}
	waves := DeleteOrder(rs)
	var got [][]string
	for _, w := range waves {
		var kinds []string
		for _, r := range w {
			kinds = append(kinds, r.GroupKind.Kind)
		}
		got = append(got, kinds)
	}
	want := [][]string{{"ConfigMap", "Widget"}, {"CustomResourceDefinition"}, {"Namespace"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("delete waves = %v, want %v", got, want)
	}
	if w := DeleteOrder(refs("/ConfigMap/a/b")); len(w) != 1 {
		t.Errorf("one kind gives %d waves, want 1", len(w))
	}
}

func TestRemovedAndUnion(t *testing.T) {
	old := refs("/ConfigMap/ns/a", "/ConfigMap/ns/b", "apps/Deployment/ns/d")
	cur := refs("/ConfigMap/ns/b", "/ConfigMap/ns/c")
	cur[0].Version = "v2" // the version does not change identity
	got := Removed(old, cur)
	if want := refs("/ConfigMap/ns/a", "apps/Deployment/ns/d"); !reflect.DeepEqual(got, want) {
		t.Errorf("Removed = %v, want %v", got, want)
	}
	u := Union(old, cur)
	if len(u) != 4 || u[1].Version != "v1" {
		t.Errorf("Union = %v, want 4 refs keeping the first of each", u)
	}
}

func TestApplySetID(t *testing.T) {
	// The id kubectl computes for `--applyset=configmap/kubeplay-phase-x -n kubeplay-system`.
	id := ApplySetID("kubeplay-phase-x", "kubeplay-system")
	if !strings.HasPrefix(id, "applyset-") || !strings.HasSuffix(id, "-v1") || len(id) != len("applyset-")+43+len("-v1") {
		t.Fatalf("id %q is not applyset-<43 base64url characters>-v1", id)
	}
	if id == ApplySetID("kubeplay-phase-y", "kubeplay-system") {
		t.Error("different parents share an id")
	}
}

func TestConditionMet(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"status": map[string]any{"phase": "Ready", "replicas": int64(3)},
	}}
	for _, c := range []struct {
		path, value string
		want        bool
	}{
		{"{.status.phase}", "Ready", true},
		{".status.phase", "Ready", true},
		{".status.replicas", "3", true},
		{".status.phase", "Pending", false},
		{".status.missing", "x", false},
	} {
		got, _ := Condition{APIVersion: "example.com/v1", Kind: "Widget", JSONPath: c.path, Value: c.value}.met(u)
		if got != c.want {
			t.Errorf("%s == %q: %v, want %v", c.path, c.value, got, c.want)
		}
	}
	if (Condition{APIVersion: "example.com/v2", Kind: "Widget"}).matches(u) {
		t.Error("a condition for another apiVersion matched")
	}
}

// TestParseStrict: a key set twice is an error, in YAML and in JSON, and
// integers decode as int64, the type unstructured objects hold.
func TestParseStrict(t *testing.T) {
	for name, doc := range map[string]string{
		"yaml":                 "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  k: one\n  k: two\n",
		"json":                 `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "name": "b"}}`,
		"second yaml document": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\napiVersion: v2\n",
	} {
		_, err := Parse([]string{doc})
		var pe *ParseError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), "set twice") {
			t.Errorf("%s: error = %v, want a *ParseError for a key set twice", name, err)
		}
	}
	objs, err := Parse([]string{"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\nspec: {replicas: 3}\n"})
	if err != nil {
		t.Fatal(err)
	}
	if r, _, _ := unstructured.NestedFieldNoCopy(objs[0].U.Object, "spec", "replicas"); r != int64(3) {
		t.Errorf("replicas = %#v, want int64(3)", r)
	}
	_ = objs[0].U.DeepCopy() // panics on a type unstructured does not hold
	for _, doc := range []string{"- a\n- b\n", "just a string\n", "[1, 2]"} {
		if _, err := Parse([]string{doc}); err == nil || !strings.Contains(err.Error(), "must be a mapping") {
			t.Errorf("%q: error = %v, want one saying a document must be a mapping", doc, err)
		}
	}
}

// TestBundleSecrets: a Secret may be in Sensitive, not in Documents, even
// when opted out; its error names the element and document, never data.
func TestBundleSecrets(t *testing.T) {
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"
	secret := "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: ns}\nstringData: {password: hunter2}\n"
	skipped := "apiVersion: v1\nkind: Secret\nmetadata: {name: s, labels: {kubeplay.io/apply: \"false\"}}\ndata: {password: aHVudGVyMg==}\n"
	objs, err := Bundle{Documents: []string{cm}, Sensitive: []string{secret}}.Parse()
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[1].String() != "Secret ns/s" || objs[1].Doc != 1 {
		t.Fatalf("objects = %v, want the ConfigMap then the Secret from element 1", objs)
	}
	for _, docs := range [][]string{{cm, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n---\n" + secret}, {cm, skipped}} {
		_, err := Bundle{Documents: docs}.Parse()
		var se *SecretError
		if !errors.As(err, &se) || se.Doc != 1 || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "aHVudGVyMg") {
			t.Errorf("error = %v, want a *SecretError for element 1 without the data", err)
		}
	}
}
