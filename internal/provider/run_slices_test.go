// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
)

// localInventory is n hosts h01... on the pod itself, the first web of
// them in group web.
func localInventory(n, web int) string {
	var b strings.Builder
	b.WriteString("[web]\n")
	for i := 1; i <= n; i++ {
		if i == web+1 {
			b.WriteString("[db]\n")
		}
		fmt.Fprintf(&b, "h%02d\n", i)
	}
	b.WriteString("[all:vars]\nansible_connection=local\nansible_python_interpreter=/usr/bin/python3\n")
	return b.String()
}

// hostNames are h01 to hNN.
func hostNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("h%02d", i+1)
	}
	return names
}

// hostsOf checks a host_stats that holds exactly names.
func hostsOf(names ...string) knownvalue.Check {
	m := map[string]knownvalue.Check{}
	for _, n := range names {
		m[n] = knownvalue.NotNull()
	}
	return knownvalue.MapExact(m)
}

// TestAccRun_slices is the AWX seed's sliced job template with more slices
// than room: 10 hosts in 5 slices through a group that holds 2 runs at a
// time. 5 pods run, never more than 2 at once; the slices beyond the room
// wait and start later; every slice succeeds; every host is in exactly one
// slice's results; nothing is left behind.
func TestAccRun_slices(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-slices")
	group := randName("grp")
	cfg := e.providerBlock() + fmt.Sprintf(`
resource "kubeplay_container_group" "g" {
  name                = %q
  namespace           = %q
  image               = %q
  max_concurrent_runs = 2
}

resource "kubeplay_run" "test" {
  container_group  = kubeplay_container_group.g.name
  slices           = 5
  inventory        = %q
  record_all_hosts = true
  playbook         = <<-YAML
    - hosts: all
      gather_facts: false
      tasks:
        - debug: {msg: "{{ inventory_hostname }}"}
        - set_stats: {data: {"seen_{{ inventory_hostname }}": 1}}
  YAML
}
`, group, ns, acctest.TestImage(), localInventory(10, 4))
	perSlice := make([]knownvalue.Check, 5)
	for i := range perSlice {
		perSlice[i] = knownvalue.ObjectPartial(map[string]knownvalue.Check{"slice": knownvalue.Int64Exact(int64(i + 1)),
			"host_count": knownvalue.Int64Exact(2), "status": knownvalue.StringExact("successful"), "status_reason": knownvalue.Null(),
			"exit_code": knownvalue.Int64Exact(0), "pod_name": knownvalue.StringRegexp(regexp.MustCompile(`^kubeplay-run-`)),
			"container_group": knownvalue.StringExact(group)})
	}
	var pc *podConcurrency
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{{
			PreConfig: func() { pc = e.watchConcurrency(ns) },
			Config:    cfg,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("successful")),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_count"), knownvalue.Int64Exact(10)),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_counts"), hostCounts(10, 0, 0, 0, 0, 0)),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_stats"), hostsOf(hostNames(10)...)),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("launch_attempts"), knownvalue.Int64Exact(5)),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("slice_results"), knownvalue.ListExact(perSlice)),
			},
			Check: resource.ComposeAggregateTestCheckFunc(
				e.checkNoRunPods(ns), slicesOutput(5), slicesWaited(3),
				func(*terraform.State) error { return pc.check(5, 2) },
				// set_stats of each slice's hosts, merged: every host once.
				resource.TestCheckResourceAttrWith(runAddr, "artifacts", func(v string) error {
					for _, h := range hostNames(10) {
						if strings.Count(v, `"seen_`+h+`":1`) != 1 {
							return fmt.Errorf("artifacts %s: want seen_%s once", v, h)
						}
					}
					return nil
				}),
				func(*terraform.State) error {
					acctest.CheckNoLeaks(t, e.kube, groupLeaks(ns, group))
					return nil
				},
			),
		}},
	})
}

// TestAccRun_adHoc runs ad hoc commands against a host pattern: ping over
// web, then command over web in 2 slices; each gives per-host results.
func TestAccRun_adHoc(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-adhoc")
	cfg := func(slices int, module, args string) string {
		return e.runGroup(randName("grp"), ns) + fmt.Sprintf(`
resource "kubeplay_run" "test" {
  container_group  = kubeplay_container_group.g.name
  inventory        = %q
  record_all_hosts = true
  slices           = %d
  ad_hoc = {
    module  = %q
    args    = %q
    pattern = "web:!h02"
  }
}
`, localInventory(6, 4), slices, module, args)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{
			{
				Config: cfg(1, "ansible.builtin.ping", ""),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("successful")),
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_counts"), hostCounts(3, 0, 0, 0, 0, 0)),
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_stats"), hostsOf("h01", "h03", "h04")),
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("output"), knownvalue.StringRegexp(regexp.MustCompile(`h01 \| SUCCESS => {(?s:.*)"ping": "pong"`))),
				},
			},
			{
				Config: cfg(2, "ansible.builtin.command", "echo hi {{ inventory_hostname }}"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("successful")),
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_counts"), hostCounts(0, 3, 0, 0, 0, 0)),
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_stats"), hostsOf("h01", "h03", "h04")),
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("slice_results"), knownvalue.ListSizeExact(2)),
					// Sorted h01 h03 h04: slice 1 has h01 and h04, slice 2 h03.
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("output"),
						knownvalue.StringRegexp(regexp.MustCompile(`(?s)=== slice 1/2.*h0[14] \| CHANGED \| rc=0 >>\nhi h0[14].*=== slice 2/2.*h03 \| CHANGED \| rc=0 >>\nhi h03`))),
				},
			},
		},
	})
}

// TestAccRun_rerunFailedHosts: 3 of 20 hosts fail; with rerun_failed_hosts
// the next run of the name plans and runs only those 3, in 2 slices. A
// record changed in the cluster fails the plan and narrows nothing; once
// the record is gone (the 3 succeeded), the next run targets all 20.
func TestAccRun_rerunFailedHosts(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-rerun")
	group, name := randName("grp"), randName("rerun")
	cfg := func(trigger string, fixed bool) string {
		return e.runGroup(group, ns) + fmt.Sprintf(`
resource "kubeplay_run" "test" {
  container_group    = kubeplay_container_group.g.name
  name               = %q
  inventory          = %q
  slices             = 2
  record_all_hosts   = true
  rerun_failed_hosts = true
  ignore_failure     = true
  extra_vars         = { fixed = %t }
  triggers           = { t = %q }
  playbook           = <<-YAML
    - hosts: all
      gather_facts: false
      tasks:
        - fail: {msg: boom}
          when: inventory_hostname in ['h03', 'h11', 'h17'] and not fixed
  YAML
}
`, name, localInventory(20, 10), fixed, trigger)
	}
	tamper := func() {
		cm := e.rerunRecord(t)
		cm.Data["sealed"] = flipSealed(cm.Data["sealed"])
		if _, err := e.kube.CoreV1().ConfigMaps(e.catalog).Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var kept string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{
			{
				Config: cfg("1", false),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue(runAddr, tfjsonpath.New("rerun_hosts"), knownvalue.Null()),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("failed")),
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status_reason"), knownvalue.StringExact("playbook_failed")),
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_counts"), hostCounts(17, 0, 3, 0, 0, 0)),
				},
				Check: func(*terraform.State) error { kept = e.rerunRecord(t).Data["sealed"]; return nil },
			},
			{
				// A changed record: refused, nothing narrowed or run.
				PreConfig:   tamper,
				Config:      cfg("2", true),
				ExpectError: regexp.MustCompile(`Failed Hosts Unreadable`),
			},
			{
				PreConfig: func() {
					cm := e.rerunRecord(t)
					cm.Data["sealed"] = kept
					if _, err := e.kube.CoreV1().ConfigMaps(e.catalog).Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: cfg("2", true),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(runAddr, plancheck.ResourceActionReplace),
					plancheck.ExpectKnownValue(runAddr, tfjsonpath.New("rerun_hosts").AtMapKey("count"), knownvalue.Int64Exact(3)),
					plancheck.ExpectKnownValue(runAddr, tfjsonpath.New("rerun_hosts").AtMapKey("sha256"),
						knownvalue.StringExact(hostsSHA256([]string{"h03", "h11", "h17"}))),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("successful")),
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_stats"), hostsOf("h03", "h11", "h17")),
				},
			},
			{
				Config: cfg("3", true),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue(runAddr, tfjsonpath.New("rerun_hosts"), knownvalue.Null()),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_stats"), hostsOf(hostNames(20)...)),
				},
			},
		},
	})
}

// slicesOutput checks that the output holds each of n slices' parts, in order.
func slicesOutput(n int) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		out := s.RootModule().Resources[runAddr].Primary.Attributes["output"]
		at := 0
		for k := 1; k <= n; k++ {
			i := strings.Index(out[at:], fmt.Sprintf("=== slice %d/%d", k, n))
			if i < 0 {
				return fmt.Errorf("the output has no part for slice %d/%d after byte %d:\n%s", k, n, at, out)
			}
			at += i + 1
		}
		return nil
	}
}

// slicesWaited checks that at least least slices waited a second or more
// for their group's capacity (their queued step).
func slicesWaited(least int) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		a := s.RootModule().Resources[runAddr].Primary.Attributes
		n, _ := strconv.Atoi(a["slice_results.#"])
		waited := 0
		for i := range n {
			steps, _ := strconv.Atoi(a[fmt.Sprintf("slice_results.%d.timeline.#", i)])
			for j := range steps {
				p := fmt.Sprintf("slice_results.%d.timeline.%d.", i, j)
				if secs, _ := strconv.ParseFloat(a[p+"seconds"], 64); a[p+"step"] == "queued" && secs >= 1 {
					waited++
				}
			}
		}
		if waited < least {
			return fmt.Errorf("%d of %d slices waited for the group's capacity, want at least %d", waited, n, least)
		}
		return nil
	}
}

// rerunRecord is the one rerun record of the test's catalog, failing the
// test unless there is exactly one.
func (e *testEnv) rerunRecord(t *testing.T) *corev1.ConfigMap {
	t.Helper()
	cms, err := e.kube.CoreV1().ConfigMaps(e.catalog).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var found []corev1.ConfigMap
	for _, cm := range cms.Items {
		if strings.HasPrefix(cm.Name, rerunRecordPrefix) {
			found = append(found, cm)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d rerun records in %s, want 1", len(found), e.catalog)
	}
	return &found[0]
}

// flipSealed changes one character of a sealed value near its end.
func flipSealed(s string) string {
	b := []byte(s)
	i := len(b) - 10
	b[i] ^= 1
	if b[i] == '=' || b[i] == '/' || b[i] == '+' {
		b[i] = 'A'
	}
	return string(b)
}

// TestAccRun_slicesLaunchRetried: of a run's 2 slices, the one whose first
// pod is deleted before it runs launches a fresh pod (launch_retries); the
// other runs in its first pod; a task fails on h3 of slice 1. The run is
// failed with playbook_failed, each host ran once, and both slices'
// results are kept.
func TestAccRun_slicesLaunchRetried(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-sliceretry")
	cfg := e.providerBlock() + gatedGroup(randName("grp"), ns) + `
resource "kubeplay_run" "test" {
  container_group  = kubeplay_container_group.g.name
  slices           = 2
  inventory        = "h1\nh2\nh3\nh4\n[all:vars]\nansible_connection=local\nansible_python_interpreter=/usr/bin/python3\n"
  record_all_hosts = true
  ignore_failure   = true
  playbook         = "- hosts: all\n  gather_facts: false\n  tasks:\n    - fail: {msg: boom}\n      when: inventory_hostname == 'h3'\n"
}
`
	pods := e.kube.CoreV1().Pods(ns)
	ungate := e.ungate(ns)
	var pw *podWatcher
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{{
			PreConfig: func() {
				pw = e.watchRunPods(ns, func(pod string) error {
					return pods.Delete(context.Background(), pod, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
				}, ungate, ungate)
			},
			Config: cfg,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("failed")),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status_reason"), knownvalue.StringExact("playbook_failed")),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_counts"), hostCounts(3, 0, 1, 0, 0, 0)),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_stats"), hostsOf("h1", "h2", "h3", "h4")),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("launch_attempts"), knownvalue.Int64Exact(3)),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("slice_results"), knownvalue.ListExact([]knownvalue.Check{
					knownvalue.ObjectPartial(map[string]knownvalue.Check{"status": knownvalue.StringExact("failed"),
						"status_reason": knownvalue.StringExact("playbook_failed"), "host_count": knownvalue.Int64Exact(2)}),
					knownvalue.ObjectPartial(map[string]knownvalue.Check{"status": knownvalue.StringExact("successful"),
						"host_count": knownvalue.Int64Exact(2)}),
				})),
			},
			Check: resource.ComposeAggregateTestCheckFunc(
				func(s *terraform.State) error {
					pw.mu.Lock()
					defer pw.mu.Unlock()
					if len(pw.errs) > 0 || len(pw.created) != 3 {
						return fmt.Errorf("%d run pods were created (%v), want 3; the watcher's errors: %v", len(pw.created), pw.created, pw.errs)
					}
					return nil
				},
				func(s *terraform.State) error {
					a := s.RootModule().Resources[runAddr].Primary.Attributes
					got := a["slice_results.0.launch_attempts"] + "," + a["slice_results.1.launch_attempts"]
					if got != "1,2" && got != "2,1" {
						return fmt.Errorf("the slices launched %s pods, want one slice 1 and the other 2", got)
					}
					return nil
				},
				e.checkNoRunPods(ns),
			),
		}},
	})
}

// podConcurrency counts the run pods of a namespace as a watch sees them:
// how many were made, and the most that were live (neither ended nor being
// deleted) at once.
type podConcurrency struct {
	mu      sync.Mutex
	live    map[string]bool
	seen    map[string]bool
	maxLive int
}

// watchConcurrency starts a podConcurrency on ns until the test ends.
func (e *testEnv) watchConcurrency(ns string) *podConcurrency {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := e.kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "kubeplay.io/run"})
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	pc := &podConcurrency{live: map[string]bool{}, seen: map[string]bool{}}
	done := make(chan struct{})
	e.t.Cleanup(func() { cancel(); w.Stop(); <-done })
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			pc.mu.Lock()
			pc.seen[p.Name] = true
			ended := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
			pc.live[p.Name] = ev.Type != watch.Deleted && p.DeletionTimestamp == nil && !ended
			n := 0
			for _, l := range pc.live {
				if l {
					n++
				}
			}
			pc.maxLive = max(pc.maxLive, n)
			pc.mu.Unlock()
		}
	}()
	return pc
}

// check fails unless made pods were seen, at most most of them live at once.
func (pc *podConcurrency) check(made, most int) error {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if len(pc.seen) != made || pc.maxLive > most || pc.maxLive == 0 {
		return fmt.Errorf("%d run pods were made, at most %d live at once; want %d, at most %d", len(pc.seen), pc.maxLive, made, most)
	}
	return nil
}

// TestAccRun_slicesPlanCheck: the plan-time check of a sliced run is one
// check over all the run's hosts (it only reads, so it need not be split):
// the plan shows each host's change; the apply then runs 2 slices.
func TestAccRun_slicesPlanCheck(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-slicecheck")
	group := e.runGroup(randName("grp"), ns)
	cfg := group + fmt.Sprintf(`
resource "kubeplay_run" "test" {
  container_group = kubeplay_container_group.g.name
  slices          = 2
  plan_check      = "changes"
  inventory       = %q
  playbook        = "- hosts: all\n  gather_facts: false\n  tasks:\n    - name: write the marker\n      copy: {content: x, dest: '/tmp/marker-{{ inventory_hostname }}'}\n"
}
`, localInventory(4, 2))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{{Config: group}, {
			Config: cfg,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectKnownValue(runAddr, tfjsonpath.New("planned_changes").AtMapKey("hosts"), knownvalue.ListExact([]knownvalue.Check{
					knownvalue.StringExact("h01"), knownvalue.StringExact("h02"), knownvalue.StringExact("h03"), knownvalue.StringExact("h04")})),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("successful")),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_counts"), hostCounts(0, 4, 0, 0, 0, 0)),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("slice_results"), knownvalue.ListSizeExact(2)),
			},
			Check: func(*terraform.State) error { return e.noCheckRecords() },
		}},
	})
}
