// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// TestAccDataSources_changedOutsideKubeplay (#40): the container group and
// node label data sources refuse a definition edited out of band, as runs
// do, with the error that names it and the workspace that repairs it;
// applying the definitions again makes them readable, without the forgery.
func TestAccDataSources_changedOutsideKubeplay(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("ds-trust")
	group, label := randName("ds-grp"), randName("ds-lbl")
	defs, _, _ := e.trustConfig(group, ns, label)
	const forget = `
removed {
  from = kubeplay_container_group.g
  lifecycle {
    destroy = false
  }
}
removed {
  from = kubeplay_node_label.l
  lifecycle {
    destroy = false
  }
}
`
	adopt := fmt.Sprintf("\nimport {\n  to = kubeplay_container_group.g\n  id = %q\n}\nimport {\n  to = kubeplay_node_label.l\n  id = %q\n}\n", group, label)
	readGroup := fmt.Sprintf("\ndata \"kubeplay_container_group\" \"g\" {\n  name = %q\n}\n", group)
	readLabel := fmt.Sprintf("\ndata \"kubeplay_node_label\" \"l\" {\n  name = %q\n}\n", label)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: e.providerBlock() + defs},
			// Another workspace manages them: this one forgets them.
			{Config: e.providerBlock() + forget},
			{
				PreConfig: func() {
					e.forgeGroup(group, func(g map[string]any) { g["pod_security_level"] = "privileged" })
					e.forgeLabel(label, func(l map[string]any) { l["labels"] = map[string]any{"tier": "small", "forged": "yes"} })
				},
				Config: e.providerBlock() + readGroup,
				ExpectError: expectError(fmt.Sprintf(`(?s)Container Group Changed Outside Kubeplay.*Container group "%s" is `+
					`refused: ConfigMap %s/%s has an unsigned digest.*Write it again from its definition: apply the `+
					`workspace that manages the kubeplay_container_group named "%s"`, group, e.catalog, group, group)),
			},
			{
				Config: e.providerBlock() + readLabel,
				ExpectError: expectError(fmt.Sprintf(`(?s)Node Label Changed Outside Kubeplay.*Node label "%s" is `+
					`refused: PodTemplate %s/%s has an unsigned digest.*Write it again from its definition: apply the `+
					`workspace that manages the kubeplay_node_label named "%s"`, label, e.catalog, label, label)),
			},
			{
				// The workspace that manages them applies them again (here:
				// adopts them); the data sources read what it wrote.
				Config: e.providerBlock() + defs + adopt,
			},
			{
				Config: e.providerBlock() + defs + readGroup + readLabel,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.kubeplay_container_group.g", tfjsonpath.New("pod_security_level"), knownvalue.StringExact("baseline")),
					statecheck.ExpectKnownValue("data.kubeplay_node_label.l", tfjsonpath.New("labels"),
						knownvalue.MapExact(map[string]knownvalue.Check{"tier": knownvalue.StringExact("small")})),
				},
			},
		},
	})
}
