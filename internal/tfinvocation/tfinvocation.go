// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

// Package tfinvocation tells which Terraform (or OpenTofu) command started
// the provider, from the command line of its parent process and the
// TF_CLI_ARGS variables it inherited. The plugin protocol does not say
// whether a plan is a destroy's pre-destroy refresh, a plan with
// -refresh=false, or the plan that terraform plan shows; the command line
// does. A provider that Terraform did not start (a debugger, or the
// acceptance tests, which serve it in their own process) gets an
// Invocation that is not Known, and callers must then assume the worst.
package tfinvocation

import (
	"fmt"
	"os"
	"strings"
	"sync"
)

// Invocation is the command that started the provider.
type Invocation struct {
	// Known: the parent process is Terraform or OpenTofu, and its command
	// line could be read.
	Known bool
	// Command is the subcommand: plan, apply, destroy, refresh, import...
	Command string
	// Destroy: terraform destroy, or -destroy.
	Destroy bool
	// NoRefresh: -refresh=false.
	NoRefresh bool
	// RefreshOnly: -refresh-only, or terraform refresh.
	RefreshOnly bool
	// PlanFile: terraform apply of a saved plan.
	PlanFile bool
	// Unknown says why the invocation is not Known; "" when it is.
	Unknown string
}

// valued are the flags of plan and apply that may take their value as the
// next argument (-var a=b), which is not a plan file then.
var valued = map[string]bool{
	"var": true, "var-file": true, "target": true, "replace": true, "out": true, "parallelism": true,
	"lock-timeout": true, "state": true, "state-out": true, "backup": true, "generate-config-out": true,
	"exclude": true, "chdir": true,
}

// Parse reads a Terraform command line (argv[0] the program) and the
// environment variables getenv gives.
func Parse(argv []string, getenv func(string) string) Invocation {
	if len(argv) == 0 || argv[0] == "" {
		return Invocation{Unknown: "the command that started the provider is empty"}
	}
	// Either separator, whatever the OS: C:\tf\terraform.exe on Windows. Case
	// does not matter there and on macOS.
	prog := strings.ToLower(argv[0][strings.LastIndexAny(argv[0], `/\`)+1:])
	if !strings.HasPrefix(prog, "terraform") && !strings.HasPrefix(prog, "tofu") {
		if len(prog) > 40 {
			prog = prog[:40] + "..."
		}
		return Invocation{Unknown: fmt.Sprintf("the program that started the provider, %q, is not terraform or tofu", prog)}
	}
	inv := Invocation{Known: true}
	args := argv[1:]
	i := 0
	for ; i < len(args) && strings.HasPrefix(args[i], "-"); i++ { // global options, such as -chdir=dir
	}
	if i == len(args) {
		return inv
	}
	inv.Command = args[i]
	rest := append(splitArgs(getenv("TF_CLI_ARGS")), splitArgs(getenv("TF_CLI_ARGS_"+inv.Command))...)
	rest = append(rest, args[i+1:]...)
	switch inv.Command {
	case "destroy":
		inv.Destroy = true
	case "refresh":
		inv.RefreshOnly = true
	}
	for j := 0; j < len(rest); j++ {
		a := rest[j]
		if !strings.HasPrefix(a, "-") {
			if inv.Command == "apply" {
				inv.PlanFile = true
			}
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		on := !hasValue || isTrue(value)
		switch name {
		case "destroy":
			inv.Destroy = inv.Destroy || on
		case "refresh":
			inv.NoRefresh = hasValue && !isTrue(value)
		case "refresh-only":
			inv.RefreshOnly = inv.RefreshOnly || on
		default:
			if valued[name] && !hasValue {
				j++ // its value
			}
		}
	}
	return inv
}

func isTrue(v string) bool {
	switch strings.ToLower(v) {
	case "1", "t", "true":
		return true
	}
	return false
}

// splitArgs splits TF_CLI_ARGS as Terraform does: on white space, with
// single and double quotes grouping.
func splitArgs(s string) []string {
	var out []string
	var cur strings.Builder
	var quote rune
	in := false
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if in {
				out, in = append(out, cur.String()), false
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

var (
	once    sync.Once
	current Invocation
)

// Current is the invocation of the parent process, read once.
func Current() Invocation {
	once.Do(func() {
		current = read(os.Getppid(), parentArgs, os.Getenv)
	})
	return current
}

// read is the invocation of process pid, whose command line args reads.
func read(pid int, args func(int) ([]string, error), getenv func(string) string) Invocation {
	argv, err := args(pid)
	if err != nil {
		return Invocation{Unknown: "the command that started the provider could not be read: " + err.Error()}
	}
	return Parse(argv, getenv)
}
