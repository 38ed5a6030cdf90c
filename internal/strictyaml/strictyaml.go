// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

// Package strictyaml decodes the YAML and JSON users write strictly: a key
// set twice in one mapping is an error with its line, where the usual
// decoders silently keep the last value.
package strictyaml

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"

	"sigs.k8s.io/yaml"
	yamlv2 "sigs.k8s.io/yaml/goyaml.v2"
	yamlv3 "sigs.k8s.io/yaml/goyaml.v3"
)

// DuplicateKeyError: a mapping names the same key twice.
type DuplicateKeyError struct {
	// Line is the 1-based line of the second key.
	Line int
	// Key is the key, quoted.
	Key string
}

func (e *DuplicateKeyError) Error() string {
	return fmt.Sprintf("line %d: key %s is set twice in the same mapping; keys must be unique", e.Line, e.Key)
}

// KeyError: a mapping key is a sequence or a mapping, which JSON cannot
// hold. The YAML 1.1 decoder refuses most such keys, but reads "[]: 1" as
// the empty sequence, silently dropping the mapping.
type KeyError struct {
	// Line is the 1-based line of the key.
	Line int
}

func (e *KeyError) Error() string {
	return fmt.Sprintf("line %d: a mapping key is a sequence or a mapping; keys must be strings, numbers or booleans", e.Line)
}

var dupKeyInError = regexp.MustCompile(`(?m)^\s*line (\d+): key (.*) already set in map$`)

// ToJSON converts one YAML or JSON document to JSON as sigs.k8s.io/yaml's
// YAMLToJSON does, but a key set twice in a mapping is a *DuplicateKeyError.
// Keys compare as they will in JSON, where the YAML 1.1 decoder turns them
// into strings: 1 and "1" are the same key, as are 1 and 1.0, or y and yes
// (both true). A key a merge ("<<") brought in may not be set again, as in
// kubectl's strict decoding. Other errors are the decoders': text the YAML
// 1.1 decoder accepts only by ignoring a malformed tail after the first
// value (an unterminated quote, say) has the YAML 1.2 parser's error, as its
// keys cannot be checked.
func ToJSON(text []byte) ([]byte, error) {
	j, err := yaml.YAMLToJSONStrict(text)
	var dup []string
	if err != nil {
		if dup = dupKeyInError.FindStringSubmatch(err.Error()); dup == nil {
			return nil, err
		}
	}
	de, ke, perr := checkKeys(text)
	switch {
	case de != nil:
		return nil, de
	case ke != nil:
		return nil, ke
	case dup != nil:
		// The decoder's own check found one where the YAML 1.2 parse did not.
		line, _ := strconv.Atoi(dup[1])
		return nil, &DuplicateKeyError{Line: line, Key: dup[2]}
	case perr != nil:
		// Fail closed: an unchecked document is not a document without
		// duplicates.
		return nil, perr
	}
	return j, nil
}

// checkKeys finds the first scalar key written twice in one mapping, with
// the line of the second, or else the first key that is a collection; nil
// when there is none. The error is the YAML 1.2 parser's, when the text does
// not parse.
func checkKeys(text []byte) (*DuplicateKeyError, *KeyError, error) {
	var root yamlv3.Node
	if err := yamlv3.Unmarshal(text, &root); err != nil {
		return nil, nil, err
	}
	var collectionKey *KeyError
	// An explicit stack: documents may nest deeper than is safe to recurse.
	stack := []*yamlv3.Node{&root}
	seen := map[*yamlv3.Node]bool{}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n == nil || seen[n] {
			continue // aliases share nodes
		}
		seen[n] = true
		if n.Kind == yamlv3.MappingNode {
			keys := map[string]bool{}
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i]
				if k.Kind == yamlv3.AliasNode && k.Alias != nil {
					k = k.Alias
				}
				if (k.Kind == yamlv3.SequenceNode || k.Kind == yamlv3.MappingNode) && collectionKey == nil {
					collectionKey = &KeyError{Line: n.Content[i].Line}
				}
				if k.Kind != yamlv3.ScalarNode || k.Tag == "!!merge" {
					continue
				}
				jk := jsonKey(k)
				if keys[jk] {
					return &DuplicateKeyError{Line: n.Content[i].Line, Key: strconv.Quote(k.Value)}, nil, nil
				}
				keys[jk] = true
			}
		}
		if n.Kind == yamlv3.AliasNode {
			stack = append(stack, n.Alias)
		}
		for i := len(n.Content) - 1; i >= 0; i-- {
			stack = append(stack, n.Content[i])
		}
	}
	return nil, collectionKey, nil
}

// jsonKey returns the JSON key sigs.k8s.io/yaml makes of a scalar key: a
// plain scalar resolves as YAML 1.1 does (y is true, 1.0 is the float 1,
// written "1"); anything quoted or explicitly tagged stays as written.
func jsonKey(k *yamlv3.Node) string {
	if k.Style&(yamlv3.TaggedStyle|yamlv3.DoubleQuotedStyle|yamlv3.SingleQuotedStyle|yamlv3.LiteralStyle|yamlv3.FoldedStyle) != 0 {
		return k.Value
	}
	var v any
	if yamlv2.Unmarshal([]byte(k.Value), &v) != nil {
		return k.Value
	}
	switch x := v.(type) {
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case uint64:
		return strconv.FormatUint(x, 10)
	case float64:
		switch f := strconv.FormatFloat(x, 'g', -1, 32); f {
		case "+Inf":
			return ".inf"
		case "-Inf":
			return "-.inf"
		case "NaN":
			return ".nan"
		default:
			return f
		}
	case bool:
		return strconv.FormatBool(x)
	case string:
		return x
	}
	return k.Value
}

// CheckJSON reports the first key set twice in one object of a JSON
// document, with its line. It checks keys only: it is nil when there is no
// duplicate before the end of the document or the point where it stops being
// valid JSON, as callers validate the JSON themselves and report that better
// (see bundle.ValidateVars). It names keys, never values, which may be secret.
func CheckJSON(doc []byte) error {
	type frame struct {
		keys      map[string]bool
		expectKey bool
	}
	var stack []*frame
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	// Token fails at io.EOF or at the first syntax error; both end the check.
	for tok, err := dec.Token(); err == nil; tok, err = dec.Token() {
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{':
				stack = append(stack, &frame{keys: map[string]bool{}, expectKey: true})
			case '[':
				stack = append(stack, &frame{})
			default:
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].keys != nil {
					stack[len(stack)-1].expectKey = true
				}
			}
			continue
		}
		if top == nil || top.keys == nil {
			continue
		}
		if !top.expectKey {
			top.expectKey = true
			continue
		}
		k, _ := tok.(string)
		if top.keys[k] {
			return &DuplicateKeyError{Line: LineAt(doc, dec.InputOffset()), Key: strconv.Quote(k)}
		}
		top.keys[k] = true
		top.expectKey = false
	}
	return nil
}

// LineAt returns the 1-based line of byte offset off in doc.
func LineAt(doc []byte, off int64) int {
	off = min(max(off, 0), int64(len(doc)))
	return 1 + bytes.Count(doc[:off], []byte{'\n'})
}
