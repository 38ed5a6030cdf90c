package provider

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/config"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// TestAccRun_result: a failed task's host, name and message reach
// failed_tasks and set_stats data reach artifacts, with the write-only
// values redacted from both and from the state.
func TestAccRun_result(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-runres")
	const secret = "wo-r3sult-8c2b"
	cfg := e.runGroup(randName("grp"), ns) + `
variable "secret" {
  type      = string
  sensitive = true
  ephemeral = true
}

resource "kubeplay_run" "test" {
  container_group = kubeplay_container_group.g.name
  ignore_failure  = true
  playbook        = <<-YAML
    - hosts: all
      gather_facts: false
      tasks:
        - set_stats: {data: {release: "v2", leaked: "token {{ token }}", pin: "{{ pin | int }}", hosts: [a]}}
        - set_stats: {data: {hosts: [b]}}
        - name: check the token
          fail: {msg: "token {{ token }} was refused"}
  YAML
  extra_vars_wo = jsonencode({ token = var.secret, pin = 48151623 })
}
`
	redacted := "(sensitive value)"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		TerraformVersionChecks:   writeOnlyVersions,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{{
			Config:          cfg,
			ConfigVariables: config.Variables{"secret": config.StringVariable(secret)},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("failed")),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("failed_task_count"), knownvalue.Int64Exact(1)),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("failed_tasks"), knownvalue.ListExact([]knownvalue.Check{
					knownvalue.ObjectExact(map[string]knownvalue.Check{
						"host": knownvalue.StringExact("localhost"), "task": knownvalue.StringExact("check the token"),
						"message": knownvalue.StringExact("token " + redacted + " was refused"), "unreachable": knownvalue.Bool(false),
					}),
				})),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("artifacts"), knownvalue.StringExact(
					`{"hosts":["a","b"],"leaked":"token `+redacted+`","pin":"`+redacted+`","release":"v2"}`)),
			},
			Check: func(s *terraform.State) error {
				for k, v := range s.RootModule().Resources[runAddr].Primary.Attributes {
					if strings.Contains(v, secret) || strings.Contains(v, "48151623") {
						return fmt.Errorf("the state's %s holds a write-only value", k)
					}
				}
				return nil
			},
		}},
	})
}

// TestAccRun_manyHosts: a 500-host inventory (local connection, one
// debug task) ends successful with every host counted in host_counts and
// none in host_stats, and a state of at most maxRunState whatever the
// number of hosts; the output passes its 64 KiB cap. On the stats line of
// old, 400 hosts already ended the run as an error. It logs the apply's time
// and the run's state size, by attribute. KUBEPLAY_TEST_HOSTS=5000 runs it at
// bundle.MaxHosts: 186 s on a faster 2-core machine, the state 66 KB (64 of
// them output), where a host_stats of every host made it 1,735 KB and the
// test 340 s, since terraform-plugin-framework's write-only nullification
// walks the state in quadratic time at every plan, apply and read. The suite
// runs 500 for time: Ansible forks a worker per host, and at 1,000 the test
// alone took 451 CPU-s on the slower machine kind CI runs on, 375 of them in
// the pod.
// KUBEPLAY_TEST_RECORD_ALL_HOSTS=1 runs it with record_all_hosts, which
// measures what that costs per host (hostStatsBytes) and asserts no bound.
func TestAccRun_manyHosts(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-runmany")
	n := 500
	if s := os.Getenv("KUBEPLAY_TEST_HOSTS"); s != "" {
		_, _ = fmt.Sscan(s, &n)
	}
	all := os.Getenv("KUBEPLAY_TEST_RECORD_ALL_HOSTS") == "1"
	// A range, so that the inventory, which the state keeps as written,
	// does not grow with the hosts (listed, they would take 22 bytes each).
	inv := fmt.Sprintf("[all]\nhost-[0000:%04d].example.com\n[all:vars]\nansible_connection=local\n"+
		"ansible_python_interpreter=/usr/bin/python3\n", n-1)
	cfg := e.runGroup(randName("grp"), ns) + fmt.Sprintf(`
resource "kubeplay_run" "test" {
  container_group  = kubeplay_container_group.g.name
  forks            = 10
  inventory        = %q
  playbook         = "- hosts: all\n  gather_facts: false\n  tasks:\n    - debug: {msg: hello}\n"
  record_all_hosts = %t
  timeouts {
    create = "40m"
  }
}
`, inv, all)
	hosts := []statecheck.StateCheck{statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_stats"), knownvalue.MapSizeExact(0))}
	if all {
		hosts = []statecheck.StateCheck{
			statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_stats"), knownvalue.MapSizeExact(n)),
			statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_stats").AtMapKey(fmt.Sprintf("host-%04d.example.com", n-1)),
				knownvalue.ObjectExact(map[string]knownvalue.Check{
					"ok": knownvalue.Int64Exact(1), "changed": knownvalue.Int64Exact(0), "unreachable": knownvalue.Int64Exact(0),
					"failed": knownvalue.Int64Exact(0), "skipped": knownvalue.Int64Exact(0), "rescued": knownvalue.Int64Exact(0),
					"ignored": knownvalue.Int64Exact(0),
				})),
		}
	}
	// bounded fails a state over maxRunState, but with record_all_hosts.
	bounded := func(what string, b stateBytes) error {
		t.Logf("%d hosts: the run's state holds %s %s; %.2f KB of host_stats per 1,000 hosts", n, what, b,
			float64(b.by["host_stats"])/1024*1000/float64(n))
		if b.total > maxRunState && !all {
			return fmt.Errorf("the run's state holds %s %s, over %d KB", what, b, maxRunState>>10)
		}
		// The bound means something only with the output at its cap.
		if b.by["output"] < 60<<10 {
			return fmt.Errorf("the run's output holds %d bytes %s: %d hosts are too few to fill its 64 KiB; "+
				"set KUBEPLAY_TEST_HOSTS to 500 or more", b.by["output"], what, n)
		}
		return nil
	}
	start := time.Now()
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{{
			Config: cfg,
			ConfigStateChecks: append(hosts,
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("successful")),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_count"), knownvalue.Int64Exact(int64(n))),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_counts"), hostCounts(int64(n), 0, 0, 0, 0, 0)),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("failed_tasks"), knownvalue.ListSizeExact(0)),
				jsonStateSize{addr: runAddr, check: func(b stateBytes) error { return bounded("as JSON", b) }},
			),
			Check: func(s *terraform.State) error {
				b, err := flatStateSize(s, runAddr)
				if err != nil {
					return err
				}
				a := s.RootModule().Resources[runAddr].Primary.Attributes
				started, _ := time.Parse(time.RFC3339, a["started_at"])
				finished, _ := time.Parse(time.RFC3339, a["finished_at"])
				t.Logf("%d hosts: apply and checks took %s, the run's pod %s of it", n, time.Since(start).Round(time.Second),
					finished.Sub(started))
				return bounded("as flat attributes", b)
			},
		}},
	})
}

// maxRunState bounds a successful run's state, however many hosts it ran
// on (issue #27): the default output_limit takes 64 KiB of it.
const maxRunState = 100 << 10

// hostCounts checks host_counts.
func hostCounts(ok, changed, failed, unreachable, rescued, ignored int64) knownvalue.Check {
	return knownvalue.ObjectExact(map[string]knownvalue.Check{
		"ok": knownvalue.Int64Exact(ok), "changed": knownvalue.Int64Exact(changed), "failed": knownvalue.Int64Exact(failed),
		"unreachable": knownvalue.Int64Exact(unreachable), "rescued": knownvalue.Int64Exact(rescued),
		"ignored": knownvalue.Int64Exact(ignored),
	})
}

// TestAccRun_failedHosts: of 17 hosts, host_counts counts how each ended
// (changed, failed, unreachable, with ignored and rescued failures) and
// host_stats lists only the 7 that failed or were unreachable, with their
// recaps. record_all_hosts, turned on in place, keeps that until the run
// runs again, which records every host; turned off in place, host_stats
// drops the hosts that ended ok or changed. 17 hosts, not more: Ansible
// forks a worker per host and task, about 0.3 CPU-s each on the machine
// kind CI runs on; at 52 hosts the test took 259 CPU-s, at 17 hosts 88.
func TestAccRun_failedHosts(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-runfail")
	// host-06 to host-48, three a decade (x6, x7, x8); gone-0 and gone-1
	// are unreachable: nothing listens on port 1.
	const inv = `[local]
host-[0:4][6:8]
[local:vars]
ansible_connection=local
[gone]
gone-[0:1]
[gone:vars]
ansible_connection=ssh
ansible_host=127.0.0.1
ansible_port=1
[all:vars]
ansible_python_interpreter=/usr/bin/python3
`
	group := e.runGroup(randName("grp"), ns)
	run := func(trigger string, all bool) string {
		return group + fmt.Sprintf(`
resource "kubeplay_run" "test" {
  container_group  = kubeplay_container_group.g.name
  forks            = 10
  ignore_failure   = true
  inventory        = %q
  record_all_hosts = %t
  triggers         = { run = %q }
  playbook         = <<-YAML
    - hosts: all
      gather_facts: false
      tasks:
        - command: "true"
          changed_when: inventory_hostname is match('host-1')
        - fail: {msg: ignored}
          when: inventory_hostname is match('host-2')
          ignore_errors: true
        - block:
            - fail: {msg: rescued}
              when: inventory_hostname is match('host-3')
          rescue:
            - debug: {msg: rescued}
        - fail: {msg: "broken on {{ inventory_hostname }}"}
          when: inventory_hostname is match('host-.7')
  YAML
}
`, inv, all, trigger)
	}
	stats := func(ok, changed, unreachable, failed, skipped, rescued, ignored int64) knownvalue.Check {
		return knownvalue.ObjectExact(map[string]knownvalue.Check{
			"ok": knownvalue.Int64Exact(ok), "changed": knownvalue.Int64Exact(changed),
			"unreachable": knownvalue.Int64Exact(unreachable), "failed": knownvalue.Int64Exact(failed),
			"skipped": knownvalue.Int64Exact(skipped), "rescued": knownvalue.Int64Exact(rescued),
			"ignored": knownvalue.Int64Exact(ignored),
		})
	}
	gone := stats(0, 0, 1, 0, 0, 0, 0)
	failed := map[string]knownvalue.Check{
		"host-07": stats(1, 0, 0, 1, 2, 0, 0),
		"host-17": stats(1, 1, 0, 1, 2, 0, 0),
		"host-27": stats(2, 0, 0, 1, 1, 0, 1),
		"host-37": stats(2, 0, 0, 1, 1, 1, 0),
		"host-47": stats(1, 0, 0, 1, 2, 0, 0),
		"gone-0":  gone, "gone-1": gone,
	}
	// host-x7 failed; of the others, host-16 and host-18 changed; host-2x
	// ignored a failure and host-3x rescued one.
	counts := hostCounts(8, 2, 5, 2, 3, 3)
	record := func(hosts knownvalue.Check) []statecheck.StateCheck {
		return []statecheck.StateCheck{
			statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("failed")),
			statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_count"), knownvalue.Int64Exact(17)),
			statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_counts"), counts),
			statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_stats"), hosts),
		}
	}
	inPlace := func(hosts knownvalue.Check) resource.ConfigPlanChecks {
		return resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
			plancheck.ExpectResourceAction(runAddr, plancheck.ResourceActionUpdate),
			plancheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_stats"), hosts),
			plancheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_counts"), counts),
		}}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{
			{Config: run("1", false), ConfigStateChecks: record(knownvalue.MapExact(failed))},
			{
				Config: run("1", true), ConfigPlanChecks: inPlace(knownvalue.MapExact(failed)),
				ConfigStateChecks: record(knownvalue.MapExact(failed)),
			},
			{
				Config: run("2", true),
				ConfigStateChecks: append(record(knownvalue.MapSizeExact(17)),
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_stats").AtMapKey("host-37"), failed["host-37"]),
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_stats").AtMapKey("host-16"), stats(1, 1, 0, 0, 3, 0, 0)),
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_stats").AtMapKey("host-06"), stats(1, 0, 0, 0, 3, 0, 0)),
				),
			},
			{
				Config: run("2", false), ConfigPlanChecks: inPlace(knownvalue.MapExact(failed)),
				ConfigStateChecks: record(knownvalue.MapExact(failed)),
			},
		},
	})
}

// stateBytes is one resource's size in the state, in bytes, in total and
// by top-level attribute.
type stateBytes struct {
	total int
	by    map[string]int
}

// String is the total and the attributes of at least 1 KB, largest first,
// then the rest.
func (s stateBytes) String() string {
	names := slices.SortedFunc(maps.Keys(s.by), func(a, b string) int { return cmp.Or(s.by[b]-s.by[a], strings.Compare(a, b)) })
	var parts []string
	rest := s.total
	for _, n := range names {
		if s.by[n] >= 1<<10 {
			parts = append(parts, fmt.Sprintf("%s %.1f", n, float64(s.by[n])/1024))
			rest -= s.by[n]
		}
	}
	parts = append(parts, fmt.Sprintf("the rest %.1f", float64(rest)/1024))
	return fmt.Sprintf("%.1f KB (%s)", float64(s.total)/1024, strings.Join(parts, ", "))
}

// flatStateSize is the size of a resource's flat attributes, as the SDK's
// shim lists them: the sum of len(key)+len(value).
func flatStateSize(s *terraform.State, addr string) (stateBytes, error) {
	r := s.RootModule().Resources[addr]
	if r == nil || r.Primary == nil {
		return stateBytes{}, fmt.Errorf("%s is not in the state", addr)
	}
	out := stateBytes{by: map[string]int{}}
	for k, v := range r.Primary.Attributes {
		top, _, _ := strings.Cut(k, ".")
		out.total += len(k) + len(v)
		out.by[top] += len(k) + len(v)
	}
	return out, nil
}

// jsonStateSize measures a resource's values as terraform show -json
// prints them (compact JSON) and checks their size.
type jsonStateSize struct {
	addr  string
	check func(stateBytes) error
}

func (c jsonStateSize) CheckState(_ context.Context, req statecheck.CheckStateRequest, resp *statecheck.CheckStateResponse) {
	if req.State == nil || req.State.Values == nil || req.State.Values.RootModule == nil {
		resp.Error = errors.New("no state to measure")
		return
	}
	for _, r := range req.State.Values.RootModule.Resources {
		if r.Address != c.addr {
			continue
		}
		b, err := json.Marshal(r.AttributeValues)
		if err != nil {
			resp.Error = err
			return
		}
		out := stateBytes{total: len(b), by: map[string]int{}}
		for k, v := range r.AttributeValues {
			b, _ := json.Marshal(v)
			out.by[k] = len(b)
		}
		resp.Error = c.check(out)
		return
	}
	resp.Error = fmt.Errorf("%s is not in the state", c.addr)
}

// stateChecks runs several state checks as one.
type stateChecks []statecheck.StateCheck

func (cs stateChecks) CheckState(ctx context.Context, req statecheck.CheckStateRequest, resp *statecheck.CheckStateResponse) {
	var errs []error
	for _, c := range cs {
		var r statecheck.CheckStateResponse
		c.CheckState(ctx, req, &r)
		errs = append(errs, r.Error)
	}
	resp.Error = errors.Join(errs...)
}
