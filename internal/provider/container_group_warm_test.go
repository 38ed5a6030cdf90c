// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalogkey"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/warmpool"
)

const warmGroupAddr = "kubeplay_container_group.g"

// warmConfig is a group that keeps warm pods of its own pod and of a label,
// with extra in the group's block, and body after it.
func (e *testEnv) warmConfig(group, label, ns, extra, body string) string {
	return e.warmConfigMemory(group, label, ns, extra, body, 64)
}

// warmConfigMemory is warmConfig with the label's memory in MiB.
func (e *testEnv) warmConfigMemory(group, label, ns, extra, body string, memory int) string {
	return e.providerBlock() + fmt.Sprintf(`
resource "kubeplay_node_label" "small" {
  name   = %q
  memory = %d
}

resource "kubeplay_container_group" "g" {
  name                = %q
  namespace           = %q
  image               = %q
  max_concurrent_runs = 2
  warm_pods           = 2
  warm_labels         = { (kubeplay_node_label.small.name) = 1 }
  %s
}
`, label, memory, group, ns, acctest.TestImage(), extra) + body
}

// checkWarm waits until the group has its 3 ready warm pods, and checks that the
// live ones of the group's own pod are two, all of one revision, and that
// env, when set, is in their worker's environment.
func (e *testEnv) checkWarm(ns, group, env string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		acctest.WaitWarmReady(e.t, e.kube, ns, group, 3)
		pods, err := e.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{
			LabelSelector: warmpool.LabelRevision + ",!kubeplay.io/node-label"})
		if err != nil {
			return err
		}
		revs := map[string]bool{}
		own := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			own++
			revs[p.Labels[warmpool.LabelRevision]] = true
			if env != "" && !slices.ContainsFunc(p.Spec.Containers[0].Env, func(v corev1.EnvVar) bool { return v.Name == env }) {
				return fmt.Errorf("warm pod %s lacks %s: it is of the old spec", p.Name, env)
			}
		}
		if own != 2 || len(revs) != 1 {
			return fmt.Errorf("%d live warm pods of the group's own pod, of %d revisions; want 2 of one", own, len(revs))
		}
		return nil
	}
}

// TestAccContainerGroup_warmPods: a group keeps its warm pods, a run of the
// group's pod and one of the label each run in a warm pod (their hostname is
// the warm pod's name), the pools are refilled, a change of the run pod is
// planned as a new warm_revision and replaces the pods, and a destroy
// leaves none.
func TestAccContainerGroup_warmPods(t *testing.T) {
	e := newTestEnv(t)
	group, label, ns := randName("warm"), randName("small"), e.namespace("kp-warm")
	runs := `
resource "kubeplay_run" "test" {
  container_group = kubeplay_container_group.g.name
  command         = ["hostname"]
}

resource "kubeplay_run" "label" {
  container_group = kubeplay_container_group.g.name
  node_label      = kubeplay_node_label.small.name
  command         = ["hostname"]
}
`
	// The revision stays through a change of labels, then changes with the pod spec.
	same, differ := statecheck.CompareValue(compare.ValuesSame()), statecheck.CompareValue(compare.ValuesDiffer())
	warmName := regexp.MustCompile(`^kubeplay-warm-`)
	hostnameIsPod := func(addr string) resource.TestCheckFunc {
		return func(s *terraform.State) error {
			a := s.RootModule().Resources[addr].Primary.Attributes
			if strings.TrimSpace(a["output"]) != a["pod_name"] {
				return fmt.Errorf("%s ran in %q but its pod_name is %q", addr, strings.TrimSpace(a["output"]), a["pod_name"])
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			pods, err := e.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				return err
			}
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil {
					return fmt.Errorf("pod %s is left after the destroy", p.Name)
				}
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: e.warmConfig(group, label, ns, "", ""),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(warmGroupAddr, tfjsonpath.New("warm_revision"), knownvalue.StringRegexp(regexp.MustCompile(`^[0-9a-f]{16}$`))),
					same.AddStateValue(warmGroupAddr, tfjsonpath.New("warm_revision")),
				},
				// The quota holds the 3 warm pods beside the 2 run slots.
				Check: resource.ComposeAggregateTestCheckFunc(e.checkWarm(ns, group, ""),
					e.checkQuota(ns, group, map[corev1.ResourceName]string{corev1.ResourcePods: "5"})),
			},
			{
				Config: e.warmConfig(group, label, ns, "", runs),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("successful")),
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("pod_name"), knownvalue.StringRegexp(warmName)),
					statecheck.ExpectKnownValue("kubeplay_run.label", tfjsonpath.New("pod_name"), knownvalue.StringRegexp(warmName)),
					// A warm run claims its pod instead of creating one, and says which.
					expectTimeline{addr: runAddr, steps: warmSteps},
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("timeline").AtSliceIndex(1).AtMapKey("detail"),
						knownvalue.StringRegexp(regexp.MustCompile(`^warm pod kubeplay-warm-`))),
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status_reason"), knownvalue.Null()),
				},
				Check: resource.ComposeAggregateTestCheckFunc(hostnameIsPod(runAddr), hostnameIsPod("kubeplay_run.label"),
					// A warm run ends once its pod's deletion is accepted.
					func(*terraform.State) error {
						if left, waited := e.runPodsGone(ns, 30*time.Second); left != 0 {
							return fmt.Errorf("%d run pods left %s after the runs", left, waited)
						}
						return nil
					},
					e.checkWarm(ns, group, "")),
			},
			{
				// A refresh counts the pools.
				RefreshState: true,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(warmGroupAddr, "warm_pods_ready", "3"),
					resource.TestCheckResourceAttr(warmGroupAddr, "warm_pods_starting", "0"),
				),
			},
			{
				// Labels are the run's own at a claim: the warm pods stay.
				Config: e.warmConfig(group, label, ns, `labels = { team = "a" }`, runs),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(warmGroupAddr, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(warmGroupAddr, tfjsonpath.New("warm_revision"), knownvalue.StringRegexp(regexp.MustCompile(`^[0-9a-f]{16}$`))),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					same.AddStateValue(warmGroupAddr, tfjsonpath.New("warm_revision")),
					differ.AddStateValue(warmGroupAddr, tfjsonpath.New("warm_revision")),
				},
			},
			{
				// A change of the pod spec is a new revision, known at plan.
				Config: e.warmConfig(group, label, ns, `labels = { team = "a" }
  pod_spec_override = yamlencode({ spec = { containers = [{ name = "worker", env = [{ name = "X", value = "1" }] }] } })`, runs),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue(warmGroupAddr, tfjsonpath.New("warm_revision"), knownvalue.StringRegexp(regexp.MustCompile(`^[0-9a-f]{16}$`))),
				}},
				ConfigStateChecks: []statecheck.StateCheck{differ.AddStateValue(warmGroupAddr, tfjsonpath.New("warm_revision"))},
				Check:             e.checkWarm(ns, group, "X"),
			},
			{
				// A change of a warm label shows in the group's plan, and
				// replaces the label's warm pod.
				Config: e.warmConfigMemory(group, label, ns, `labels = { team = "a" }
  pod_spec_override = yamlencode({ spec = { containers = [{ name = "worker", env = [{ name = "X", value = "1" }] }] } })`, runs, 96),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(warmGroupAddr, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(warmGroupAddr, tfjsonpath.New("warm_revision"), knownvalue.StringRegexp(regexp.MustCompile(`^[0-9a-f]{16}$`))),
				}},
				ConfigStateChecks: []statecheck.StateCheck{differ.AddStateValue(warmGroupAddr, tfjsonpath.New("warm_revision"))},
				Check: resource.ComposeAggregateTestCheckFunc(e.checkWarm(ns, group, "X"), func(*terraform.State) error {
					pods, err := e.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "kubeplay.io/node-label=" + label + "," + warmpool.LabelRevision})
					if err != nil {
						return err
					}
					for _, p := range pods.Items {
						if p.DeletionTimestamp == nil && p.Spec.Containers[0].Resources.Requests.Memory().String() != "96Mi" {
							return fmt.Errorf("label warm pod %s requests %s memory, want the changed label's 96Mi", p.Name, p.Spec.Containers[0].Resources.Requests.Memory())
						}
					}
					return nil
				}),
			},
		},
	})
}

// TestAccRun_warmPodRace: two Terraform processes, each applying one run in
// a group that keeps one warm pod, race for it three times; the two runs
// never share a pod (each run's hostname is its own pod_name and the two
// differ), and at least one of each pair ran in a warm pod.
func TestAccRun_warmPodRace(t *testing.T) {
	e := newTestEnv(t)
	group, ns := randName("race"), e.namespace("kp-race")
	terraformBin, cliConfig, err := providerCLI(t)
	if err != nil {
		t.Fatal(err)
	}
	groupDir := t.TempDir()
	write := func(dir, cfg string) {
		if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(cliHeader(e.kubeconfig, e.catalog)+cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(groupDir, fmt.Sprintf(`resource "kubeplay_container_group" "g" {
  name      = %q
  namespace = %q
  image     = %q
  warm_pods = 1
}
`, group, ns, acctest.TestImage()))
	if err := terraformCLI(terraformBin, cliConfig, groupDir, "apply", "-auto-approve", "-input=false", "-no-color"); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := terraformCLI(terraformBin, cliConfig, groupDir, "destroy", "-auto-approve", "-input=false", "-no-color"); err != nil {
			t.Error(err)
		}
	}()
	dirs := [2]string{t.TempDir(), t.TempDir()}
	for i, dir := range dirs {
		write(dir, fmt.Sprintf(`resource "kubeplay_run" "r" {
  container_group = %q
  command         = ["hostname"]
  triggers        = { process = "%d" }
}
`, group, i))
	}
	key, err := catalogkey.Load(context.Background(), e.kube, e.catalog, false)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		acctest.WaitWarmReady(t, e.kube, ns, group, 1)
		// Every warm pod is signed: a provider that Terraform stopped while
		// it refilled left none that no run would claim.
		list, err := e.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: warmpool.GroupSelector(group)})
		if err != nil {
			t.Fatal(err)
		}
		if signed, err := warmpool.Count(context.Background(), e.kube, key, ns, group); err != nil {
			t.Fatal(err)
		} else if all := warmpool.Tally(list.Items); all != signed {
			t.Fatalf("round %d: the group's warm pods are %+v, of which signed %+v", round, all, signed)
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, dir := range dirs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				args := []string{"apply", "-auto-approve", "-input=false", "-no-color"}
				if round > 0 {
					args = append(args, "-replace=kubeplay_run.r")
				}
				errs[i] = terraformCLIEnv(terraformBin, cliConfig, dir, []string{"TF_LOG_PROVIDER=WARN", "TF_LOG_PATH=" + filepath.Join(dir, "provider.log")}, args...)
			}()
		}
		wg.Wait()
		var pods [2]string
		warm := 0
		for i, dir := range dirs {
			if errs[i] != nil {
				t.Fatalf("round %d, process %d: %v", round, i, errs[i])
			}
			runs := runStates(t, dir)
			if len(runs) != 1 {
				t.Fatalf("round %d, process %d: %d runs in the state", round, i, len(runs))
			}
			a := runs[0]
			output, _ := a["output"].(string)
			pod, _ := a["pod_name"].(string)
			if a["status"] != "successful" || strings.TrimSpace(output) != pod {
				t.Fatalf("round %d, process %d: status %v, ran in %q, pod_name %v", round, i, a["status"], a["output"], a["pod_name"])
			}
			pods[i] = pod
			if strings.HasPrefix(pods[i], "kubeplay-warm-") {
				warm++
			}
		}
		t.Logf("round %d: the runs ran in %s and %s", round, pods[0], pods[1])
		if pods[0] == pods[1] {
			t.Fatalf("round %d: both runs ran in pod %s", round, pods[0])
		}
		if warm == 0 {
			// The providers' warnings say why a warm pod was passed over.
			for i, dir := range dirs {
				b, _ := os.ReadFile(filepath.Join(dir, "provider.log"))
				t.Logf("round %d, process %d: provider warnings:\n%s", round, i, b)
			}
			t.Fatalf("round %d: neither run took the warm pod (%s, %s)", round, pods[0], pods[1])
		}
	}
	for _, dir := range dirs {
		if err := terraformCLI(terraformBin, cliConfig, dir, "destroy", "-auto-approve", "-input=false", "-no-color"); err != nil {
			t.Error(err)
		}
	}
}

// runStates reads the attributes of every kubeplay_run instance in dir's
// state.
func runStates(t testing.TB, dir string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "terraform.tfstate"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Resources []struct {
			Type      string
			Instances []struct{ Attributes map[string]any }
		}
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, r := range st.Resources {
		for _, in := range r.Instances {
			if r.Type == "kubeplay_run" {
				out = append(out, in.Attributes)
			}
		}
	}
	return out
}
