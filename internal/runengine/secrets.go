// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"encoding/json"
	"fmt"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
)

// Secrets returns the values to redact from a run's output: the string and
// number values of its secret variables (the whole document when it is not
// JSON) and its secret environment's values.
func Secrets(b bundle.Bundle) []string {
	var out []string
	if len(b.SecretVars) > 0 {
		out = append(out, jsonLeaves(string(b.SecretVars))...)
	}
	for _, v := range b.SecretEnv {
		out = append(out, v)
	}
	return out
}

// jsonLeaves returns the string and number values of a JSON document.
func jsonLeaves(doc string) []string {
	var v any
	if json.Unmarshal([]byte(doc), &v) != nil {
		return []string{doc}
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case string:
			out = append(out, x)
		case float64:
			out = append(out, fmt.Sprint(x))
		}
	}
	walk(v)
	return out
}
