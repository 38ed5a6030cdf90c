// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package tfinvocation

import (
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
		{"/tmp/go-build1/provider.test -test.run X", nil, Invocation{}},
		{"terraform", nil, Invocation{Known: true}},
	}
	for _, c := range cases {
		if got := Parse(strings.Fields(c.line), env(c.env)); got != c.want {
			t.Errorf("Parse(%q, %v) = %+v, want %+v", c.line, c.env, got, c.want)
		}
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
			if !inv.Known && inv != (Invocation{}) {
				t.Fatalf("unknown invocation with fields: %+v", inv)
			}
			if inv.PlanFile && inv.Command != "apply" {
				t.Fatalf("a plan file outside apply: %+v", inv)
			}
		}
	})
}
