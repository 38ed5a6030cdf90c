package provider

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/config"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
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

// TestAccRun_manyHosts: a 1,000-host inventory (local connection, one
// debug task) ends successful with every host in host_stats. On the stats
// line of old, 400 hosts already ended the run as an error. It logs the
// apply's time and the size of the run's state. KUBEPLAY_TEST_HOSTS=5000
// runs it at bundle.MaxHosts: 284 s alone on this 2-core machine (a 1,735
// KB state, which terraform-plugin-framework's write-only nullification
// walks in quadratic time at every plan, apply and read), and 662 s beside
// the parallel suite, which is why the suite runs 1,000.
func TestAccRun_manyHosts(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-runmany")
	n := 1000
	if s := os.Getenv("KUBEPLAY_TEST_HOSTS"); s != "" {
		_, _ = fmt.Sscan(s, &n)
	}
	var inv strings.Builder
	inv.WriteString("[all]\n")
	for i := range n {
		fmt.Fprintf(&inv, "host-%04d.example.com\n", i)
	}
	inv.WriteString("[all:vars]\nansible_connection=local\nansible_python_interpreter=/usr/bin/python3\n")
	cfg := e.runGroup(randName("grp"), ns) + fmt.Sprintf(`
resource "kubeplay_run" "test" {
  container_group = kubeplay_container_group.g.name
  forks           = 10
  inventory       = %q
  playbook        = "- hosts: all\n  gather_facts: false\n  tasks:\n    - debug: {msg: hello}\n"
  timeouts {
    create = "40m"
  }
}
`, inv.String())
	last := fmt.Sprintf("host-%04d.example.com", n-1)
	start := time.Now()
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{{
			Config: cfg,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("successful")),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_stats"), knownvalue.MapSizeExact(n)),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_stats").AtMapKey(last), knownvalue.ObjectExact(map[string]knownvalue.Check{
					"ok": knownvalue.Int64Exact(1), "changed": knownvalue.Int64Exact(0), "unreachable": knownvalue.Int64Exact(0),
					"failed": knownvalue.Int64Exact(0), "skipped": knownvalue.Int64Exact(0), "rescued": knownvalue.Int64Exact(0),
					"ignored": knownvalue.Int64Exact(0),
				})),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("failed_tasks"), knownvalue.ListSizeExact(0)),
			},
			Check: func(s *terraform.State) error {
				size := 0
				for k, v := range s.RootModule().Resources[runAddr].Primary.Attributes {
					size += len(k) + len(v)
				}
				t.Logf("%d hosts: apply and checks took %s; the run's state attributes hold %d KB", n, time.Since(start).Round(time.Second), size>>10)
				return nil
			},
		}},
	})
}
