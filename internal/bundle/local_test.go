// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package bundle

import (
	"bytes"
	"strings"
	"testing"
)

func TestLocalInventory(t *testing.T) {
	for _, c := range []struct {
		local      Local
		inventory  string
		hostVars   string
		validation string // "" when valid
	}{
		{Local{}, DefaultInventory, "", ""},
		{Local{PythonPath: "/usr/bin/python3.11"},
			"localhost ansible_connection=local ansible_python_interpreter=/usr/bin/python3.11\n",
			"ansible_python_interpreter=/usr/bin/python3.11", ""},
		{Local{ShellType: "fish"},
			"localhost ansible_connection=local ansible_python_interpreter=/usr/bin/python3 ansible_shell_type=fish\n",
			"ansible_shell_type=fish", ""},
		{Local{PythonPath: "auto_silent", ShellType: "sh"},
			"localhost ansible_connection=local ansible_python_interpreter=auto_silent ansible_shell_type=sh\n",
			"ansible_python_interpreter=auto_silent ansible_shell_type=sh", ""},
		{Local{PythonPath: "/opt/venv-3.12/bin/python+x"}, "", "", ""},
		{Local{PythonPath: "python3"}, "", "", "must be an absolute path"},
		{Local{PythonPath: "/usr/bin/env python3"}, "", "", "must be an absolute path"},
		{Local{PythonPath: "/usr/bin/python3\nevil=1"}, "", "", "must be an absolute path"},
		{Local{PythonPath: "/usr/bin/python3#x"}, "", "", "must be an absolute path"},
		{Local{PythonPath: "/it's/python"}, "", "", "must be an absolute path"},
		{Local{PythonPath: "/a\u00a0b"}, "", "", "must be an absolute path"},
		{Local{PythonPath: "auto_magic"}, "", "", "must be an absolute path"},
		{Local{ShellType: "bash"}, "", "", "must be one of Ansible's shell plugins: sh, csh, fish, powershell, cmd"},
		{Local{ShellType: "SH"}, "", "", "must be one of"},
	} {
		err := c.local.Validate()
		switch {
		case c.validation == "" && err != nil:
			t.Errorf("%+v: %v", c.local, err)
		case c.validation != "" && (err == nil || !strings.Contains(err.Error(), c.validation)):
			t.Errorf("%+v: error %v, want one containing %q", c.local, err, c.validation)
		}
		if c.inventory != "" {
			if got := c.local.Inventory(); got != c.inventory {
				t.Errorf("%+v: inventory %q, want %q", c.local, got, c.inventory)
			}
			if got := c.local.HostVars(); got != c.hostVars {
				t.Errorf("%+v: host vars %q, want %q", c.local, got, c.hostVars)
			}
		}
	}
}

// TestWriteLocal: the label's settings shape the default inventory only; a
// run's own inventory is shipped as written, and then the settings are not
// checked either, since they are not used.
func TestWriteLocal(t *testing.T) {
	local := Local{PythonPath: "/usr/bin/python3.11", ShellType: "sh"}
	for _, c := range []struct {
		name, inventory, file, want string
	}{
		{"default", "", "inventory", "localhost ansible_connection=local ansible_python_interpreter=/usr/bin/python3.11 ansible_shell_type=sh\n"},
		{"ini", "localhost ansible_connection=local\n", "inventory", "localhost ansible_connection=local\n"},
		{"yaml", "all:\n  hosts:\n    localhost: {ansible_connection: local}\n", "inventory.yml",
			"all:\n  hosts:\n    localhost: {ansible_connection: local}\n"},
	} {
		for _, l := range []Local{local, {PythonPath: "not absolute", ShellType: "bash"}} {
			b := Bundle{Playbook: "- hosts: all\n", Inventory: c.inventory, Local: l, Marker: testMarker}
			var buf bytes.Buffer
			err := b.Write(&buf)
			if l != local {
				if c.inventory == "" && (err == nil || !strings.Contains(err.Error(), "node label: python_path")) {
					t.Errorf("%s: invalid settings in the default inventory: %v", c.name, err)
				}
				if c.inventory != "" && err != nil {
					t.Errorf("%s: settings the run's own inventory does not use: %v", c.name, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			_, all := readTar(t, &buf)
			if got := all[c.file].content; got != c.want {
				t.Errorf("%s: %s holds %q, want %q", c.name, c.file, got, c.want)
			}
		}
	}
}

// FuzzLocalInventory: settings that pass Validate make an inventory of one
// line whose space-separated fields are the host and its variables, each
// value whole (nothing Ansible's INI parser would split, quote or comment
// out); Write refuses exactly the settings Validate refuses.
func FuzzLocalInventory(f *testing.F) {
	f.Add("/usr/bin/python3.11", "sh")
	f.Add("auto", "")
	f.Add("", "powershell")
	f.Add("/usr/bin/env python3", "bash")
	f.Add("/p#q", "sh\n")
	f.Add("/a'b\"c\\d", "cmd")
	f.Fuzz(func(t *testing.T, python, shell string) {
		l := Local{PythonPath: python, ShellType: shell}
		b := Bundle{Playbook: "- hosts: all\n", Local: l, Marker: testMarker}
		var buf bytes.Buffer
		werr := b.Write(&buf)
		if err := l.Validate(); err != nil {
			if werr == nil {
				t.Fatalf("Write took %+v, which Validate refuses: %v", l, err)
			}
			return
		}
		if werr != nil {
			t.Fatalf("Write refused %+v: %v", l, werr)
		}
		inv := l.Inventory()
		want := []string{"localhost", "ansible_connection=local", "ansible_python_interpreter=" + python}
		if python == "" {
			want[2] = "ansible_python_interpreter=" + DefaultPythonPath
		}
		if shell != "" {
			want = append(want, "ansible_shell_type="+shell)
		}
		if strings.Join(want, " ")+"\n" != inv || len(strings.Fields(inv)) != len(want) {
			t.Fatalf("inventory %q, want the fields %q", inv, want)
		}
		if strings.ContainsAny(strings.TrimSuffix(inv, "\n"), "\n\r\t'\"\\#") {
			t.Fatalf("inventory %q holds a character Ansible's INI parser reads specially", inv)
		}
		if _, all := readTar(t, &buf); all["inventory"].content != inv {
			t.Fatalf("the bundle's inventory is %q, want %q", all["inventory"].content, inv)
		}
	})
}
