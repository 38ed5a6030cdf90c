package provider

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
)

// TestAccRun_hugeResult: a run whose command writes the result file itself
// (as a playbook or an image can) with 100,000 hosts: the run records
// host_count = 100000 and keeps the first bundle.MaxHosts hosts by name in
// host_stats, so the state stays bounded. On the old code all 100,000 went
// to the state.
func TestAccRun_hugeResult(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-input-bigres")
	const hosts = 100_000
	script := fmt.Sprintf(`import json
with open("stats.json", "w") as f:
    f.write('{"hosts":{')
    f.write(",".join('"host-%%07d.example":{"ok":1}' %% i for i in range(%d)))
    f.write('},"failed_tasks":[],"failed_task_count":0,"artifacts":null}')
`, hosts)
	cfg := e.runGroup(randName("grp"), ns) + fmt.Sprintf(`
resource "kubeplay_run" "test" {
  container_group = kubeplay_container_group.g.name
  command         = ["python3", "-c", %q]
}
`, script)
	first := "host-0000000.example"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{{
			Config: cfg,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("successful")),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_count"), knownvalue.Int64Exact(hosts)),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_stats"), knownvalue.MapSizeExact(bundle.MaxHosts)),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_stats").AtMapKey(first).AtMapKey("ok"), knownvalue.Int64Exact(1)),
			},
			Check: func(s *terraform.State) error {
				size := 0
				for k, v := range s.RootModule().Resources[runAddr].Primary.Attributes {
					size += len(k) + len(v)
				}
				t.Logf("%d hosts in the result: the run's state attributes hold %d KB", hosts, size>>10)
				return nil
			},
		}},
	})
}
