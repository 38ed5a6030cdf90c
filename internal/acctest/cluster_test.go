package acctest

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRepoRoot(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "tools", "testcluster", "up.sh")); err != nil {
		t.Errorf("RepoRoot() = %s, which has no tools/testcluster/up.sh: %v", root, err)
	}
}

func TestModulePath(t *testing.T) {
	for in, want := range map[string]string{
		"module " + ModulePath + "\n\ngo 1.26\n":     ModulePath,
		"// comment\nmodule \"example.com/x\"\n":     "example.com/x",
		"module example.com/x // trailing comment\n": "example.com/x",
		"go 1.26\n": "",
	} {
		if got := modulePath([]byte(in)); got != want {
			t.Errorf("modulePath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestKubeconfigFromEnv(t *testing.T) {
	t.Setenv(EnvKubeconfig, "/some/kubeconfig")
	if got := Kubeconfig(t); got != "/some/kubeconfig" {
		t.Errorf("Kubeconfig() = %q, want the value of %s", got, EnvKubeconfig)
	}
}

func TestTestImage(t *testing.T) {
	t.Setenv(EnvImage, "")
	if got := TestImage(); got != DefaultTestImage {
		t.Errorf("TestImage() = %q, want %q", got, DefaultTestImage)
	}
	t.Setenv(EnvImage, "example.com/img:1")
	if got := TestImage(); got != "example.com/img:1" {
		t.Errorf("TestImage() = %q with %s set", got, EnvImage)
	}
}
