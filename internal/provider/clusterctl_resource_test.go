// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

const testCoreComponents = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: capi-system\n"

const testCoreMetadata = "apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3\nkind: Metadata\n" +
	"releaseSeries:\n- major: 1\n  minor: 14\n  contract: v1beta2\n"

// clusterctlProvider is one element of providers, in HCL.
func clusterctlProvider(name, typ, version string) string {
	return fmt.Sprintf("{\n    name = %q\n    type = %q\n    version = %q\n    components = %q\n    metadata = %q\n  }",
		name, typ, version, testCoreComponents, testCoreMetadata)
}

// TestClusterctl_validation: what clusterctl would refuse at apply, and
// arguments the action does not use, fail at plan with the attribute's path
// and no cluster reached.
func TestClusterctl_validation(t *testing.T) {
	core := clusterctlProvider("cluster-api", "CoreProvider", "v1.14.2")
	cases := []struct{ body, want string }{
		{"action = \"init\"\n", `(?s)Missing Providers.*add at least the core provider`},
		{"action = \"upgrade\"\n", `(?s)action.*value must be one of`},
		{"action = \"init\"\nproviders = [" + core + "]\nto_cluster = \"two\"\n", `(?s)Attribute Not Used By Action.*to_cluster = "two".*used only by action "move"`},
		{"action = \"init\"\nproviders = [" + core + "]\nnamespace = \"capi\"\n", `(?s)Attribute Not Used By Action.*namespace = "capi"`},
		{"action = \"init\"\nproviders = [" + core + ", " + core + "]\n", `(?s)Duplicate Provider.*providers\[0\] and providers\[1\]`},
		{"action = \"init\"\nproviders = [" + clusterctlProvider("kubeadm", "BootstrapProvider", "v1.14.2") + "]\n", `(?s)One Core Provider Required.*lists 0 providers`},
		{"action = \"init\"\nproviders = [" + core + ", " + clusterctlProvider("other", "CoreProvider", "v1.14.2") + "]\n", `(?s)One Core Provider Required.*lists 2`},
		{"action = \"init\"\nproviders = [" + clusterctlProvider("cluster-api", "CoreProvider", "1.14") + "]\n", `(?s)Invalid Provider Release.*not a release version`},
		{"action = \"init\"\nproviders = [" + clusterctlProvider("cluster-api", "CoreProvider", "v1.13.0") + "]\n", `(?s)Invalid Provider Release.*no releaseSeries entry for 1.13`},
		{"action = \"init\"\nproviders = [" + clusterctlProvider("cluster-api", "Core", "v1.14.2") + "]\n", `(?s)providers\[0\].type.*value must be one of`},
		{"action = \"init\"\nproviders = [" + core + "]\nvariables = { \"not a name\" = \"x\" }\n", `(?s)Invalid Environment Variable Name.*variables`},
		{"action = \"init\"\nproviders = [" + core + "]\ntimeouts {\ncreate = \"forever\"\n}\n", `(?s)Invalid Attribute Value Time Duration.*create = "forever"`},
		{"action = \"init\"\nproviders = [" + core + "]\ntimeouts {\ndelete = \"0s\"\n}\n", `(?s)Invalid Duration.*delete = "0s".*timeouts.delete must be a positive duration`},
		// An update records timeouts and destroy_crds and waits for nothing.
		{"action = \"init\"\nproviders = [" + core + "]\ntimeouts {\nupdate = \"1m\"\n}\n", `(?s)Unsupported argument.*"update" is not expected here`},
		{"action = \"move\"\n", `(?s)Missing Target Cluster.*to_cluster`},
		{"action = \"move\"\ncluster = \"one\"\nto_cluster = \"one\"\n", `(?s)Move To The Same Cluster.*both name "one"`},
		{"action = \"move\"\nto_cluster = \"two\"\nproviders = [" + core + "]\n", `(?s)Attribute Not Used By Action.*providers = .*used only by action "init"`},
		{"action = \"move\"\nto_cluster = \"two\"\nvariables = { A = \"b\" }\n", `(?s)Attribute Not Used By Action.*variables = `},
		{"action = \"init\"\nproviders = [" + core + "]\nvariables_wo_version = 1\n",
			`(?s)Invalid Attribute Combination.*variables_wo_version = 1.*Attribute "variables_wo" must be specified when "variables_wo_version" is specified`},
		{"action = \"move\"\nto_cluster = \"two\"\nvariables_wo = { A = \"b\" }\nvariables_wo_version = 1\n",
			`(?s)Attribute Not Used By Action.*variables_wo_version = 1.*variables_wo_version is used only by action "init"`},
	}
	steps := make([]resource.TestStep, 0, len(cases))
	for _, c := range cases {
		steps = append(steps, resource.TestStep{
			Config:      unreachableProvider + "\nresource \"kubeplay_clusterctl\" \"test\" {\nname = \"bad\"\n" + c.body + "}\n",
			PlanOnly:    true,
			ExpectError: expectError(c.want),
		})
	}
	resource.UnitTest(t, resource.TestCase{ProtoV6ProviderFactories: testAccProtoV6ProviderFactories, Steps: steps})
}
