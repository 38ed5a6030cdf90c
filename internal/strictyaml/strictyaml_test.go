// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package strictyaml

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"sigs.k8s.io/yaml"
	yamlv3 "sigs.k8s.io/yaml/goyaml.v3"
)

func TestToJSON_duplicates(t *testing.T) {
	cases := []struct {
		name, text string
		line       int
		key        string
	}{
		{"plain", "a: 1\nb: 2\na: 3\n", 3, `"a"`},
		{"the key's line, not its block value's", "all:\n  hosts:\n    a: {}\n  hosts:\n    b: {}\n", 4, `"hosts"`},
		{"JSON", "{\"a\": 1,\n \"a\": 2}", 2, `"a"`},
		{"JSON escapes", `{"\u0061": 1, "a": 2}`, 1, `"a"`},
		{"same text, int and string, one JSON key", "1: a\n\"1\": b\n", 2, `"1"`},
		{"same YAML 1.1 value, different text", "y: a\nyes: b\n", 2, `"yes"`},
		{"the same number", "1: a\n1.0: b\n", 2, `"1.0"`},
		{"in a list", "- {a: 1, a: 2}\n", 1, `"a"`},
		{"a merge key set again", "x: &x {b: 1}\ny:\n  <<: *x\n  b: 2\n", 4, `"b"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ToJSON([]byte(c.text))
			var de *DuplicateKeyError
			if !errors.As(err, &de) || de.Line != c.line || de.Key != c.key {
				t.Fatalf("error = %v, want key %s at line %d", err, c.key, c.line)
			}
		})
	}
	for _, ok := range []string{"a: 1\nb: {a: 1}\n", "x: &x {b: 1}\ny:\n  <<: *x\n  c: 2\n", "[{a: 1}, {a: 2}]", ""} {
		if _, err := ToJSON([]byte(ok)); err != nil {
			t.Errorf("ToJSON(%q): %v", ok, err)
		}
	}
}

// A collection key is refused with its line: the YAML 1.1 decoder reads
// "[]: 1" as the empty sequence, dropping the mapping the user wrote.
func TestToJSON_collectionKeys(t *testing.T) {
	for _, c := range []struct {
		text string
		line int
	}{{"[]:", 1}, {"[]: 1\n", 1}, {"{}: x", 1}, {"---\n\n[]: 1\n", 3}} {
		_, err := ToJSON([]byte(c.text))
		var ke *KeyError
		if !errors.As(err, &ke) || ke.Line != c.line {
			t.Errorf("ToJSON(%q) error = %v, want a collection key at line %d", c.text, err, c.line)
		}
	}
	// Elsewhere the decoder refuses them itself.
	for _, text := range []string{"a: 1\n? [b]\n: 2\n", "- x\n- {[]: 1}\n"} {
		if j, err := ToJSON([]byte(text)); err == nil {
			t.Errorf("ToJSON(%q) = %s, want an error", text, j)
		}
	}
}

// The YAML 1.1 decoder ignores a malformed tail after the first value, which
// the YAML 1.2 parser that compares keys refuses: ToJSON must not take the
// unchecked document for one without duplicates.
func TestToJSON_uncheckable(t *testing.T) {
	for _, text := range []string{"{1: a, \"1\": b},\"", "[{a: 1}],\""} {
		if _, err := yaml.YAMLToJSON([]byte(text)); err != nil {
			t.Fatalf("YAMLToJSON(%q) = %v; the case needs the decoder to accept it", text, err)
		}
		j, err := ToJSON([]byte(text))
		if err == nil {
			t.Errorf("ToJSON(%q) = %s, want the YAML 1.2 parser's error", text, j)
		}
	}
}

func TestCheckJSON(t *testing.T) {
	var de *DuplicateKeyError
	if err := CheckJSON([]byte("{\"a\": {\"b\": [1, {\"c\": 1}],\n\"b\": 2}}")); !errors.As(err, &de) || de.Line != 2 || de.Key != `"b"` {
		t.Fatalf("error = %v", err)
	}
	if err := CheckJSON([]byte(`{"a": [{"b": 1}, {"b": 2}], "b": {"a": {"b": 1}}}`)); err != nil {
		t.Fatalf("keys repeated in different objects: %v", err)
	}
	// Validity is the caller's to check: keys are checked up to where the
	// JSON stops being valid.
	if err := CheckJSON([]byte("{\"a\": 1,\n\"a\": ")); !errors.As(err, &de) || de.Line != 2 || de.Key != `"a"` {
		t.Fatalf("duplicate before a truncation: error = %v", err)
	}
	for _, doc := range []string{`{"a": 1, "b"`, `{"a": 1} x`, ""} {
		if err := CheckJSON([]byte(doc)); err != nil {
			t.Fatalf("CheckJSON(%q) = %v, want nil", doc, err)
		}
	}
}

// FuzzToJSON: ToJSON decodes exactly as sigs.k8s.io/yaml does, only
// refusing more (duplicate keys, or a tail only the YAML 1.1 decoder
// ignores), and never panics.
func FuzzToJSON(f *testing.F) {
	for _, s := range []string{"a: 1\na: 2\n", "{\"a\":1,\"a\":2}", "y: 1\nyes: 2\n", "x: &x {b: 1}\ny: {<<: *x, b: 2}\n",
		"- &a [*a]\n", "a: [1, {b: null}]\n", "? [a]\n: b\n", "a: !!binary aGk=\n", "1: a\n1.0: b\n", "\"a\\u0000\": 1\n", "{1: a, \"1\": b},\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		got, err := ToJSON(text)
		want, werr := yaml.YAMLToJSON(text)
		var de *DuplicateKeyError
		var ke *KeyError
		switch {
		case errors.As(err, &de):
			if de.Line < 1 {
				t.Fatalf("duplicate at line %d", de.Line)
			}
		case errors.As(err, &ke):
			// JSON has no collection keys: the decoder errs or drops them.
			if ke.Line < 1 || werr == nil && string(want) != "[]" && string(want) != "{}" && string(want) != "null" {
				t.Fatalf("collection key at line %d refused; YAMLToJSON = %s, %v", ke.Line, want, werr)
			}
		case err != nil && werr == nil:
			// Refusing more than the decoder is right only where the YAML
			// 1.2 parser, which compares the keys, refuses the text too.
			var root yamlv3.Node
			if perr := yamlv3.Unmarshal(text, &root); perr == nil || perr.Error() != err.Error() {
				t.Fatalf("ToJSON error %v, YAMLToJSON accepts it, YAML 1.2 parse error %v", err, perr)
			}
		case err == nil && werr != nil:
			t.Fatalf("ToJSON accepts it, YAMLToJSON error %v", werr)
		case err == nil && string(got) != string(want):
			t.Fatalf("ToJSON = %s, YAMLToJSON = %s", got, want)
		case err == nil && !bytes.ContainsAny(text, "&*<"):
			// Without anchors, aliases or merges, every key written is a
			// key in the JSON: none was lost.
			var root yamlv3.Node
			var v any
			if yamlv3.Unmarshal(text, &root) == nil && json.Unmarshal(got, &v) == nil && writtenKeys(&root) != jsonKeys(v) {
				t.Fatalf("%q: %d keys written, %d in the JSON %s", text, writtenKeys(&root), jsonKeys(v), got)
			}
		}
	})
}

func writtenKeys(n *yamlv3.Node) int {
	c := 0
	if n.Kind == yamlv3.MappingNode {
		c += len(n.Content) / 2
	}
	for _, x := range n.Content {
		c += writtenKeys(x)
	}
	return c
}

func jsonKeys(v any) int {
	c := 0
	switch x := v.(type) {
	case map[string]any:
		c += len(x)
		for _, e := range x {
			c += jsonKeys(e)
		}
	case []any:
		for _, e := range x {
			c += jsonKeys(e)
		}
	}
	return c
}
