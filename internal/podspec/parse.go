// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package podspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	sigsjson "sigs.k8s.io/json"
	yamlv3 "sigs.k8s.io/yaml/goyaml.v3"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/strictyaml"
)

// Document is a parsed pod override: the JSON patch to merge and what the
// document said about where it belongs.
type Document struct {
	// Patch is a strategic merge patch of a Pod, as JSON.
	Patch []byte
	// Namespace is the document's metadata.namespace, if any.
	Namespace string
}

// podKeys are top-level keys that make a document a Pod rather than a PodSpec.
var podKeys = []string{"apiVersion", "kind", "metadata", "spec", "status"}

// ParseOverride parses a Pod or a bare PodSpec written as YAML or JSON, as
// AWX users write pod_spec_override. Errors name the line where they can.
func ParseOverride(text string) (*Document, error) {
	obj, err := parseMap(text, "Pod or PodSpec")
	if err != nil {
		return nil, err
	}
	if obj == nil {
		return nil, nil
	}
	isPod := false
	for _, k := range podKeys {
		if _, ok := obj[k]; ok {
			isPod = true
		}
	}
	prefix, userPrefix := "", "spec."
	if isPod {
		if err := checkKind(obj, "Pod"); err != nil {
			return nil, err
		}
		if _, ok := obj["status"]; ok {
			return nil, fmt.Errorf("line %d: status is set by the cluster, not by a pod override; remove it", lineOf(text, []string{"status"}))
		}
	} else {
		obj = map[string]any{"spec": obj}
		prefix, userPrefix = "spec.", ""
	}
	doc := &Document{}
	if md, ok := obj["metadata"].(map[string]any); ok {
		if n, ok := md["name"]; ok && n != nil {
			return nil, fmt.Errorf("line %d: metadata.name is set; every run names its pod itself (generateName), "+
				"so remove it", lineOf(text, []string{"metadata", "name"}))
		}
		if ns, ok := md["namespace"].(string); ok {
			doc.Namespace = ns
		}
		delete(md, "namespace")
	}
	spec, _ := obj["spec"].(map[string]any)
	if err := nameWorker(spec, userPrefix); err != nil {
		return nil, err
	}
	if err := strictCheck(obj, &corev1.Pod{}, text, prefix); err != nil {
		return nil, err
	}
	doc.Patch, err = json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return doc, nil
}

// ParsePodSpec parses a verbatim PodSpec (a node label's spec).
func ParsePodSpec(text string) (*corev1.PodSpec, error) {
	obj, err := parseMap(text, "PodSpec")
	if err != nil {
		return nil, err
	}
	if obj == nil {
		return nil, fmt.Errorf("the document is empty; write a PodSpec with at least one container")
	}
	for _, k := range []string{"apiVersion", "kind", "metadata", "spec"} {
		if _, ok := obj[k]; ok {
			return nil, fmt.Errorf("line %d: %s is a field of a Pod, not of a PodSpec; write only what goes under the pod's spec "+
				"(containers, volumes, ...)", lineOf(text, []string{k}), k)
		}
	}
	spec := &corev1.PodSpec{}
	if err := strictCheck(obj, spec, text, ""); err != nil {
		return nil, err
	}
	if len(spec.Containers) == 0 {
		return nil, fmt.Errorf("the spec has no containers (%w)", ErrNoContainers)
	}
	for i, c := range spec.Containers {
		if c.Name == "" {
			return nil, fmt.Errorf("line %d: containers[%d] has no name", lineOf(text, []string{"containers", strconv.Itoa(i)}), i)
		}
	}
	return spec, nil
}

// ParseList parses a YAML or JSON list into out (a pointer to a slice), for
// volumes and volume mounts.
func ParseList(text string, out any, what string) error {
	j, err := toJSON(text)
	if err != nil {
		return err
	}
	var v any
	if err := json.Unmarshal(j, &v); err != nil {
		return err
	}
	if _, ok := v.([]any); !ok {
		return fmt.Errorf("the document is %s, not a list of %s", describe(v), what)
	}
	strict, err := sigsjson.UnmarshalStrict(j, out)
	if err != nil {
		return fmt.Errorf("line %d: %s", errorLine(text, err.Error(), ""), cleanJSONError(err))
	}
	if len(strict) > 0 {
		return fmt.Errorf("line %d: %s", errorLine(text, strict[0].Error(), ""), strict[0])
	}
	return nil
}

// toJSON converts one YAML or JSON document to JSON; a key set twice in a
// mapping is a *strictyaml.DuplicateKeyError (with its line) rather than
// the last value silently winning.
func toJSON(text string) ([]byte, error) {
	j, err := strictyaml.ToJSON([]byte(text))
	var de *strictyaml.DuplicateKeyError
	if err != nil && !errors.As(err, &de) {
		return nil, fmt.Errorf("not valid YAML or JSON: %s", cleanYAMLError(err))
	}
	return j, err
}

// parseMap parses one YAML or JSON document that must be a mapping; an empty
// document gives nil.
func parseMap(text, what string) (map[string]any, error) {
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	if n := countDocuments(text); n > 1 {
		return nil, fmt.Errorf("the text holds %d YAML documents; write a single %s", n, what)
	}
	j, err := toJSON(text)
	if err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(j, &v); err != nil {
		return nil, err
	}
	obj, ok := v.(map[string]any)
	if !ok {
		if v == nil {
			return nil, nil
		}
		return nil, fmt.Errorf("the document is %s, not a %s", describe(v), what)
	}
	return obj, nil
}

func checkKind(obj map[string]any, kind string) error {
	k, _ := obj["kind"].(string)
	av, _ := obj["apiVersion"].(string)
	if k != "" && k != kind {
		return fmt.Errorf("the document is a %s, not a %s: write a %s (apiVersion v1, kind %s) or a bare PodSpec", k, kind, kind, kind)
	}
	if av != "" && av != "v1" {
		return fmt.Errorf("apiVersion %q is not the API version of a %s; use v1", av, kind)
	}
	return nil
}

// nameWorker names an unnamed first container "worker", as AWX users write
// overrides whose single container has no name; other containers need names
// to merge.
func nameWorker(spec map[string]any, prefix string) error {
	if spec == nil {
		return nil
	}
	for _, key := range []string{"containers", "initContainers"} {
		list, _ := spec[key].([]any)
		for i, c := range list {
			m, ok := c.(map[string]any)
			if !ok || m["$patch"] != nil {
				continue
			}
			if name, _ := m["name"].(string); name != "" {
				continue
			}
			if key == "containers" && i == 0 {
				m["name"] = WorkerContainer
				continue
			}
			return fmt.Errorf("%s%s[%d] has no name; containers merge by name, and only the first container may omit it "+
				"(it is the %q container)", prefix, key, i, WorkerContainer)
		}
	}
	return nil
}

// strictCheck decodes obj into out rejecting unknown and mistyped fields; the
// error names the field and its line in text. Keys starting with "$" are
// strategic merge directives and are not checked.
func strictCheck(obj map[string]any, out any, text, prefix string) error {
	j, err := json.Marshal(withoutDirectives(obj))
	if err != nil {
		return err
	}
	strict, err := sigsjson.UnmarshalStrict(j, out)
	if err != nil {
		return fmt.Errorf("line %d: %s", errorLine(text, err.Error(), prefix), cleanJSONError(err))
	}
	if len(strict) > 0 {
		return fmt.Errorf("line %d: %s", errorLine(text, strict[0].Error(), prefix), strict[0])
	}
	return nil
}

func withoutDirectives(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			if !strings.HasPrefix(k, "$") {
				m[k] = withoutDirectives(x)
			}
		}
		return m
	case []any:
		l := make([]any, 0, len(t))
		for _, x := range t {
			if m, ok := x.(map[string]any); ok && len(m) == 1 && m["$patch"] != nil {
				continue
			}
			l = append(l, withoutDirectives(x))
		}
		return l
	}
	return v
}

var (
	fieldInError  = regexp.MustCompile(`(?:unknown field|duplicate field) "([^"]+)"`)
	structInError = regexp.MustCompile(`Go struct field [A-Za-z0-9]+\.(\S+) of type (\S+)`)
	yamlPrefix    = regexp.MustCompile(`^error converting YAML to JSON: `)
)

// errorLine finds the line of the field a decoding error names; 1 when it
// cannot tell.
func errorLine(text, msg, prefix string) int {
	var field string
	if m := fieldInError.FindStringSubmatch(msg); m != nil {
		field = m[1]
	} else if m := structInError.FindStringSubmatch(msg); m != nil {
		field = m[1]
	}
	field = strings.TrimPrefix(field, prefix)
	if field == "" {
		return 1
	}
	return lineOf(text, splitPath(field))
}

func cleanJSONError(err error) string {
	msg := err.Error()
	if m := structInError.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("field %s has the wrong type (expected %s): %s", m[1], m[2], msg)
	}
	return msg
}

func cleanYAMLError(err error) string { return yamlPrefix.ReplaceAllString(err.Error(), "") }

// splitPath turns "spec.containers[0].image" into its segments.
func splitPath(p string) []string {
	p = strings.NewReplacer("[", ".", "]", "").Replace(p)
	var out []string
	for _, s := range strings.Split(p, ".") {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// lineOf returns the 1-based line of the deepest node of path found in text.
func lineOf(text string, path []string) int {
	var root yamlv3.Node
	if err := yamlv3.Unmarshal([]byte(text), &root); err != nil || len(root.Content) == 0 {
		return 1
	}
	n := root.Content[0]
	line := n.Line
	for _, seg := range path {
		next, l := child(n, seg)
		if next == nil {
			break
		}
		n, line = next, l
	}
	return line
}

// child returns the node under seg and the line to report for it: the key's
// line for a mapping entry.
func child(n *yamlv3.Node, seg string) (*yamlv3.Node, int) {
	switch n.Kind {
	case yamlv3.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == seg {
				return n.Content[i+1], n.Content[i].Line
			}
		}
	case yamlv3.SequenceNode:
		if i, err := strconv.Atoi(seg); err == nil && i >= 0 && i < len(n.Content) {
			return n.Content[i], n.Content[i].Line
		}
	}
	return nil, 0
}

func countDocuments(text string) int {
	dec := yamlv3.NewDecoder(bytes.NewReader([]byte(text)))
	n := 0
	for {
		var node yamlv3.Node
		if err := dec.Decode(&node); err != nil {
			return max(n, 1)
		}
		n++
	}
}

func describe(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "a list"
	case string:
		return "a string"
	case float64, int64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("a %T", v)
}
