// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package tfinvocation

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	cases := []struct {
		line string
		env  map[string]string
		want Invocation
	}{
		{"terraform plan", nil, Invocation{Known: true, Command: "plan"}},
		{"/usr/local/bin/terraform -chdir=infra plan -out tfplan", nil, Invocation{Known: true, Command: "plan"}},
		{"terraform plan -refresh=false", nil, Invocation{Known: true, Command: "plan", NoRefresh: true}},
		{"terraform plan --refresh=false", nil, Invocation{Known: true, Command: "plan", NoRefresh: true}},
		{"terraform plan -refresh=true", nil, Invocation{Known: true, Command: "plan"}},
		{"terraform plan -destroy", nil, Invocation{Known: true, Command: "plan", Destroy: true}},
		{"terraform destroy -auto-approve", nil, Invocation{Known: true, Command: "destroy", Destroy: true}},
		{"terraform apply -destroy -auto-approve", nil, Invocation{Known: true, Command: "apply", Destroy: true}},
		{"terraform apply tfplan", nil, Invocation{Known: true, Command: "apply", PlanFile: true}},
		{"terraform apply -var a=b -auto-approve", nil, Invocation{Known: true, Command: "apply"}},
		{"terraform apply -var=a=b tfplan", nil, Invocation{Known: true, Command: "apply", PlanFile: true}},
		{"terraform apply -refresh-only", nil, Invocation{Known: true, Command: "apply", RefreshOnly: true}},
		{"terraform refresh", nil, Invocation{Known: true, Command: "refresh", RefreshOnly: true}},
		{"tofu-1.12.6 plan", map[string]string{"TF_CLI_ARGS_plan": "-refresh=false"}, Invocation{Known: true, Command: "plan", NoRefresh: true}},
		{"terraform plan", map[string]string{"TF_CLI_ARGS": `-var 'x=a b' -destroy`}, Invocation{Known: true, Command: "plan", Destroy: true}},
		{"terraform plan", map[string]string{"TF_CLI_ARGS_apply": "-refresh=false"}, Invocation{Known: true, Command: "plan"}},
		{"terraform", nil, Invocation{Known: true}},
		{`C:\hashicorp\Terraform.EXE plan -destroy`, nil, Invocation{Known: true, Command: "plan", Destroy: true}},
		{"/Applications/tofu plan", nil, Invocation{Known: true, Command: "plan"}},
	}
	for _, c := range cases {
		if got := Parse(strings.Fields(c.line), env(c.env)); got != c.want {
			t.Errorf("Parse(%q, %v) = %+v, want %+v", c.line, c.env, got, c.want)
		}
	}
}

// TestParseUnknown: a parent that is not Terraform or OpenTofu (go test, a
// debugger, a wrapper) gives an invocation that is not Known, with a reason.
func TestParseUnknown(t *testing.T) {
	for _, argv := range [][]string{
		{"/tmp/go-build1/provider.test", "-test.run", "X"},
		{"/usr/local/go/bin/go", "test", "./internal/provider"},
		{"dlv", "exec", "terraform-provider-kubeplay"},
		{`C:\Users\ci\go\bin\dlv.exe`, "debug"},
		{"/usr/bin/bash", "-c", "terraform plan"},
		{"tf", "plan"},
		{"/opt/terraform/", "plan"},
		{""},
		{},
	} {
		inv := Parse(argv, func(string) string { return "" })
		if inv.Known || inv.Unknown == "" || inv != (Invocation{Unknown: inv.Unknown}) {
			t.Errorf("Parse(%q) = %+v, want an unknown invocation with a reason", argv, inv)
		}
	}
}

// TestReadUnreadable: a command line that cannot be read is unknown, and
// says why.
func TestReadUnreadable(t *testing.T) {
	inv := read(1, func(int) ([]string, error) { return nil, errors.New("permission denied") }, os.Getenv)
	if inv.Known || !strings.Contains(inv.Unknown, "could not be read: permission denied") {
		t.Errorf("read = %+v, want unknown: could not be read", inv)
	}
	inv = read(1, func(int) ([]string, error) { return []string{"terraform", "plan"}, nil }, func(string) string { return "" })
	if inv != (Invocation{Known: true, Command: "plan"}) {
		t.Errorf("read = %+v, want a known plan", inv)
	}
}

// TestCurrentInTests: the tests' parent is the go tool, not Terraform, so
// that the real invocation fails closed.
func TestCurrentInTests(t *testing.T) {
	if inv := Current(); inv.Known || inv.Unknown == "" {
		t.Errorf("Current() = %+v under go test, want unknown", inv)
	}
}

// TestParentArgs reads this process's own command line, as the parent's is
// read on each OS.
func TestParentArgs(t *testing.T) {
	argv, err := parentArgs(os.Getpid())
	if err != nil || len(argv) == 0 || !strings.HasSuffix(strings.TrimSuffix(argv[0], ".exe"), ".test") {
		t.Errorf("parentArgs(self) = %q, %v; want this test binary", argv, err)
	}
}

func TestSplitArgs(t *testing.T) {
	got := splitArgs(`-var "a=b c" -x  'y z'`)
	want := []string{"-var", "a=b c", "-x", "y z"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("splitArgs = %q, want %q", got, want)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("terraform apply -var a=b tfplan", "-refresh=false")
	f.Add("tofu plan -destroy", `"x`)
	f.Add("terraform\x00plan\x00\x00-var\x00a=b c", "")
	f.Fuzz(func(t *testing.T, line, args string) {
		// As words, and as /proc/PID/cmdline gives them (parentArgs):
		// NUL-separated, so that an argument may be empty or hold spaces.
		for _, argv := range [][]string{strings.Fields(line), strings.Split(line, "\x00")} {
			inv := Parse(argv, func(string) string { return args })
			if !inv.Known && (inv.Unknown == "" || inv != (Invocation{Unknown: inv.Unknown})) {
				t.Fatalf("unknown invocation with fields: %+v", inv)
			}
			if inv.PlanFile && inv.Command != "apply" {
				t.Fatalf("a plan file outside apply: %+v", inv)
			}
		}
	})
}
