// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podexec"
)

// namespaceProbe is what the test saw of a run's namespace while it ran.
type namespaceProbe struct {
	err                         error
	namespace, token            string
	nsLabels                    map[string]string
	ownCreate, groupCreateError error
}

// probeRunNamespace waits for the group's run pod, reads the kubeconfig the
// run got from inside the pod, and tries its token against the cluster: it
// may create a ConfigMap in the run's namespace and not in the group's.
func (e *testEnv) probeRunNamespace(ctx context.Context, groupNS string) *namespaceProbe {
	p := &namespaceProbe{}
	w, err := e.kube.CoreV1().Pods(groupNS).Watch(ctx, metav1.ListOptions{LabelSelector: "kubeplay.io/run"})
	if err != nil {
		p.err = err
		return p
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		pod, ok := ev.Object.(*corev1.Pod)
		if !ok || ev.Type == watch.Deleted || pod.Status.Phase != corev1.PodRunning {
			continue
		}
		cfg := acctest.RESTConfig(e.t)
		var out bytes.Buffer
		var kc *clientcmdapi.Config
		// The bundle is unpacked a moment after the pod runs: read until the
		// whole file is there.
		for ctx.Err() == nil {
			out.Reset()
			code, err := podexec.Run(ctx, cfg, e.kube, groupNS, pod.Name, "worker",
				[]string{"sh", "-c", "cat /tmp/kubeplay.*/b/kubeconfig"}, nil, &out, &out)
			if err == nil && code == 0 {
				if kc, err = clientcmd.Load(out.Bytes()); err == nil && kc.Contexts[kc.CurrentContext] != nil {
					break
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		if kc == nil || kc.Contexts[kc.CurrentContext] == nil {
			p.err = fmt.Errorf("no kubeconfig found in run pod %s (%v):\n%s", pod.Name, ctx.Err(), out.String())
			return p
		}
		p.namespace = kc.Contexts[kc.CurrentContext].Namespace
		p.token = kc.AuthInfos[kc.Contexts[kc.CurrentContext].AuthInfo].Token
		if ns, err := e.kube.CoreV1().Namespaces().Get(ctx, p.namespace, metav1.GetOptions{}); err == nil {
			p.nsLabels = ns.Labels
		}
		// The pod cannot reach the API server of this test cluster: use the
		// token from here, against the address the tests use.
		as := rest.AnonymousClientConfig(cfg)
		as.BearerToken = p.token
		kube := kubernetes.NewForConfigOrDie(as)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "made-by-the-run"}}
		_, p.ownCreate = kube.CoreV1().ConfigMaps(p.namespace).Create(ctx, cm, metav1.CreateOptions{})
		_, p.groupCreateError = kube.CoreV1().ConfigMaps(groupNS).Create(ctx, cm, metav1.CreateOptions{})
		return p
	}
	p.err = fmt.Errorf("no run pod ran in %s: %v", groupNS, ctx.Err())
	return p
}

// TestAccRun_namespaceLabel: a node label of type namespace gives the run a
// namespace of its own with an account whose token reaches the playbook in a
// kubeconfig, may manage that namespace and nothing else, never shows in the
// output, and is gone with the namespace when the run ends. A run namespace
// past its deadline, left by a killed provider, is removed by the run.
func TestAccRun_namespaceLabel(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-runns")
	group, label := randName("grp"), randName("nsl")
	cfg := e.runGroup(group, ns) + fmt.Sprintf(`
resource "kubeplay_node_label" "ns" {
  name   = %q
  type   = "namespace"
  labels = { team = "qa" }
}

resource "kubeplay_run" "test" {
  container_group = kubeplay_container_group.g.name
  node_label      = kubeplay_node_label.ns.name
  command         = ["sh", "-c", <<-EOT
    echo "ns=$KUBEPLAY_NAMESPACE"
    grep -q "namespace: $KUBEPLAY_NAMESPACE" "$KUBECONFIG" && [ "$K8S_AUTH_KUBECONFIG" = "$KUBECONFIG" ] && echo kubeconfig-ok
    grep 'token:' "$KUBECONFIG"
    sleep 4
  EOT
  ]
}
`, label)
	orphan := label + "-0000000000000000"
	var probe *namespaceProbe
	done := make(chan struct{})
	nsPattern := regexp.MustCompile(`^` + label + `-[0-9a-f]{16}$`)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{{
			PreConfig: func() {
				// What a killed provider leaves: a run namespace past its deadline.
				_, err := e.kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
					Name: orphan,
					Labels: map[string]string{"app.kubernetes.io/managed-by": "kubeplay", "kubeplay.io/container-group": group,
						"kubeplay.io/run": "0000000000000000"},
					Annotations: map[string]string{"kubeplay.io/deadline": time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)},
				}}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				go func() {
					defer close(done)
					defer cancel()
					probe = e.probeRunNamespace(ctx, ns)
				}()
			},
			Config: cfg,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectUnknownValue(runAddr, tfjsonpath.New("run_namespace")),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("successful")),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("run_namespace"), knownvalue.StringRegexp(nsPattern)),
			},
			Check: resource.ComposeAggregateTestCheckFunc(
				e.checkNoRunPods(ns),
				func(s *terraform.State) error {
					<-done
					if probe.err != nil {
						return probe.err
					}
					runNS := s.RootModule().Resources[runAddr].Primary.Attributes["run_namespace"]
					out := s.RootModule().Resources[runAddr].Primary.Attributes["output"]
					switch {
					case probe.namespace != runNS:
						return fmt.Errorf("the kubeconfig's namespace is %q, run_namespace %q", probe.namespace, runNS)
					case !strings.Contains(out, "ns="+runNS+"\nkubeconfig-ok\n"):
						return fmt.Errorf("the playbook did not see its namespace and kubeconfig:\n%s", out)
					case probe.token == "" || strings.Contains(out, probe.token) || !strings.Contains(out, "token: (sensitive value)"):
						return fmt.Errorf("the token is not redacted from the output:\n%s", out)
					case probe.nsLabels["team"] != "qa" || probe.nsLabels["kubeplay.io/container-group"] != group:
						return fmt.Errorf("the run namespace's labels are %v", probe.nsLabels)
					case probe.ownCreate != nil:
						return fmt.Errorf("the run's token may not create a ConfigMap in its namespace: %w", probe.ownCreate)
					case !apierrors.IsForbidden(probe.groupCreateError):
						return fmt.Errorf("the run's token creating a ConfigMap in the group's namespace: got %v, want 403", probe.groupCreateError)
					}
					if o, err := e.kube.CoreV1().Namespaces().Get(context.Background(), orphan, metav1.GetOptions{}); err == nil && o.DeletionTimestamp == nil {
						return fmt.Errorf("the orphaned run namespace %s was not removed", orphan)
					}
					// Gone, and with it the account the token belonged to.
					if _, err := e.kube.CoreV1().Namespaces().Get(context.Background(), runNS, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
						return fmt.Errorf("namespace %s is still there after the run: %v", runNS, err)
					}
					return nil
				},
			),
		}},
	})
}

// TestAccRun_namespaceLabelKeptOnFailure: with keep_pod_on_failure, a failed
// run of a namespace label keeps its namespace with its pod, and the error
// names both so that the user can look and then clean up.
func TestAccRun_namespaceLabelKeptOnFailure(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-runnskeep")
	group, label := randName("grp"), randName("nsl")
	runNamespaces := func() []corev1.Namespace {
		t.Helper()
		l, err := e.kube.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{
			LabelSelector: "kubeplay.io/container-group=" + group + ",kubeplay.io/run"})
		if err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	t.Cleanup(func() {
		for _, n := range runNamespaces() {
			e.deleteNamespace(n.Name)
		}
	})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: e.runGroup(group, ns) + fmt.Sprintf(`
resource "kubeplay_node_label" "ns" {
  name = %q
  type = "namespace"
}

resource "kubeplay_run" "test" {
  container_group     = kubeplay_container_group.g.name
  node_label          = kubeplay_node_label.ns.name
  keep_pod_on_failure = true
  command             = ["sh", "-c", "echo in $KUBEPLAY_NAMESPACE; exit 3"]
}
`, label),
			// Terraform wraps the detail: any space may be a line break.
			ExpectError: regexp.MustCompile(`exited\s+with\s+code\s+3\s+\(status_reason\s+command_failed\)\.(?s:.*)was\s+kept\s+\(keep_pod_on_failure\)(?s:.*)So\s+was\s+the\s+run's\s+namespace\s+` +
				label + `-[0-9a-f]{16}`),
		}},
	})
	kept := runNamespaces()
	if len(kept) != 1 || kept[0].DeletionTimestamp != nil {
		t.Fatalf("want the run's namespace kept after the failed run, got %d: %v", len(kept), kept)
	}
	pods, err := e.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "kubeplay.io/run"})
	if err != nil || len(pods.Items) != 1 || pods.Items[0].DeletionTimestamp != nil {
		t.Fatalf("want the failed run's pod kept in %s: %v %v", ns, err, pods)
	}
	if pods.Items[0].Labels["kubeplay.io/run"] != kept[0].Labels["kubeplay.io/run"] {
		t.Errorf("the kept pod (run %s) and namespace (run %s) belong to different runs",
			pods.Items[0].Labels["kubeplay.io/run"], kept[0].Labels["kubeplay.io/run"])
	}
}
