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

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podexec"
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
		},
	})
}
