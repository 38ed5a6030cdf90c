// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"encoding/json"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
)

// runFilePath accepts a path that bundle.ValidatePath accepts.
func runFilePath() stringCheck {
	return stringCheck{
		desc: "value must be a clean relative path inside the run's bundle",
		check: func(_, s string) (string, string) {
			if err := bundle.ValidatePath(s); err != nil {
				return "Invalid File Path", err.Error() + "."
			}
			return "", ""
		},
	}
}

// envName accepts an environment variable name.
func envName() stringCheck {
	return stringCheck{
		desc: "value must be an environment variable name: letters, digits and _, not starting with a digit",
		check: func(_, s string) (string, string) {
			if err := bundle.ValidateEnvName(s); err != nil {
				return "Invalid Environment Variable Name", err.Error() + "."
			}
			return "", ""
		},
	}
}

// jsonObject accepts a JSON object.
func jsonObject() stringCheck {
	return stringCheck{
		desc: "value must be a JSON object",
		check: func(_, s string) (string, string) {
			var obj map[string]any
			if err := json.Unmarshal([]byte(s), &obj); err != nil || obj == nil {
				return "Invalid Extra Variables", "The value is not a JSON object. Write it with jsonencode({ name = \"value\" })."
			}
			return "", ""
		},
	}
}
