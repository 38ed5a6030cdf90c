// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/config"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
)

// podWatcher sees the run pods created in a namespace and does, per pod in
// order of creation, what its script says.
type podWatcher struct {
	mu      sync.Mutex
	created []string
	errs    []error
}

// watchRunPods starts a podWatcher on ns until the test ends.
func (e *testEnv) watchRunPods(ns string, script ...func(pod string) error) *podWatcher {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := e.kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "kubeplay.io/run"})
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	pw := &podWatcher{}
	done := make(chan struct{})
	e.t.Cleanup(func() { cancel(); w.Stop(); <-done })
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type != watch.Added {
				continue
			}
			pw.mu.Lock()
			n := len(pw.created)
			pw.created = append(pw.created, p.Name)
			pw.mu.Unlock()
			if n < len(script) {
				if err := script[n](p.Name); err != nil {
					pw.mu.Lock()
					pw.errs = append(pw.errs, fmt.Errorf("pod %s: %w", p.Name, err))
					pw.mu.Unlock()
				}
			}
		}
	}()
	return pw
}

// check fails unless the watcher saw want pods, the last being the run's,
// and its script did all it had to.
func (pw *podWatcher) check(want int) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		pw.mu.Lock()
		defer pw.mu.Unlock()
		if len(pw.errs) > 0 {
			return fmt.Errorf("the test's pod watcher failed: %v", pw.errs)
		}
		if len(pw.created) != want {
			return fmt.Errorf("%d run pods were created (%v), want %d", len(pw.created), pw.created, want)
		}
		if got := s.RootModule().Resources[runAddr].Primary.Attributes["pod_name"]; got != pw.created[want-1] {
			return fmt.Errorf("pod_name %q, want the last pod created, %q", got, pw.created[want-1])
		}
		return nil
	}
}

// TestAccRun_launchRetried: the first pod of a run is deleted while it
// waits, before it ran; the run launches a fresh pod and succeeds, recording
// two attempts and logging the retry. The group's pods carry a scheduling
// gate, so that the first stays Pending until the test deletes it, and the
// second until the test lifts its gate: no race with the kubelet.
func TestAccRun_launchRetried(t *testing.T) {
	e := newProcessWideTestEnv(t, "captures Terraform and provider logs through TF_LOG and TF_ACC_LOG_PATH, which are process-wide")
	logFile := filepath.Join(t.TempDir(), "terraform.log")
	t.Setenv("TF_LOG", "warn")
	t.Setenv("TF_ACC_LOG_PATH", logFile)
	ns := e.namespace("kp-runretry")
	cfg := e.providerBlock() + gatedGroup(randName("grp"), ns) + `
resource "kubeplay_run" "test" {
  container_group = kubeplay_container_group.g.name
  command         = ["sh", "-c", "echo second pod"]
}
`
	pods := e.kube.CoreV1().Pods(ns)
	var pw *podWatcher
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{{
			PreConfig: func() {
				pw = e.watchRunPods(ns,
					func(pod string) error {
						return pods.Delete(context.Background(), pod, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
					},
					e.ungate(ns))
			},
			Config: cfg,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("successful")),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("output"), knownvalue.StringExact("second pod\n")),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("launch_attempts"), knownvalue.Int64Exact(2)),
			},
			Check: resource.ComposeAggregateTestCheckFunc(
				func(s *terraform.State) error { return pw.check(2)(s) },
				e.checkNoRunPods(ns),
			),
		}},
	})
	logText, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logText), "run pod launch failed; retrying with a fresh pod") ||
		!strings.Contains(string(logText), "was deleted before it ran") {
		t.Fatalf("the log %s does not report the retry and its reason", logFile)
	}
}

// TestAccRun_launchNotRetried: a missing image cannot pass, so a group
// with launch_retries = 3 launches one pod only.
func TestAccRun_launchNotRetried(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-runnoretry")
	cfg := e.providerBlock() + fmt.Sprintf(`
resource "kubeplay_container_group" "g" {
  name           = %q
  namespace      = %q
  image          = "kubeplay.test/missing:v1"
  launch_retries = 3
}

resource "kubeplay_run" "test" {
  container_group = kubeplay_container_group.g.name
  command         = ["true"]
  ignore_failure  = true
}
`, randName("grp"), ns)
	var pw *podWatcher
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{{
			PreConfig: func() { pw = e.watchRunPods(ns) },
			Config:    cfg,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("error")),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("launch_attempts"), knownvalue.Int64Exact(1)),
			},
			Check: resource.ComposeAggregateTestCheckFunc(
				func(s *terraform.State) error { return pw.check(1)(s) },
				e.checkNoRunPods(ns),
			),
		}},
	})
}

// TestAccRun_renderedPodWithNewCredential: a run whose group uses a
// credential created in the same plan shows its rendered_pod at plan: for
// a provider credential named by its id, and for a bearer token one named
// by a value known only at apply. Rendering needs no cluster, only the dry
// run does.
func TestAccRun_renderedPodWithNewCredential(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-runnewcred")
	host, ca := e.clusterHostAndCA()
	token := e.token(ns, "runner", "edit")
	cfg := e.providerBlock() + tokenVar + fmt.Sprintf(`
resource "kubeplay_credential" "own" {
  name = %[1]q
  kind = "provider"
}

resource "kubeplay_credential" "token" {
  name            = %[2]q
  kind            = "bearer_token"
  host            = %[3]q
  bearer_token_wo = var.token
  ca_cert         = %[4]q
  namespace       = %[5]q
}

resource "kubeplay_container_group" "own" {
  name       = %[6]q
  namespace  = %[5]q
  image      = %[8]q
  labels     = { via = "own" }
  credential = kubeplay_credential.own.id
}

# Known only at apply, as any computed value would be.
resource "terraform_data" "token" {
  input = kubeplay_credential.token.name
}

resource "kubeplay_container_group" "token" {
  name       = %[7]q
  namespace  = %[5]q
  image      = %[8]q
  labels     = { via = "token" }
  credential = terraform_data.token.output
}

resource "kubeplay_run" "test" {
  container_group = kubeplay_container_group.own.name
  command         = ["sh", "-c", "echo own"]
}

resource "kubeplay_run" "token" {
  container_group = kubeplay_container_group.token.name
  command         = ["sh", "-c", "echo token"]
}
`, randName("own"), randName("tok"), host, ca, ns, randName("grp"), randName("grp"), acctest.TestImage())
	rendered := func(via string) knownvalue.Check {
		return knownvalue.StringRegexp(expectError(`(?s)via: ` + via + `\n.*image: ` + regexp.QuoteMeta(acctest.TestImage())))
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		TerraformVersionChecks:   writeOnlyVersions,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{{
			Config:          cfg,
			ConfigVariables: config.Variables{"token": config.StringVariable(token)},
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction("kubeplay_credential.own", plancheck.ResourceActionCreate),
				plancheck.ExpectKnownValue(runAddr, tfjsonpath.New("rendered_pod"), rendered("own")),
				plancheck.ExpectKnownValue("kubeplay_run.token", tfjsonpath.New("rendered_pod"), rendered("token")),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("output"), knownvalue.StringExact("own\n")),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("rendered_pod"), rendered("own")),
				statecheck.ExpectKnownValue("kubeplay_run.token", tfjsonpath.New("output"), knownvalue.StringExact("token\n")),
			},
		}},
	})
}

// gatedGroup is a group "g" with launch_retries = 2 whose pods wait at a
// scheduling gate until the test lifts it (ungate).
func gatedGroup(name, ns string) string {
	return fmt.Sprintf(`
resource "kubeplay_container_group" "g" {
  name              = %q
  namespace         = %q
  image             = %q
  launch_retries    = 2
  pod_spec_override = yamlencode({ spec = { schedulingGates = [{ name = "kubeplay.test/held" }] } })
}
`, name, ns, acctest.TestImage())
}

// ungate lifts a gatedGroup pod's scheduling gate.
func (e *testEnv) ungate(ns string) func(pod string) error {
	return func(pod string) error {
		_, err := e.kube.CoreV1().Pods(ns).Patch(context.Background(), pod, types.JSONPatchType,
			[]byte(`[{"op": "remove", "path": "/spec/schedulingGates"}]`), metav1.PatchOptions{})
		return err
	}
}
