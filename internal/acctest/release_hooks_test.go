// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package acctest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestReleaseHooksKeepModuleGraph (#40): .goreleaser.yml's before hooks
// check the module graph and never change it. They run in a module whose
// go.sum holds a line `go mod tidy` would drop: go.mod and go.sum are left
// as they were, and a hook fails, which stops the release; in a tidy module
// every hook succeeds. The module has no dependencies, so nothing is
// downloaded.
func TestReleaseHooksKeepModuleGraph(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, ".goreleaser.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Before struct {
			Hooks []string `json:"hooks"`
		} `json:"before"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf(".goreleaser.yml: %v", err)
	}
	if len(cfg.Before.Hooks) == 0 {
		t.Fatal(".goreleaser.yml has no before hooks: nothing checks that go.mod and go.sum are tidy at release")
	}
	const stale = "example.com/unused v1.0.0/go.mod h1:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n"
	run := func(sum string) (failed []string) {
		dir := t.TempDir()
		files := map[string]string{"go.mod": "module example.com/m\n\ngo 1.26.0\n", "main.go": "package main\n\nfunc main() {}\n"}
		if sum != "" {
			files["go.sum"] = sum
		}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		for _, hook := range cfg.Before.Hooks {
			// GoReleaser splits a hook into words and runs it without a shell.
			args := strings.Fields(hook)
			cmd := exec.Command(args[0], args[1:]...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOTOOLCHAIN=local", "GOWORK=off")
			if out, err := cmd.CombinedOutput(); err != nil {
				failed = append(failed, hook)
				t.Logf("hook %q: %v\n%s", hook, err, out)
			}
			for name, content := range files {
				got, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil || !bytes.Equal(got, []byte(content)) {
					t.Errorf("hook %q changed %s: %q, want %q (err %v)", hook, name, got, content, err)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "go.sum")); sum == "" && err == nil {
				t.Errorf("hook %q wrote a go.sum", hook)
			}
		}
		return failed
	}
	if failed := run(""); len(failed) > 0 {
		t.Errorf("hooks %q fail in a tidy module: a release could not be made", failed)
	}
	if failed := run(stale); len(failed) == 0 {
		t.Error("every hook succeeds in a module that is not tidy: a release would ship a module graph other than the one tested")
	}
}
