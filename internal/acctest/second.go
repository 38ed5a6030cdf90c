package acctest

import (
	"fmt"
	"os"
	"testing"
)

// EnvKubeconfig2 names the environment variable that, when set, holds the
// path of a kubeconfig for the second cluster of two-cluster tests; the
// local second cluster is then neither started nor used.
const EnvKubeconfig2 = "KUBEPLAY_TEST_KUBECONFIG2"

// second is the local second cluster, started once per test process.
var second startOnce

// SecondKubeconfig returns the path of a kubeconfig with cluster-admin
// rights for the second cluster: its own control plane, and one node
// labelled kubeplay.test/node=two. Unless KUBEPLAY_TEST_KUBECONFIG2 is set,
// the first call in the test process runs tools/testcluster/cluster2.sh up,
// which starts the local second cluster beside the first, or finds it
// healthy. A test run against a cluster of the user's own
// (KUBEPLAY_TEST_KUBECONFIG) skips unless a second one is named too, since
// the local second cluster hangs on the local first one's bridge.
func SecondKubeconfig(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(EnvKubeconfig2); p != "" {
		return p
	}
	if os.Getenv(EnvKubeconfig) != "" && !localCluster() {
		t.Skipf("two clusters: %s names a cluster of your own; set %s to a second one", EnvKubeconfig, EnvKubeconfig2)
	}
	return second.get(t, "local second cluster", "kubeconfig2", "cluster2.sh", "up")
}

// LocalSecondKubeconfig is SecondKubeconfig for a test that disturbs the
// local second cluster as a whole (restarts its control plane or kubelet):
// it skips when KUBEPLAY_TEST_KUBECONFIG2 names a second cluster of the
// user's own, whose components it cannot restart.
func LocalSecondKubeconfig(t testing.TB) string {
	t.Helper()
	if os.Getenv(EnvKubeconfig2) != "" {
		t.Skipf("disturbs the local second cluster: unset %s to run it there", EnvKubeconfig2)
	}
	return SecondKubeconfig(t)
}

// StopSecondKubelet stops the local second cluster's kubelet, as a node
// whose agent died: containerd and the containers run on.
func StopSecondKubelet(t testing.TB) {
	t.Helper()
	if _, out, err := runClusterScript("", "cluster2.sh", "kubelet", "stop"); err != nil {
		t.Fatalf("stopping the second cluster's kubelet: %v\n%s", err, lastLines(out, 10))
	}
}

// StartSecondKubelet starts the local second cluster's kubelet again and
// waits until its node reports Ready afresh; it does nothing when the
// kubelet runs.
func StartSecondKubelet(t testing.TB) {
	t.Helper()
	if _, out, err := runClusterScript("", "cluster2.sh", "kubelet", "start"); err != nil {
		t.Errorf("starting the second cluster's kubelet: %v\n%s", err, lastLines(out, 10))
	}
}

// RestartSecondAPIServer kills the local second cluster's API server and
// starts it again (cluster2.sh restart, restart.sh in its namespaces), and
// returns once it is ready. It returns an error rather than failing t, so
// that a goroutine of the test's (a nemesis) can call it.
func RestartSecondAPIServer() error {
	if _, _, err := runClusterScript("", "cluster2.sh", "restart", "kube-apiserver"); err != nil {
		return fmt.Errorf("restarting the second cluster's API server: %w", err)
	}
	return nil
}

// RestartSecondKubelet stops the local second cluster's kubelet and starts
// it again, returning once its node reports Ready afresh; an error, as
// RestartSecondAPIServer.
func RestartSecondKubelet() error {
	for _, step := range []string{"stop", "start"} {
		if _, _, err := runClusterScript("", "cluster2.sh", "kubelet", step); err != nil {
			return fmt.Errorf("%s the second cluster's kubelet: %w", step, err)
		}
	}
	return nil
}
