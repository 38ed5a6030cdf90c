package acctest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// pathWithout returns a PATH of one directory that links every executable of
// PATH's directories but the names in drop (the first of each name wins, as
// in a lookup), so that a script runs as on a machine without those tools.
func pathWithout(t *testing.T, drop ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		entries, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range entries {
			name := e.Name()
			if slices.Contains(drop, name) || strings.HasPrefix(name, "python3.") && slices.Contains(drop, "python3") {
				continue
			}
			target := filepath.Join(d, name)
			if info, err := os.Stat(target); err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
				continue
			}
			if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
				continue
			}
			if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// runScript runs a script of the repository with PATH set to path and the
// harness' cache in a directory of the test's, and returns its output and
// how long it took.
func runScript(t *testing.T, path string, args ...string) (string, time.Duration, error) {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/bash", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "PATH="+path, EnvCacheDir+"="+t.TempDir())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err = cmd.Run()
	return out.String(), time.Since(start), err
}

// TestAccHarnessTools: the first command's harness needs neither kubectl nor
// python3 (the cluster scripts speak to the API server with curl, and the
// quickstart prints its recap with Terraform); it finds curl and the other
// commands it needs in the system's directories whatever the caller's PATH
// (and build.sh installs their packages when they are missing); and a command
// it cannot find stops it at once, naming the command and its package.
func TestAccHarnessTools(t *testing.T) {
	if os.Getenv("TF_ACC") == "" {
		t.Skip("needs the harness' Debian packages installed (make setup-quickstart): set TF_ACC=1")
	}
	Kubeconfig(t) // the cluster is up
	t.Run("withoutKubectlOrPython", func(t *testing.T) {
		// lib.sh puts the system's directories first on PATH; after it, PATH
		// is the one without kubectl and python3 again. These are the checks
		// up.sh makes of a running cluster (not up.sh itself: it restarts a
		// cluster it finds unhealthy, under the suite's tests).
		path := pathWithout(t, "kubectl", "python3", "python")
		out, _, err := runScript(t, path, "-c", `source tools/testcluster/lib.sh && PATH=`+path+` && `+
			`! command -v kubectl && ! command -v python3 && require_commands && `+
			`apiserver_ready && node_ready "" && api_get /api/v1/namespaces/default/serviceaccounts/default`)
		if err != nil || !strings.Contains(out, `"kind":"ServiceAccount"`) {
			t.Fatalf("the cluster's checks without kubectl and python3: %v\n%s", err, out)
		}
	})
	t.Run("curlNotOnCallersPath", func(t *testing.T) {
		// Debian installs curl in /usr/bin, which lib.sh puts on PATH.
		path := pathWithout(t, "curl")
		if out, _, err := runScript(t, path, "tools/testcluster/build.sh", "packages"); err != nil {
			t.Fatalf("build.sh packages without curl on the caller's PATH: %v\n%s", err, out)
		}
	})
	t.Run("missingCommand", func(t *testing.T) {
		out, took, err := runScript(t, os.Getenv("PATH"), "-c", `source tools/testcluster/lib.sh && `+
			`REQUIRED_COMMANDS="$REQUIRED_COMMANDS kubeplay-no-such-tool:kubeplay-tools" && require_commands`)
		if err == nil {
			t.Fatalf("require_commands with a command nowhere succeeded:\n%s", out)
		}
		if !strings.Contains(out, "kubeplay-no-such-tool is not on PATH") || !strings.Contains(out, "apt-get install kubeplay-tools") {
			t.Errorf("require_commands does not name the command and its package:\n%s", out)
		}
		if took > 5*time.Second {
			t.Errorf("require_commands stopped after %s, want under 5 s", took)
		}
	})
	t.Run("scripts", func(t *testing.T) {
		root, err := RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		scripts, err := filepath.Glob(filepath.Join(root, "tools", "testcluster", "*.sh"))
		if err != nil || len(scripts) < 5 {
			t.Fatalf("cluster scripts: %v (%d)", err, len(scripts))
		}
		scripts = append(scripts, filepath.Join(root, "tools", "quickstart", "run.sh"), filepath.Join(root, "GNUmakefile"))
		// A command word: at the start of a line or after a shell operator.
		call := regexp.MustCompile(`(^|[;&|(]|\$\(|\bthen|\bdo|\belse)\s*(kubectl|python3?|jq)\b`)
		for _, s := range scripts {
			b, err := os.ReadFile(s)
			if err != nil {
				t.Fatal(err)
			}
			for i, line := range strings.Split(string(b), "\n") {
				if code, _, _ := strings.Cut(line, "#"); call.MatchString(code) {
					t.Errorf("%s:%d runs a tool the harness does not install: %s", filepath.Base(s), i+1, strings.TrimSpace(line))
				}
			}
		}
	})
}
