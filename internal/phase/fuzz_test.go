// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package phase

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// FuzzDocuments drives a phase's documents through what plan does with
// them: Bundle.Parse (strict YAML or JSON, Secrets kept out of the visible
// part), the identities and digests the objects attribute shows, the
// ordering and set operations, and a dry run against the fake cluster. No
// input may panic; a parsed visible object is never a Secret; a parse
// error is one of the engine's typed errors.
//
//	go test ./internal/phase -run '^$' -fuzz FuzzDocuments -fuzztime 10m -parallel 1
func FuzzDocuments(f *testing.F) {
	for _, seed := range [][2]string{
		{cm("ns", "a"), ""},
		{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: n}\n", ""},
		{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b"}}`, ""},
		{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, name: b}\n", ""},
		{"apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {p: x}\n", "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n"},
		{"apiVersion: v1\nkind: ConfigMap\nmetadata: null\n", "metadata: {labels: [a]}\n"},
		{"apiVersion: [v1]\nkind: {a: b}\nmetadata: {name: 5, namespace: [], labels: {kubeplay.io/apply: 'false'}}\n", "null\n---\n[]\n"},
		{"apiVersion: v1\nkind: List\nitems: [1]\nmetadata: {name: l}\n", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {replicas: 1e400}\n"},
		{"a: &x [*x]\n", "<<: {a: 1}\na: 2\n"},
		{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {k: " + strings.Repeat("v", 1<<16) + "}\n", "---"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, visible, sensitive string) {
		objs, err := Bundle{Documents: []string{visible}, Sensitive: []string{sensitive}}.Parse()
		if err != nil {
			var (
				pe *ParseError
				de *DuplicateError
				se *SecretError
			)
			if !errors.As(err, &pe) && !errors.As(err, &de) && !errors.As(err, &se) {
				t.Fatalf("untyped parse error %T: %v", err, err)
			}
			_ = err.Error()
			return
		}
		refs := make([]Ref, 0, len(objs))
		known := map[string]string{}
		for _, o := range objs {
			if o.Doc == 0 && IsSecret(o.U) {
				t.Fatalf("a Secret parsed from the visible documents: %s", o.Ref)
			}
			if Skipped(o.U) {
				t.Fatalf("an opted-out document was kept: %s", o.Ref)
			}
			_, _, _, _ = o.String(), o.DocKey(), o.Key(), o.APIVersion()
			b, err := json.Marshal(o.Ref)
			if err != nil {
				t.Fatal(err)
			}
			var back Ref
			if err := json.Unmarshal(b, &back); err != nil || back.Key() != o.Key() {
				t.Fatalf("ref %s does not round-trip through JSON: %s, %v", o.Ref, back, err)
			}
			_ = o.U.DeepCopy()
			refs = append(refs, o.Ref)
			known[o.DocKey()] = o.Digest
		}
		Split(objs)
		DeleteOrder(refs)
		Union(refs, refs)
		Removed(refs, nil)
		if c := Changed(objs, known); len(c) != 0 {
			t.Fatalf("%d objects changed against their own digests", len(c))
		}
		if len(objs) > 0 && len(objs) <= 20 {
			e := newFakeCluster(t).engine("fuzz")
			for _, de := range e.DryRun(context.Background(), objs, false) {
				_ = de.Error()
			}
		}
	})
}
