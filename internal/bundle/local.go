// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package bundle

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// DefaultPythonPath is the interpreter of the default inventory's localhost
// when the node label sets none.
const DefaultPythonPath = "/usr/bin/python3"

// PythonPathPattern matches the python paths a node label may set: one of
// Ansible's discovery modes, or an absolute path without whitespace,
// control characters, quotes, backslashes or '#'. Ansible splits an INI
// inventory line as a shell would, with '#' starting a comment: such a
// path goes into the line as it is, and is one value.
var PythonPathPattern = regexp.MustCompile(`^(auto|auto_silent|auto_legacy|auto_legacy_silent|/[^\s\p{Z}\p{Cc}'"\\#]*)$`)

// ShellTypes are Ansible's shell plugins, the values of ansible_shell_type.
var ShellTypes = []string{"sh", "csh", "fish", "powershell", "cmd"}

// Local is how Ansible runs on the pod itself: a node label's python_path
// (ansible_python_interpreter) and shell_type (ansible_shell_type). Empty
// fields keep the defaults: DefaultPythonPath, and Ansible's shell.
type Local struct {
	PythonPath, ShellType string
}

// ValidatePythonPath checks a node label's python_path (PythonPathPattern).
func ValidatePythonPath(p string) error {
	if !PythonPathPattern.MatchString(p) {
		return fmt.Errorf("python_path %q must be an absolute path without whitespace, quotes, backslashes or '#' "+
			"(such as /usr/bin/python3.11), or one of auto, auto_silent, auto_legacy and auto_legacy_silent", p)
	}
	return nil
}

// ValidateShellType checks a node label's shell_type (ShellTypes).
func ValidateShellType(s string) error {
	if !slices.Contains(ShellTypes, s) {
		return fmt.Errorf("shell_type %q must be one of Ansible's shell plugins: %s", s, strings.Join(ShellTypes, ", "))
	}
	return nil
}

// Validate checks the set fields. The node label's own checks refuse the
// same values at plan; this guards what the catalog holds.
func (l Local) Validate() error {
	if l.PythonPath != "" {
		if err := ValidatePythonPath(l.PythonPath); err != nil {
			return fmt.Errorf("node label: %w", err)
		}
	}
	if l.ShellType != "" {
		if err := ValidateShellType(l.ShellType); err != nil {
			return fmt.Errorf("node label: %w", err)
		}
	}
	return nil
}

// HostVars are the set fields as INI inventory host variables, for a line
// that makes the pod a host: "" when neither is set.
func (l Local) HostVars() string {
	var vars []string
	if l.PythonPath != "" {
		vars = append(vars, "ansible_python_interpreter="+l.PythonPath)
	}
	if l.ShellType != "" {
		vars = append(vars, "ansible_shell_type="+l.ShellType)
	}
	return strings.Join(vars, " ")
}

// Inventory is the default inventory: localhost in the pod, over a local
// connection, with l's interpreter (DefaultPythonPath when unset) and shell.
func (l Local) Inventory() string {
	if l.PythonPath == "" {
		l.PythonPath = DefaultPythonPath
	}
	return "localhost ansible_connection=local " + l.HostVars() + "\n"
}

// defaultInventory: the run uses the default inventory, which Local shapes.
func (b *Bundle) defaultInventory() bool {
	return b.Inventory == "" && len(b.Inventories) == 0
}
