// Package acctest gives acceptance tests a Kubernetes cluster to run against.
//
// By default that is the repository's local single-node test cluster (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and a real kubelet
// with containerd and runc), started on demand by tools/testcluster/up.sh.
// Set KUBEPLAY_TEST_KUBECONFIG to use any other cluster instead.
package acctest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	// ModulePath is the module whose go.mod marks the repository root.
	ModulePath = "github.com/kubeplay/terraform-provider-kubeplay"

	// EnvKubeconfig names the environment variable that, when set, holds the
	// path of a kubeconfig for an existing cluster; the local test cluster is
	// then neither started nor used.
	EnvKubeconfig = "KUBEPLAY_TEST_KUBECONFIG"

	// EnvImage names the environment variable that overrides TestImage.
	EnvImage = "KUBEPLAY_TEST_IMAGE"

	// EnvCacheDir names the environment variable that overrides the cache
	// directory (default <repo>/.cache) where the test cluster's binaries,
	// images and kubeconfig live. up.sh reads it too.
	EnvCacheDir = "KUBEPLAY_CACHE_DIR"

	// DefaultTestImage is the image the local test cluster imports: Debian
	// bookworm with python3 and ansible-core, command "sleep infinity". It is
	// never pulled from a registry.
	DefaultTestImage = "kubeplay.test/ee:v1"

	// upTimeout bounds one run of up.sh. A cold run takes about 10s, but it
	// builds missing binaries first (minutes on a cold Go build cache).
	upTimeout = 30 * time.Minute
)

// first is the local test cluster, started once per test process.
var first startOnce

// startOnce runs a cluster script once per test process and keeps the
// kubeconfig it wrote, or its error, for every later caller.
type startOnce struct {
	once       sync.Once
	kubeconfig string
	err        error
}

// get runs the script (args) once, logging what as the end of its output,
// and fails t when it failed. It returns the kubeconfig (name, under
// <cache>/testcluster).
func (s *startOnce) get(t testing.TB, what, name string, args ...string) string {
	t.Helper()
	s.once.Do(func() {
		var out string
		s.kubeconfig, out, s.err = runClusterScript(name, args...)
		if s.err == nil {
			t.Logf("%s: %s", what, lastLines(out, 3))
		}
	})
	if s.err != nil {
		t.Fatalf("%s: %v", what, s.err)
	}
	return s.kubeconfig
}

// Kubeconfig returns the path of a kubeconfig with cluster-admin rights for
// acceptance tests.
//
// If KUBEPLAY_TEST_KUBECONFIG is set, its value is returned as is. Otherwise
// the first call in the test process runs <repo>/tools/testcluster/up.sh,
// which starts the local test cluster, or repairs it, or finds it healthy and
// returns at once (the script holds a machine-wide lock, so test binaries of
// several packages may call it concurrently), and the path of the kubeconfig
// it writes, <cache>/testcluster/kubeconfig, is returned. Later calls return
// the same result without running the script again. On failure the test is
// failed with the end of the script's output.
func Kubeconfig(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(EnvKubeconfig); p != "" {
		return p
	}
	return first.get(t, "local test cluster", "kubeconfig", "up.sh")
}

// RESTConfig returns a client configuration for the cluster of Kubeconfig,
// with client-side rate limits raised for tests.
func RESTConfig(t testing.TB) *rest.Config {
	t.Helper()
	return RESTConfigOf(t, Kubeconfig(t))
}

// RESTConfigOf is RESTConfig for the kubeconfig at path (the second
// cluster's, say).
func RESTConfigOf(t testing.TB, path string) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("loading kubeconfig %s: %v", path, err)
	}
	cfg.QPS = 50
	cfg.Burst = 100
	return cfg
}

// Clients skips t unless TF_ACC is set, and returns a client configuration
// and a clientset for the cluster of Kubeconfig: the start of a package's
// acceptance test.
func Clients(t testing.TB) (*rest.Config, kubernetes.Interface) {
	t.Helper()
	if os.Getenv("TF_ACC") == "" {
		t.Skip("acceptance test against the test cluster: set TF_ACC=1 (the cluster is tools/testcluster's, or KUBEPLAY_TEST_KUBECONFIG's)")
	}
	cfg := RESTConfig(t)
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, kube
}

// Kube is Clients without the configuration.
func Kube(t testing.TB) kubernetes.Interface {
	t.Helper()
	_, kube := Clients(t)
	return kube
}

// TestImage returns the container image acceptance tests run: the value of
// KUBEPLAY_TEST_IMAGE, or DefaultTestImage. Pods using it should set
// imagePullPolicy IfNotPresent (the local cluster has no registry).
func TestImage() string {
	if img := os.Getenv(EnvImage); img != "" {
		return img
	}
	return DefaultTestImage
}

// RepoRoot returns the repository's root directory: the nearest directory,
// from the working directory upwards, whose go.mod declares ModulePath.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && modulePath(data) == ModulePath {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of module %s in the working directory or above", ModulePath)
		}
		dir = parent
	}
}

// modulePath returns the module path a go.mod declares ("" if none).
func modulePath(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`)
		}
	}
	return ""
}

// startLocalCluster runs up.sh and returns the kubeconfig path and the
// script's output.
// runClusterScript runs a script of tools/testcluster with args, and
// returns the kubeconfig it wrote under <cache>/testcluster ("" for none).
func runClusterScript(kubeconfigName string, args ...string) (kubeconfig, output string, err error) {
	root, err := RepoRoot()
	if err != nil {
		return "", "", err
	}
	cache := cacheDir(root)
	script := filepath.Join(root, "tools", "testcluster", args[0])

	ctx, cancel := context.WithTimeout(context.Background(), upTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{script}, args[1:]...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), EnvCacheDir+"="+cache)
	var buf bytes.Buffer
	cmd.Stdout = &buf
	cmd.Stderr = &buf
	// The cluster's daemons do not inherit our pipes (up.sh detaches them);
	// this is only a safety net against a hang in Wait.
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	runErr := cmd.Run()
	output = buf.String()
	if runErr != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			runErr = fmt.Errorf("timed out after %s: %w", upTimeout, runErr)
		}
		return "", output, fmt.Errorf("%s failed after %s: %w\n---- output (last lines):\n%s",
			script, time.Since(start).Round(time.Millisecond), runErr, lastLines(output, 40))
	}
	if kubeconfigName == "" {
		return "", output, nil
	}
	kubeconfig = filepath.Join(cache, "testcluster", kubeconfigName)
	if _, err := os.Stat(kubeconfig); err != nil {
		return "", output, fmt.Errorf("%s succeeded but wrote no kubeconfig: %w", script, err)
	}
	return kubeconfig, output, nil
}

// cacheDir is the directory of the test cluster's binaries, images and
// kubeconfigs: $KUBEPLAY_CACHE_DIR, or <repo>/.cache.
func cacheDir(root string) string {
	cache := os.Getenv(EnvCacheDir)
	if cache == "" {
		return filepath.Join(root, ".cache")
	} else if !filepath.IsAbs(cache) {
		return filepath.Join(root, cache)
	}
	return cache
}

// localCluster reports a KUBEPLAY_TEST_KUBECONFIG that is the local test
// cluster's own kubeconfig.
func localCluster() bool {
	root, err := RepoRoot()
	if err != nil {
		return false
	}
	return filepath.Clean(os.Getenv(EnvKubeconfig)) == filepath.Join(cacheDir(root), "testcluster", "kubeconfig")
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// RelistPhase is the pause before the k-th of 10 pod runs timed alone:
// somewhere in the k-th tenth of a second. The kubelet sees a container
// start or stop at its 1 s relist, so a run's time depends on where in that
// second it starts, and runs in a loop of fixed length all start at the same
// phase; the 10 pauses spread them evenly over it (stratified sampling).
func RelistPhase(k int) time.Duration {
	return time.Duration(k)*time.Second/10 + rand.N(time.Second/10)
}
