// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/waitfor"
)

// secondCluster is the harness' second control plane and its node, seen
// from the tests: a client, the node's name, and its kubeconfig with the
// files embedded, as Cluster API writes kubeconfig Secrets.
type secondCluster struct {
	kube       kubernetes.Interface
	node       string
	kubeconfig []byte
}

func newSecondCluster(t *testing.T, e *testEnv) *secondCluster {
	t.Helper()
	acctest.Exclusive(t, acctest.ClusterAPILock)
	b := selfContained(t, acctest.SecondKubeconfig(t))
	cfg, err := clientcmd.RESTConfigFromKubeConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: "kubeplay.test/node=two"})
	if err != nil || len(nodes.Items) != 1 {
		t.Fatalf("the second cluster's node labelled kubeplay.test/node=two: %v (%d found)", err, len(nodes.Items))
	}
	// The provider makes e's catalog namespace on the second cluster too,
	// through the child credential; e deletes it on the first only.
	t.Cleanup(func() {
		err := kube.CoreV1().Namespaces().Delete(context.Background(), e.catalog, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s on the second cluster: %v", e.catalog, err)
		}
	})
	return &secondCluster{kube: kube, node: nodes.Items[0].Name, kubeconfig: b}
}

// twoClusterConfig: a cluster_api credential whose kubeconfig Secret, on
// the first cluster, points at the second; a group on the second cluster
// through it; a label pinned to the second node; and body.
func twoClusterConfig(e *testEnv, names [3]string, secretNS, groupNS, body string) string {
	return clusterAPIConfig(e, names[0], "second", secretNS, "1m") + fmt.Sprintf(`
resource "kubeplay_container_group" "g" {
  name             = %q
  credential       = kubeplay_credential.child.name
  namespace        = %q
  manage_namespace = true
  image            = %q
}

resource "kubeplay_node_label" "two" {
  name          = %q
  image         = %q
  node_selector = { "kubeplay.test/node" = "two" }
}
`, names[1], groupNS, acctest.TestImage(), names[2], acctest.TestImage()) + body
}

// putSecondKubeconfig writes the second cluster's kubeconfig into the
// Secret Cluster API would write for cluster "second", on the first cluster.
func putSecondKubeconfig(t *testing.T, e *testEnv, c *secondCluster, ns string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "second-kubeconfig", Namespace: ns},
		Data: map[string][]byte{"value": c.kubeconfig}}
	if _, err := e.kube.CoreV1().Secrets(ns).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func twoClusterNames() [3]string {
	return [3]string{randName("child"), randName("second"), randName("two")}
}

// TestAccTwoClusters_clusterAPI: a cluster_api credential reads, on the
// first control plane, a kubeconfig Secret that points at the second; a
// run pinned by its label's node_selector to the second cluster's node and
// a phase both go through it, and land on the second cluster only.
func TestAccTwoClusters_clusterAPI(t *testing.T) {
	e := newTestEnv(t)
	c := newSecondCluster(t, e)
	secretNS, groupNS := e.namespace("kp-parent"), randName("kp-child")
	putSecondKubeconfig(t, e, c, secretNS)
	cfg := twoClusterConfig(e, twoClusterNames(), secretNS, groupNS, fmt.Sprintf(`
resource "kubeplay_run" "test" {
  container_group = kubeplay_container_group.g.name
  node_label      = kubeplay_node_label.two.name
  command         = ["sh", "-c", "echo on node two"]
}

resource "kubeplay_phase" "test" {
  name       = %q
  cluster    = kubeplay_credential.child.name
  documents  = [%q]
  depends_on = [kubeplay_container_group.g]
}
`, randName("second"), cmDoc(groupNS, "through-parent", "2")))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			// The managed namespace, with the run's pod and the phase's object, goes.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := waitfor.Gone(ctx, waitfor.Named(c.kube.CoreV1().Namespaces(), groupNS), &corev1.Namespace{}); err != nil {
				return fmt.Errorf("namespace %s on the second cluster after destroy: %w", groupNS, err)
			}
			return nil
		},
		Steps: []resource.TestStep{{
			Config: cfg,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("kubeplay_run.test", tfjsonpath.New("status"), knownvalue.StringExact("successful")),
				statecheck.ExpectKnownValue("kubeplay_run.test", tfjsonpath.New("node_name"), knownvalue.StringExact(c.node)),
				statecheck.ExpectKnownValue("kubeplay_run.test", tfjsonpath.New("output"), knownvalue.StringRegexp(regexp.MustCompile(`on node two`))),
			},
			Check: func(*terraform.State) error {
				if _, err := c.kube.CoreV1().ConfigMaps(groupNS).Get(context.Background(), "through-parent", metav1.GetOptions{}); err != nil {
					return fmt.Errorf("the phase's ConfigMap on the second cluster: %w", err)
				}
				if _, err := e.kube.CoreV1().Namespaces().Get(context.Background(), groupNS, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("namespace %s exists on the first cluster too (err=%v)", groupNS, err)
				}
				return nil
			},
		}},
	})
}

// nodeLostWithin is how long the docs say a run takes to end once its node
// stops (the probe's 15 s and the 10 s delete wait), plus the time
// Terraform takes to report it.
const nodeLostWithin = 45 * time.Second

// TestAccTwoClusters_nodeLost: the kubelet of the node a run is pinned to
// is killed mid-run. The run ends as error naming the node within the time
// the docs state; its pod is gone once the kubelet is back; and the next
// run on the node succeeds.
func TestAccTwoClusters_nodeLost(t *testing.T) {
	e := newDisruptiveTestEnv(t, "stops the second cluster's kubelet, where the clusterctl and two-cluster tests run")
	c := newSecondCluster(t, e)
	secretNS, groupNS := e.namespace("kp-parent"), randName("kp-lost")
	putSecondKubeconfig(t, e, c, secretNS)
	t.Cleanup(func() { acctest.StartSecondKubelet(t) })
	names := twoClusterNames()
	run := func(name, cmd string) string {
		return fmt.Sprintf(`
resource "kubeplay_run" %q {
  container_group = kubeplay_container_group.g.name
  node_label      = kubeplay_node_label.two.name
  command         = ["sh", "-c", %q]
}
`, name, cmd)
	}
	var stopped time.Time
	var pod string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				// The group and label first, so that the watch below has a namespace.
				Config: twoClusterConfig(e, names, secretNS, groupNS, ""),
			},
			{
				PreConfig: func() {
					go func() {
						ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
						defer cancel()
						p, err := runningRunPod(ctx, c.kube, groupNS)
						if err != nil {
							t.Errorf("waiting for the run's pod: %v", err)
							return
						}
						pod = p
						// The pod runs; leave the exec a moment to start the command.
						time.Sleep(3 * time.Second)
						acctest.StopSecondKubelet(t)
						stopped = time.Now()
					}()
				},
				Config:      twoClusterConfig(e, names, secretNS, groupNS, run("lost", "echo started; sleep 600")),
				ExpectError: regexp.MustCompile(`(?s)node\s+` + regexp.QuoteMeta(c.node) + `\s+stopped\s+answering\s+during\s+the\s+run`),
			},
			{
				PreConfig: func() {
					if stopped.IsZero() {
						t.Fatal("the kubelet was never stopped")
					}
					took := time.Since(stopped)
					t.Logf("the run ended within %s of the kubelet's stop", took.Round(time.Second))
					if took > nodeLostWithin {
						t.Errorf("the run ended %s after the kubelet stopped, the docs say within %s", took, nodeLostWithin)
					}
					acctest.StartSecondKubelet(t)
					ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
					defer cancel()
					if err := waitfor.Gone(ctx, waitfor.Named(c.kube.CoreV1().Pods(groupNS), pod), &corev1.Pod{}); err != nil {
						t.Fatalf("pod %s is not gone after the kubelet came back: %v", pod, err)
					}
				},
				Config: twoClusterConfig(e, names, secretNS, groupNS, run("after", "echo after")),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("kubeplay_run.after", tfjsonpath.New("status"), knownvalue.StringExact("successful")),
					statecheck.ExpectKnownValue("kubeplay_run.after", tfjsonpath.New("node_name"), knownvalue.StringExact(c.node)),
				},
			},
		},
	})
}

// runningRunPod waits until a run pod in ns runs, and returns its name.
func runningRunPod(ctx context.Context, kube kubernetes.Interface, ns string) (string, error) {
	var name string
	_, err := waitfor.Until(ctx, runPodsListWatch(kube, ns), &corev1.Pod{}, func(ev watch.Event) (bool, error) {
		p, ok := ev.Object.(*corev1.Pod)
		if ok && p.Status.Phase == corev1.PodRunning {
			name = p.Name
			return true, nil
		}
		return false, nil
	})
	return name, err
}

// TestAccTwoClusters_slices: a run of 2 slices over container_groups on two
// clusters, the first group holding one run at a time: each slice is
// placed on its own, one on each cluster, and the run is both slices'.
func TestAccTwoClusters_slices(t *testing.T) {
	e := newTestEnv(t)
	c := newSecondCluster(t, e)
	secretNS, groupNS, firstNS := e.namespace("kp-parent"), randName("kp-child"), e.namespace("kp-first")
	putSecondKubeconfig(t, e, c, secretNS)
	names := twoClusterNames()
	first := randName("first")
	cfg := twoClusterConfig(e, names, secretNS, groupNS, fmt.Sprintf(`
resource "kubeplay_container_group" "first" {
  name                = %q
  namespace           = %q
  image               = %q
  max_concurrent_runs = 1
}

resource "kubeplay_run" "test" {
  container_groups = [kubeplay_container_group.first.name, kubeplay_container_group.g.name]
  slices           = 2
  inventory        = "h1\nh2\n[all:vars]\nansible_connection=local\nansible_python_interpreter=/usr/bin/python3\n"
  record_all_hosts = true
  playbook         = "- hosts: all\n  gather_facts: false\n  tasks:\n    - command: sleep 5\n"
}
`, first, firstNS, acctest.TestImage()))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkNoRunPods(firstNS),
		Steps: []resource.TestStep{{
			Config: cfg,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("kubeplay_run.test", tfjsonpath.New("status"), knownvalue.StringExact("successful")),
				statecheck.ExpectKnownValue("kubeplay_run.test", tfjsonpath.New("host_count"), knownvalue.Int64Exact(2)),
				statecheck.ExpectKnownValue("kubeplay_run.test", tfjsonpath.New("host_stats"), hostsOf("h1", "h2")),
			},
			Check: func(s *terraform.State) error {
				a := s.RootModule().Resources["kubeplay_run.test"].Primary.Attributes
				groups := map[string]string{a["slice_results.0.container_group"]: a["slice_results.0.node_name"],
					a["slice_results.1.container_group"]: a["slice_results.1.node_name"]}
				if groups[first] == "" || groups[names[1]] != c.node {
					return fmt.Errorf("the slices ran in %v (group: node), want one in %s and one in %s on %s", groups, first, names[1], c.node)
				}
				return e.checkNoRunPods(firstNS)(s)
			},
		}},
	})
}
