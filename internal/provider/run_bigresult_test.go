package provider

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// TestAccRun_hugeResult: a run whose command writes the result file itself
// (as a playbook or an image can) with a million hosts, 31 MiB, ends as an
// error that names the limit, read no further than 8 MiB; on the old code
// the provider read all of it and decoded every host into the state.
// (host_count, host_counts and the host_stats caps are unit-tested in the
// bundle package: with record_all_hosts, a state of 5,000 hosts makes the
// framework's plan walks take minutes.)
func TestAccRun_hugeResult(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-input-bigres")
	script := `with open("stats.json", "w") as f:
    f.write('{"hosts":{')
    f.write(",".join('"host-%07d.example":{"ok":1}' % i for i in range(1000000)))
    f.write('},"failed_tasks":[],"failed_task_count":0,"artifacts":null}')
`
	cfg := e.runGroup(randName("grp"), ns) + fmt.Sprintf(`
resource "kubeplay_run" "test" {
  container_group = kubeplay_container_group.g.name
  command         = ["python3", "-c", %q]
}
`, script)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{{
			Config:      cfg,
			ExpectError: expectError(`(?s)Run Error.*result is larger than the 8 MiB kubeplay reads`),
		}},
	})
}
