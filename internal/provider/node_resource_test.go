// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/echoprovider"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podexec"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runnamespace"
)

const nodeAddr = "kubeplay_node.n"

// nodeConfig is a group, a held node, and three runs in it that log their
// start and end in the pod and print their hostname.
func (e *testEnv) nodeConfig(group, node, ns, round string) string {
	return e.runGroup(group, ns) + fmt.Sprintf(`
resource "kubeplay_node" "n" {
  name            = %q
  container_group = kubeplay_container_group.g.name
}

resource "kubeplay_run" "r" {
  count           = 3
  container_group = kubeplay_container_group.g.name
  node            = kubeplay_node.n.name
  command         = ["sh", "-c", "echo start >> /tmp/turns; sleep 1; echo end >> /tmp/turns; hostname"]
  triggers        = { round = %q }
}
`, node, round)
}

// TestAccNode_heldAcrossRuns: a held node's pod outlives two rounds of three
// runs, which run in it one at a time; its out-of-band deletion is planned
// as a replacement; it imports; a run naming a node that is not there fails
// with the node's name; a destroy deletes the pod.
func TestAccNode_heldAcrossRuns(t *testing.T) {
	e := newTestEnv(t)
	group, node, ns := randName("held"), randName("node"), e.namespace("kp-held")
	var uid types.UID
	podUID := func(record bool) resource.TestCheckFunc {
		return func(*terraform.State) error {
			p, err := e.kube.CoreV1().Pods(ns).Get(context.Background(), node, metav1.GetOptions{})
			if err != nil {
				return err
			}
			switch {
			case record:
				uid = p.UID
			case p.UID != uid:
				return fmt.Errorf("the node's pod was replaced (uid %s, was %s)", p.UID, uid)
			}
			return nil
		}
	}
	// turns checks that the node's runs so far ran one at a time.
	turns := func(n int) resource.TestCheckFunc {
		return func(s *terraform.State) error {
			for i := range 3 {
				a := s.RootModule().Resources[fmt.Sprintf("kubeplay_run.r.%d", i)].Primary.Attributes
				// A run that found the node busy said so before its own output.
				lines := strings.Split(strings.TrimSpace(a["output"]), "\n")
				if a["status"] != "successful" || a["pod_name"] != node || lines[len(lines)-1] != node {
					return fmt.Errorf("run %d: status %s, pod_name %s, output %q", i, a["status"], a["pod_name"], a["output"])
				}
			}
			var out strings.Builder
			code, err := podexec.Run(context.Background(), acctest.RESTConfig(t), e.kube, ns, node, "worker",
				[]string{"cat", "/tmp/turns"}, nil, &out, io.Discard)
			if err != nil || code != 0 {
				return fmt.Errorf("reading the node's log: %d, %v", code, err)
			}
			want := strings.TrimSpace(strings.Repeat("start\nend\n", n))
			if got := strings.TrimSpace(out.String()); got != want {
				return fmt.Errorf("the node's runs overlapped:\n%s", got)
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			if _, err := e.kube.CoreV1().Pods(ns).Get(context.Background(), node, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("the node's pod is left after the destroy: %v", err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: e.nodeConfig(group, node, ns, "1"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(nodeAddr, tfjsonpath.New("status"), knownvalue.StringExact("running")),
					statecheck.ExpectKnownValue(nodeAddr, tfjsonpath.New("namespace"), knownvalue.StringExact(ns)),
					statecheck.ExpectKnownValue(nodeAddr, tfjsonpath.New("node_name"), knownvalue.StringExact("kubeplay-node")),
					statecheck.ExpectKnownValue(nodeAddr, tfjsonpath.New("inventory"), knownvalue.StringExact(fmt.Sprintf(
						"%s ansible_connection=kubernetes.core.kubectl ansible_kubectl_namespace=%s ansible_kubectl_pod=%s ansible_kubectl_container=worker", node, ns, node))),
					statecheck.ExpectKnownValue("kubeplay_run.r[0]", tfjsonpath.New("pod_name"), knownvalue.StringExact(node)),
				},
				Check: resource.ComposeAggregateTestCheckFunc(podUID(true), turns(3)),
			},
			{
				// Three more runs: the same pod.
				Config: e.nodeConfig(group, node, ns, "2"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(nodeAddr, plancheck.ResourceActionNoop),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(podUID(false), turns(6)),
			},
			{
				ResourceName:      nodeAddr,
				ImportState:       true,
				ImportStateId:     group + "/" + node,
				ImportStateVerify: true,
			},
			{
				// Deleted out of band: a refresh finds it gone, the plan replaces it.
				PreConfig: func() {
					if err := e.kube.CoreV1().Pods(ns).Delete(context.Background(), node, metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: e.nodeConfig(group, node, ns, "2"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(nodeAddr, plancheck.ResourceActionReplace),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(nodeAddr, tfjsonpath.New("status"), knownvalue.StringExact("running")),
				},
			},
			{
				Config: e.nodeConfig(group, node, ns, "2") + `
resource "kubeplay_run" "missing" {
  container_group = kubeplay_container_group.g.name
  node            = "no-such-node"
  command         = ["true"]
}
`,
				ExpectError: regexp.MustCompile(`(?s)Held Node Unavailable.*"no-such-node".*is gone`),
			},
			{
				// A pod node has no kubeconfig of its own.
				Config: e.nodeConfig(group, node, ns, "2") + `
ephemeral "kubeplay_node_kubeconfig" "k" {
  node_id = kubeplay_node.n.id
}
`,
				ExpectError: regexp.MustCompile(`(?s)Node Kubeconfig Not Issued.*not\s+a\s+namespace\s+node\s+of\s+the\s+group`),
			},
		},
	})
}

// nodeNamespaceConfig is a group, a namespace node label, a held namespace
// node of it, three runs on it, and the node's kubeconfig echoed into the
// state of the echo provider (the test's only way to see an ephemeral value).
func (e *testEnv) nodeNamespaceConfig(group, label, node, ns, round string) string {
	return e.runGroup(group, ns) + fmt.Sprintf(`
resource "kubeplay_node_label" "ns" {
  name   = %q
  type   = "namespace"
  labels = { team = "qa" }
}

resource "kubeplay_node" "n" {
  name            = %q
  container_group = kubeplay_container_group.g.name
  node_label      = kubeplay_node_label.ns.name
}

resource "kubeplay_run" "r" {
  count           = 3
  container_group = kubeplay_container_group.g.name
  node            = kubeplay_node.n.name
  command         = ["sh", "-c", <<-EOT
    echo "ns=$KUBEPLAY_NAMESPACE"
    grep -q "namespace: $KUBEPLAY_NAMESPACE" "$KUBECONFIG" && [ "$K8S_AUTH_KUBECONFIG" = "$KUBECONFIG" ] && echo kubeconfig-ok
    grep 'token:' "$KUBECONFIG"
    sleep 1
  EOT
  ]
  triggers = { round = %q }
}

ephemeral "kubeplay_node_kubeconfig" "k" {
  node_id = kubeplay_node.n.id
  ttl     = "15m"
}

provider "echo" {
  data = ephemeral.kubeplay_node_kubeconfig.k.kubeconfig
}

resource "echo" "k" {}
`, label, node, round)
}

// TestAccNode_namespace: a held namespace node outlives two rounds of three
// runs, which get its kubeconfig and take turns (never two run pods at
// once); its ephemeral kubeconfig reaches the cluster as the node's account
// from outside and is in neither the plan nor the node's state; it imports;
// its out-of-band deletion is planned as a replacement; a destroy deletes
// it.
func TestAccNode_namespace(t *testing.T) {
	e := newTestEnv(t)
	group, label, node, ns := randName("held"), randName("nsl"), randName("nsnode"), e.namespace("kp-heldns")
	var uid types.UID
	nsUID := func(record bool) resource.TestCheckFunc {
		return func(*terraform.State) error {
			n, err := e.kube.CoreV1().Namespaces().Get(context.Background(), node, metav1.GetOptions{})
			switch {
			case err != nil:
				return err
			case n.Labels["team"] != "qa" || n.Labels["kubeplay.io/node"] != node || n.Labels["kubeplay.io/run"] != "":
				return fmt.Errorf("the node's namespace has labels %v", n.Labels)
			case n.Annotations[runnamespace.AnnotationHolder] != "":
				return fmt.Errorf("a turn is still held after the runs: %q", n.Annotations[runnamespace.AnnotationHolder])
			case record:
				uid = n.UID
			case n.UID != uid:
				return fmt.Errorf("the node's namespace was replaced (uid %s, was %s)", n.UID, uid)
			}
			return nil
		}
	}
	var peak func() runPeaks
	var stop context.CancelFunc
	watchRuns := func() {
		var ctx context.Context
		ctx, stop = context.WithCancel(context.Background())
		peak = e.observeForks(ctx, group, ns)
	}
	// runs checks the round's runs and that they took turns.
	runs := func(s *terraform.State) error {
		stop()
		if p := peak(); p.Live != 1 {
			return fmt.Errorf("%d run pods of the node's runs lived at once, want 1 (turns)", p.Live)
		}
		for i := range 3 {
			a := s.RootModule().Resources[fmt.Sprintf("kubeplay_run.r.%d", i)].Primary.Attributes
			if a["status"] != "successful" || a["run_namespace"] != node ||
				!strings.Contains(a["output"], "ns="+node+"\nkubeconfig-ok\n") || !strings.Contains(a["output"], "token: (sensitive value)") {
				return fmt.Errorf("run %d: status %s, run_namespace %s, output %q", i, a["status"], a["run_namespace"], a["output"])
			}
		}
		return nil
	}
	// outside uses the echoed kubeconfig as a client elsewhere would.
	outside := func(s *terraform.State) error {
		raw := s.RootModule().Resources["echo.k"].Primary.Attributes["data"]
		cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(raw))
		if err != nil {
			return fmt.Errorf("the node's kubeconfig does not load: %w", err)
		}
		as, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "outside-"}}
		if _, err := as.CoreV1().ConfigMaps(node).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("the node's kubeconfig may not create in its namespace: %w", err)
		}
		if _, err := as.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
			return fmt.Errorf("the node's kubeconfig creating in the group's namespace: %v, want 403", err)
		}
		if n := s.RootModule().Resources[nodeAddr].Primary.Attributes; strings.Contains(fmt.Sprint(n), "token") {
			return fmt.Errorf("the node's state holds a token: %v", n)
		}
		return nil
	}
	factories := map[string]func() (tfprotov6.ProviderServer, error){
		"kubeplay": testAccProtoV6ProviderFactories["kubeplay"],
		"echo":     echoprovider.NewProviderServer(),
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_10_0)},
		CheckDestroy: func(*terraform.State) error {
			if _, err := e.kube.CoreV1().Namespaces().Get(context.Background(), node, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("the node's namespace is left after the destroy: %v", err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				PreConfig: watchRuns,
				Config:    e.nodeNamespaceConfig(group, label, node, ns, "1"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectUnknownValue(nodeAddr, tfjsonpath.New("kind")),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(nodeAddr, tfjsonpath.New("kind"), knownvalue.StringExact("namespace")),
					statecheck.ExpectKnownValue(nodeAddr, tfjsonpath.New("namespace"), knownvalue.StringExact(node)),
					statecheck.ExpectKnownValue(nodeAddr, tfjsonpath.New("status"), knownvalue.StringExact("running")),
					statecheck.ExpectKnownValue(nodeAddr, tfjsonpath.New("pod_ip"), knownvalue.Null()),
					statecheck.ExpectKnownValue(nodeAddr, tfjsonpath.New("inventory"), knownvalue.Null()),
					statecheck.ExpectKnownValue("echo.k", tfjsonpath.New("data"), knownvalue.StringRegexp(
						regexp.MustCompile(`(?s)server: `+regexp.QuoteMeta(acctest.RESTConfig(t).Host)+`.*namespace: `+node+`\n.*token: `))),
				},
				Check: resource.ComposeAggregateTestCheckFunc(nsUID(true), runs, outside),
			},
			{
				// Three more runs: the same namespace.
				PreConfig: watchRuns,
				Config:    e.nodeNamespaceConfig(group, label, node, ns, "2"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(nodeAddr, plancheck.ResourceActionNoop),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(nsUID(false), runs),
			},
			{
				ResourceName:      nodeAddr,
				ImportState:       true,
				ImportStateId:     group + "/" + node,
				ImportStateVerify: true,
			},
			{
				// Deleted out of band: a refresh finds it gone, the plan replaces it.
				PreConfig: func() {
					if err := e.kube.CoreV1().Namespaces().Delete(context.Background(), node, metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: e.nodeNamespaceConfig(group, label, node, ns, "2"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(nodeAddr, plancheck.ResourceActionReplace),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(nodeAddr, tfjsonpath.New("status"), knownvalue.StringExact("running")),
				},
			},
		},
	})
}
