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
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/config"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/credential"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runengine"
)

const runAddr = "kubeplay_run.test"

// runGroup renders a container group in ns that uses the test image.
func (e *testEnv) runGroup(name, ns string) string {
	return e.providerBlock() + fmt.Sprintf(`
resource "kubeplay_container_group" "g" {
  name      = %q
  namespace = %q
  image     = %q
}
`, name, ns, acctest.TestImage())
}

// checkNoRunPods fails when a run pod is left in ns.
func (e *testEnv) checkNoRunPods(ns string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		pods, err := e.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "kubeplay.io/run"})
		if err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d run pods left in %s, first %s", len(pods.Items), ns, pods.Items[0].Name)
		}
		return nil
	}
}

// TestAccRun_playbook runs a 2-task playbook with secrets, checks the record,
// that secrets reach neither the state nor the output, that triggers run it
// again, and that a destroy playbook runs with KUBEPLAY_OPERATION=destroy.
func TestAccRun_playbook(t *testing.T) {
	e := newProcessWideTestEnv(t, "captures Terraform and provider logs through TF_LOG and TF_ACC_LOG_PATH, which are process-wide")
	logFile := filepath.Join(t.TempDir(), "terraform.log")
	t.Setenv("TF_LOG", "trace")
	t.Setenv("TF_ACC_LOG_PATH", logFile)
	ns := e.namespace("kp-run")
	group := randName("grp")
	const secret = "wo-s3cr3t-5d1e"
	run := func(trigger string) string {
		return e.runGroup(group, ns) + fmt.Sprintf(`
variable "secret" {
  type      = string
  sensitive = true
  ephemeral = true
}

resource "kubeplay_run" "test" {
  container_group = kubeplay_container_group.g.name
  playbook        = <<-YAML
    - hosts: all
      gather_facts: false
      tasks:
        - name: greet
          debug: {msg: "{{ greeting }} {{ lookup('env', 'API_TOKEN') }} {{ token }} {{ lookup('env', 'KUBEPLAY_OPERATION') }}"}
        - command: "true"
        - assert: {that: ["replicas == 3", "ratio == 0.25", "nested.list[1] == 'a'", "nested.on is sameas true"]}
  YAML
  extra_vars      = { greeting = "hello", replicas = 3, ratio = 0.25, nested = { list = [1, "a"], on = true } }
  extra_vars_wo   = jsonencode({ token = var.secret })
  env_wo          = { API_TOKEN = var.secret }
  triggers        = { t = %q }
  destroy_playbook = <<-YAML
    - hosts: all
      gather_facts: false
      tasks:
        - assert: {that: "lookup('env', 'KUBEPLAY_OPERATION') == 'destroy'"}
  YAML
}
`, trigger)
	}
	vars := config.Variables{"secret": config.StringVariable(secret)}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		TerraformVersionChecks:   writeOnlyVersions,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{
			{
				Config:          run("1"),
				ConfigVariables: vars,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("successful")),
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("exit_code"), knownvalue.Int64Exact(0)),
					// localhost changed: counted, and not listed, as only hosts that failed or were unreachable are.
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_counts"), hostCounts(0, 1, 0, 0, 0, 0)),
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_count"), knownvalue.Int64Exact(1)),
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_stats"), knownvalue.MapExact(map[string]knownvalue.Check{})),
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("node_name"), knownvalue.NotNull()),
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("pod_name"), knownvalue.StringRegexp(expectError(`^kubeplay-run-`))),
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("extra_vars_wo"), knownvalue.Null()),
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					checkNoSecretInState(secret),
					resource.TestCheckResourceAttrWith(runAddr, "output", func(out string) error {
						if !strings.Contains(out, "hello (sensitive value) (sensitive value) create") {
							return fmt.Errorf("output does not show the redacted secrets and the operation:\n%s", out)
						}
						return nil
					}),
					e.checkNoRunPods(ns),
				),
			},
			{
				// Nothing changed: a run is a record, and no new run happens.
				Config:          run("1"),
				ConfigVariables: vars,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(runAddr, plancheck.ResourceActionNoop),
				}},
			},
			{
				// A trigger change runs it again (the destroy playbook runs first).
				Config:          run("2"),
				ConfigVariables: vars,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(runAddr, plancheck.ResourceActionDestroyBeforeCreate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("successful")),
				},
				Check: e.checkNoRunPods(ns),
			},
		},
	})
	logText, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	// The output lines reach the log, redacted; the secret itself never does.
	if !strings.Contains(string(logText), "hello (sensitive value) (sensitive value) create") {
		t.Fatalf("the trace log %s lacks the run's streamed output", logFile)
	}
	if strings.Contains(string(logText), secret) {
		t.Fatalf("the write-only secret appears in the TF_LOG=trace log %s", logFile)
	}
}

// TestAccRun_tagsAndLimit: limit, tags and skip_tags reach ansible-playbook
// as lists joined by commas. Of four tasks on three hosts, with tags = ["a",
// "b"], skip_tags = ["slow"] and limit = ["h1", "h2"], the tasks tagged a
// and b run on h1 and h2 alone: not the one tagged c, nor the one tagged b
// and slow, nor any on h3. One pod.
func TestAccRun_tagsAndLimit(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-runtags")
	cfg := e.runGroup(randName("grp"), ns) + `
resource "kubeplay_run" "test" {
  container_group = kubeplay_container_group.g.name
  inventory       = "h1\nh2\nh3\n[all:vars]\nansible_connection=local\nansible_python_interpreter=/usr/bin/python3\n"
  playbook        = <<-YAML
    - hosts: all
      gather_facts: false
      tasks:
        - {debug: {msg: "task-a on {{ inventory_hostname }}"}, tags: [a]}
        - {debug: {msg: "task-b on {{ inventory_hostname }}"}, tags: [b]}
        - {debug: {msg: "task-c on {{ inventory_hostname }}"}, tags: [c]}
        - {debug: {msg: "task-slow on {{ inventory_hostname }}"}, tags: [b, slow]}
  YAML
  tags            = ["a", "b"]
  skip_tags       = ["slow"]
  limit           = ["h1", "h2"]
  # Each host's recap, to count the tasks that ran on it.
  record_all_hosts = true
}
`
	// Two tasks ran on each host; the others were left out, not skipped.
	host := knownvalue.ObjectExact(map[string]knownvalue.Check{
		"ok": knownvalue.Int64Exact(2), "changed": knownvalue.Int64Exact(0), "unreachable": knownvalue.Int64Exact(0),
		"failed": knownvalue.Int64Exact(0), "skipped": knownvalue.Int64Exact(0), "rescued": knownvalue.Int64Exact(0),
		"ignored": knownvalue.Int64Exact(0),
	})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{
			{
				Config: cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue(runAddr, tfjsonpath.New("tags"),
						knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("a"), knownvalue.StringExact("b")})),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("successful")),
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_stats"), knownvalue.MapExact(map[string]knownvalue.Check{"h1": host, "h2": host})),
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_counts"), hostCounts(2, 0, 0, 0, 0, 0)),
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("limit"),
						knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("h1"), knownvalue.StringExact("h2")})),
				},
				Check: resource.TestCheckResourceAttrWith(runAddr, "output", func(out string) error {
					for _, want := range []string{"task-a on h1", "task-a on h2", "task-b on h1", "task-b on h2"} {
						if !strings.Contains(out, want) {
							return fmt.Errorf("output lacks %q:\n%s", want, out)
						}
					}
					for _, unwanted := range []string{"task-c", "task-slow", "on h3"} {
						if strings.Contains(out, unwanted) {
							return fmt.Errorf("output shows %q:\n%s", unwanted, out)
						}
					}
					return nil
				}),
			},
			{
				// The lists read back as planned: nothing to do.
				Config: cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(runAddr, plancheck.ResourceActionNoop),
				}},
			},
		},
	})
}

// TestAccRun_failures: a failing playbook and a missing image fail the apply
// with the status, exit code and output in the error, and leave no pod.
func TestAccRun_failures(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-runfail")
	group := randName("grp")
	failing := e.runGroup(group, ns) + `
resource "kubeplay_run" "test" {
  container_group = kubeplay_container_group.g.name
  playbook        = "- hosts: all\n  gather_facts: false\n  tasks:\n    - fail: {msg: deliberate-failure}\n"
}
`
	ignored := e.runGroup(group, ns) + `
resource "kubeplay_run" "test" {
  container_group = kubeplay_container_group.g.name
  command         = ["sh", "-c", "echo about to fail; exit 7"]
  ignore_failure  = true
}
`
	// The group changes in the same apply as the new run.
	badImage := e.providerBlock() + fmt.Sprintf(`
resource "kubeplay_container_group" "g" {
  name      = %q
  namespace = %q
  image     = "kubeplay.test/no-such-image:v1"
}

resource "kubeplay_run" "test" {
  container_group = kubeplay_container_group.g.name
  command         = ["true"]
}
`, group, ns)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{
			{Config: failing, ExpectError: expectError(`(?s)Run Failed.*exited with code 2.*deliberate-failure`)},
			{
				Config: ignored,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("failed")),
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("exit_code"), knownvalue.Int64Exact(7)),
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("output"), knownvalue.StringExact("about to fail\n")),
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status_reason"), knownvalue.StringExact("command_failed")),
					expectTimeline{addr: runAddr, steps: coldSteps},
				},
				Check: e.checkNoRunPods(ns),
			},
			{Config: badImage, ExpectError: expectError(`(?s)Run Error.*ErrImagePull`)},
		},
	})
}

// TestAccRun_planErrors covers the run's plan-time validation.
func TestAccRun_planErrors(t *testing.T) {
	e := newTestEnv(t)
	run := func(body string) string {
		return e.providerBlock() + "resource \"kubeplay_run\" \"test\" {\n  container_group = \"g\"\n" + body + "\n}\n"
	}
	steps := []resource.TestStep{}
	for _, c := range []struct{ body, want string }{
		{``, `(?s)Invalid Attribute Combination.*playbook`},
		{`playbook = "x"
  command = ["true"]`, `(?s)Invalid Attribute Combination`},
		{`playbook = "x"
  files = { "../escape.yml" = "x" }`, `(?s)Invalid File Path.*leaves the bundle`},
		{`playbook = "x"
  extra_vars = "[1, 2]"`, `(?s)Invalid Extra Variables.*not a JSON object.*jsonencode`},
		{`playbook = "x"
  extra_vars = [1, 2]`, `(?s)Invalid Extra Variables.*is a tuple.*not an object`},
		{`playbook = "x"
  env = { "1BAD" = "x" }`, `(?s)Invalid Environment Variable Name`},
		{`command = ["true"]
  limit = ["web"]`, `(?s)Attribute Needs A Playbook.*limit`},
		{`command = ["true"]
  plan_check_diffs = true`, `(?s)Attribute Needs A Playbook.*plan_check_diffs`},
		// Ansible splits on commas: one element would silently be two tags.
		{`playbook = "x"
  tags = ["deploy", "a,b"]`, `(?s)Invalid Tag.*tags\[1\] is "a,b", but Ansible splits tags on commas.*\["a", "b"\]`},
		{`playbook = "x"
  limit = ["web,db"]`, `(?s)Invalid Host Pattern.*limit\[0\] is "web,db".*\["web", "db"\]`},
		{`playbook = "x"
  skip_tags = [""]`, `(?s)skip_tags\[0\] string length must be at least 1`},
		{`playbook = "x"
  tags = []`, `(?s)Attribute tags list must contain at least 1 elements`},
		{`playbook = "x"
  tags = "a,b"`, `(?s)Incorrect attribute value type.*list of string required`},
		{`playbook = "x"
  verbosity = 9`, `(?s)verbosity value must be between 0 and 6`},
		// Sliced runs, ad hoc commands and re-runs.
		{`playbook = "x"
  slices = 0`, `(?s)slices value must be between 1 and 100`},
		{`command = ["true"]
  slices = 2`, `(?s)Attribute Needs Hosts.*slices and rerun_failed_hosts`},
		{`playbook = "x"
  rerun_failed_hosts = true`, `(?s)Re-Run Needs A Name.*Set name`},
		{`playbook = "x"
  ad_hoc = { module = "ping", pattern = "all" }`, `(?s)Invalid Attribute Combination`},
		{`ad_hoc = { module = "not a module", pattern = "all" }`, `(?s)Invalid Module Name`},
		{`ad_hoc = { module = "when", pattern = "all" }`, `(?s)Invalid Module Name`},
		{`ad_hoc = { module = "ping", pattern = "  " }`, `(?s)Invalid Host Pattern`},
		// timeouts is a block, as in hashicorp/kubernetes; the attribute form of 0.1.0 pre-releases is refused.
		{`playbook = "x"
  timeouts = { create = "1m" }`, `(?s)Unsupported argument.*Did you mean to define a block of type "timeouts"`},
		{`playbook = "x"
  timeouts {
    create = "soon"
  }`, `(?s)Invalid Attribute Value Time Duration.*"soon" must be a string containing`},
		{`playbook = "x"
  timeouts {
    delete = "0s"
  }`, `(?s)Invalid Duration.*delete = "0s".*timeouts.delete must be a positive duration`},
	} {
		steps = append(steps, resource.TestStep{Config: run(c.body), PlanOnly: true, ExpectError: expectError(c.want)})
	}
	resource.Test(t, resource.TestCase{ProtoV6ProviderFactories: testAccProtoV6ProviderFactories, Steps: steps})
}

// TestAccRun_serviceAccountCredential: a run works with nothing but seed
// 001's pod-manager Role, through a service_account credential.
func TestAccRun_serviceAccountCredential(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-runsa")
	cfg := e.providerBlock() + fmt.Sprintf(`
resource "kubeplay_credential" "sa" {
  name      = %q
  kind      = "service_account"
  namespace = %q
}

resource "kubeplay_container_group" "g" {
  name       = %q
  namespace  = %q
  image      = %q
  credential = kubeplay_credential.sa.name
}

resource "kubeplay_run" "test" {
  container_group = kubeplay_container_group.g.name
  command         = ["sh", "-c", "echo ran as a pod-manager"]
}
`, randName("runner"), ns, randName("grp"), ns, acctest.TestImage())
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{{
			Config: cfg,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("successful")),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("output"), knownvalue.StringExact("ran as a pod-manager\n")),
			},
		}},
	})
}

// TestAccRun_nodeLabel runs in a pod shaped by a node label: its resources
// and templated labels reach the pod, and a verbatim spec's first container
// hosts the run.
func TestAccRun_nodeLabel(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-runlabel")
	group := randName("grp")
	cfg := e.runGroup(group, ns) + fmt.Sprintf(`
resource "kubeplay_node_label" "small" {
  name           = %q
  image          = %q
  cpu            = "100m"
  memory         = 64
  labels         = { tier = "small" }
  dynamic_labels = { origin = "{run.group}-{run.name}" }
}

resource "kubeplay_node_label" "custom" {
  name = %q
  spec = <<-EOT
    containers:
      - name: custom-pod
        image: %s
        imagePullPolicy: IfNotPresent
        command: ["/bin/sh", "-c"]
        args: ["while true; do sleep 30; done;"]
        resources: {requests: {cpu: 100m}}
  EOT
}

resource "kubeplay_run" "test" {
  name            = "labelled"
  container_group = kubeplay_container_group.g.name
  node_label      = kubeplay_node_label.small.name
  command         = ["sh", "-c", "echo in $(hostname)"]
}

resource "kubeplay_run" "custom" {
  container_group = kubeplay_container_group.g.name
  node_label      = kubeplay_node_label.custom.name
  command         = ["sh", "-c", "echo custom"]
}
`, randName("small"), acctest.TestImage(), randName("custom"), acctest.TestImage())
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{{
			Config: cfg,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("successful")),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("rendered_pod"), knownvalue.StringRegexp(expectError(
					`(?s)origin: `+group+`-labelled.*tier: small.*cpu: 100m\n\s+memory: 64Mi`))),
				statecheck.ExpectKnownValue("kubeplay_run.custom", tfjsonpath.New("status"), knownvalue.StringExact("successful")),
				statecheck.ExpectKnownValue("kubeplay_run.custom", tfjsonpath.New("output"), knownvalue.StringExact("custom\n")),
				statecheck.ExpectKnownValue("kubeplay_run.custom", tfjsonpath.New("rendered_pod"), knownvalue.StringRegexp(expectError(`name: custom-pod`))),
			},
		}},
	})
}

// TestAccRun_nodeLabelInterpreter: a node label's python_path and shell_type
// reach Ansible for the pod's own localhost: the facts come from the label's
// interpreter, /usr/bin/python3.11 (the test image's /usr/bin/python3 is a
// symlink to it, and Python reports the path it was started by), and the
// shell type is the label's host variable (the image has no shell but sh,
// so the variable is what shows). A run's own inventory is used as written.
// A held node of the label carries both to its runs and its inventory.
func TestAccRun_nodeLabelInterpreter(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-runpy")
	group, node := randName("grp"), randName("node")
	const playbook = `<<-YAML
    - hosts: all
      gather_facts: true
      gather_subset: ["!all"]
      tasks:
        - debug:
            msg: "python={{ ansible_facts.python.executable }} var={{ ansible_python_interpreter | default('unset') }} shell={{ ansible_shell_type | default('unset') }}"
  YAML`
	cfg := e.runGroup(group, ns) + fmt.Sprintf(`
resource "kubeplay_node_label" "py" {
  name        = %[1]q
  image       = %[2]q
  python_path = "/usr/bin/python3.11"
  shell_type  = "sh"
}

resource "kubeplay_run" "test" {
  container_group = kubeplay_container_group.g.name
  node_label      = kubeplay_node_label.py.name
  playbook        = %[3]s
}

resource "kubeplay_run" "own_inventory" {
  container_group = kubeplay_container_group.g.name
  node_label      = kubeplay_node_label.py.name
  inventory       = "localhost ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n"
  playbook        = %[3]s
}

resource "kubeplay_node" "n" {
  name            = %[4]q
  container_group = kubeplay_container_group.g.name
  node_label      = kubeplay_node_label.py.name
}

resource "kubeplay_run" "on_node" {
  container_group = kubeplay_container_group.g.name
  node            = kubeplay_node.n.name
  playbook        = %[3]s
}
`, randName("py"), acctest.TestImage(), playbook, node)
	msg := func(python, interpreter, shell string) knownvalue.Check {
		return knownvalue.StringRegexp(regexp.MustCompile(regexp.QuoteMeta(
			fmt.Sprintf(`"msg": "python=%s var=%s shell=%s"`, python, interpreter, shell))))
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{{
			Config: cfg,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("successful")),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("output"), msg("/usr/bin/python3.11", "/usr/bin/python3.11", "sh")),
				// The plan's pod is the pod: the settings travel in the bundle.
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("rendered_pod"), knownvalue.StringFunc(func(pod string) error {
					if strings.Contains(pod, runengine.EnvPythonPath) {
						return fmt.Errorf("the run pod carries %s:\n%s", runengine.EnvPythonPath, pod)
					}
					return nil
				})),
				statecheck.ExpectKnownValue("kubeplay_run.own_inventory", tfjsonpath.New("output"), msg("/usr/bin/python3", "/usr/bin/python3", "unset")),
				statecheck.ExpectKnownValue("kubeplay_run.on_node", tfjsonpath.New("pod_name"), knownvalue.StringExact(node)),
				statecheck.ExpectKnownValue("kubeplay_run.on_node", tfjsonpath.New("output"), msg("/usr/bin/python3.11", "/usr/bin/python3.11", "sh")),
				statecheck.ExpectKnownValue(nodeAddr, tfjsonpath.New("inventory"), knownvalue.StringExact(fmt.Sprintf(
					"%s ansible_connection=kubernetes.core.kubectl ansible_kubectl_namespace=%s ansible_kubectl_pod=%s "+
						"ansible_kubectl_container=worker ansible_python_interpreter=/usr/bin/python3.11 ansible_shell_type=sh", node, ns, node))),
				statecheck.ExpectKnownValue(nodeAddr, tfjsonpath.New("rendered_pod"), knownvalue.StringRegexp(regexp.MustCompile(
					`(?s)- name: KUBEPLAY_PYTHON_PATH\n\s+value: /usr/bin/python3\.11\n\s+- name: KUBEPLAY_SHELL_TYPE\n\s+value: sh\n`))),
			},
		}},
	})
}

// TestAccRun_podSecurity: a node label asking for a privileged container or
// a hostPath volume is refused at plan for a group at the default level,
// baseline, naming the label and each failed check, before any pod exists;
// with the group at privileged the same run plans and runs.
func TestAccRun_podSecurity(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-runpsa")
	group, priv, host := randName("grp"), randName("priv"), randName("host")
	cfg := func(level, label string) string {
		g := fmt.Sprintf(`
resource "kubeplay_container_group" "g" {
  name      = %q
  namespace = %q
  image     = %q
`, group, ns, acctest.TestImage())
		if level != "" {
			g += fmt.Sprintf("  pod_security_level = %q\n", level)
		}
		return e.providerBlock() + g + fmt.Sprintf(`}

resource "kubeplay_node_label" "priv" {
  name       = %q
  privileged = true
}

resource "kubeplay_node_label" "host" {
  name          = %q
  volumes       = yamlencode([{ name = "host", hostPath = { path = "/tmp" } }])
  volume_mounts = yamlencode([{ name = "host", mountPath = "/host" }])
}

resource "kubeplay_run" "test" {
  container_group = kubeplay_container_group.g.name
  node_label      = kubeplay_node_label.%s.name
  command         = ["sh", "-c", "echo privileged run"]
}
`, priv, host, label)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{
			{
				Config: cfg("", "priv"),
				ExpectError: expectError(`(?s)Run Pod Below Pod Security Level.*node_label.*node label "` + priv + `" the run pod violates ` +
					`PodSecurity "baseline:latest". Failed checks:.*- privileged: container "worker" must not set ` +
					`securityContext.privileged=true`),
			},
			{
				Config: cfg("baseline", "host"),
				ExpectError: expectError(`(?s)Run Pod Below Pod Security Level.*node_label.*node label "` + host + `" the run pod violates ` +
					`PodSecurity "baseline:latest". Failed checks:.*- hostPath volumes: volume "host"`),
			},
			{
				Config: cfg("privileged", "priv"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue(runAddr, tfjsonpath.New("rendered_pod"), knownvalue.StringRegexp(expectError(`privileged: true`))),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("successful")),
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("output"), knownvalue.StringExact("privileged run\n")),
				},
			},
		},
	})
}

// TestAccRun_definitionsChangeInSameApply: a group and a label changed in the
// same apply as a new run of them give the run a rendered_pod known at plan,
// made from the new definitions, and the apply agrees with the plan. A
// settings-only update keeps the run's record known at plan.
func TestAccRun_definitionsChangeInSameApply(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-runchange")
	group, label := randName("grp"), randName("lbl")
	cfg := func(rev string, memory int, ignoreFailure bool) string {
		return e.providerBlock() + fmt.Sprintf(`
resource "kubeplay_container_group" "g" {
  name      = %q
  namespace = %q
  image     = %q
  labels    = { rev = "r%s" }
}

resource "kubeplay_node_label" "l" {
  name   = %q
  image  = %q
  memory = %d
}

resource "kubeplay_run" "test" {
  container_group = kubeplay_container_group.g.name
  node_label      = kubeplay_node_label.l.name
  command         = ["sh", "-c", "echo rev %s"]
  ignore_failure  = %t
}
`, group, ns, acctest.TestImage(), rev, label, acctest.TestImage(), memory, rev, ignoreFailure)
	}
	rendered := func(rev string, memory int) knownvalue.Check {
		return knownvalue.StringRegexp(expectError(fmt.Sprintf(`(?s)rev: r%s\n.*memory: %dMi`, rev, memory)))
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{
			{
				// Created together: the pod is known at plan all the same.
				Config: cfg("1", 64, false),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue(runAddr, tfjsonpath.New("rendered_pod"), rendered("1", 64)),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("rendered_pod"), rendered("1", 64)),
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("output"), knownvalue.StringExact("rev 1\n")),
				},
			},
			{
				Config: cfg("2", 96, false),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("kubeplay_container_group.g", plancheck.ResourceActionUpdate),
					plancheck.ExpectResourceAction("kubeplay_node_label.l", plancheck.ResourceActionUpdate),
					plancheck.ExpectResourceAction(runAddr, plancheck.ResourceActionDestroyBeforeCreate),
					plancheck.ExpectKnownValue(runAddr, tfjsonpath.New("rendered_pod"), rendered("2", 96)),
					plancheck.ExpectUnknownValue(runAddr, tfjsonpath.New("status")),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("rendered_pod"), rendered("2", 96)),
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("output"), knownvalue.StringExact("rev 2\n")),
				},
			},
			{
				// A setting that runs nothing: the record is known at plan.
				Config: cfg("2", 96, true),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(runAddr, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("successful")),
					plancheck.ExpectKnownValue(runAddr, tfjsonpath.New("output"), knownvalue.StringExact("rev 2\n")),
					plancheck.ExpectKnownValue(runAddr, tfjsonpath.New("rendered_pod"), rendered("2", 96)),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("ignore_failure"), knownvalue.Bool(true)),
				},
			},
		},
	})
}

// TestAccRun_badCredential: a credential whose CA was changed outside
// Terraform is rewritten before the run; one whose token was revoked fails
// the run with the cause and the credential to fix (a warning at plan, an
// error at apply), and one given a wrong CA fails its own apply; no pod is
// created and nothing is left.
func TestAccRun_badCredential(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-runcred")
	token := e.token(ns, "awx", "edit")
	host, ca := e.clusterHostAndCA()
	cred, group := randName("awx"), randName("grp")
	base := e.providerBlock() + tokenVar + e.credentialGroup(cred, group, ns, host, ca)
	withRun := base + runTrue
	wrongCA := e.providerBlock() + tokenVar + e.credentialGroup(cred, group, ns, host, selfSignedCA(t))
	vars := config.Variables{"token": config.StringVariable(token)}
	noLeaks := resource.ComposeTestCheckFunc(e.checkNoRunPods(ns), func(*terraform.State) error {
		return acctest.Leaks(context.Background(), e.kube, groupLeaks(ns, group))
	})
	var clock *faultClock
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		TerraformVersionChecks:   writeOnlyVersions,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{
			{Config: base, ConfigVariables: vars},
			{
				// The CA the catalog stores was changed (digest and all). The refresh reads it,
				// so the plan rewrites the credential before the run; the dry run's failure is a warning.
				PreConfig: func() {
					e.editSecret(cred, func(s *corev1.Secret) {
						s.Data["ca.crt"] = []byte(selfSignedCA(t))
						s.Annotations[credential.AnnotationDigest] = credential.Digest(s.Data)
					})
				},
				Config: withRun, ConfigVariables: vars,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("kubeplay_credential.awx", plancheck.ResourceActionUpdate),
					plancheck.ExpectResourceAction("kubeplay_run.test", plancheck.ResourceActionCreate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("kubeplay_run.test", tfjsonpath.New("status"), knownvalue.StringExact("successful")),
				},
			},
			{Config: base, ConfigVariables: vars},
			{
				// Revoke the token: deleting its ServiceAccount invalidates it.
				PreConfig: func() {
					if err := e.kube.CoreV1().ServiceAccounts(ns).Delete(context.Background(), "awx", metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
					e.waitTokenRejected(host, ca, token)
					clock = startFault(t, "bad_token")
				},
				Config: withRun, ConfigVariables: vars,
				ExpectError: expectError(`(?s)Run Credential Rejected.*401 Unauthorized.*` + cred),
			},
			{
				// The failed run, kept tainted in the state, goes; it created no pod.
				PreConfig: func() { clock.end("apply error Run Credential Rejected") },
				Config:    base, ConfigVariables: vars,
				Check: noLeaks,
			},
			{
				// A wrong CA in the configuration: the credential's own apply fails, before any run.
				PreConfig: func() { clock = startFault(t, "bad_ca") },
				Config:    wrongCA + runTrue, ConfigVariables: vars,
				ExpectError: expectError(`(?s)TLS Verification Failed.*certificate signed by unknown authority`),
			},
			{
				PreConfig: func() { clock.end("apply error TLS Verification Failed (credential)") },
				Config:    base, ConfigVariables: vars,
				Check: noLeaks,
			},
		},
	})
}

func (e *testEnv) credentialGroup(cred, group, ns, host, ca string) string {
	return fmt.Sprintf(`
resource "kubeplay_credential" "awx" {
  name            = %q
  kind            = "bearer_token"
  host            = %q
  bearer_token_wo = var.token
  ca_cert         = %q
  namespace       = %q
}

resource "kubeplay_container_group" "g" {
  name       = %q
  namespace  = %q
  image      = %q
  credential = kubeplay_credential.awx.name
}
`, cred, host, ca, ns, group, ns, acctest.TestImage())
}

// TestAccRun_destroyNotBlocked: a run whose pod the cluster refuses (here a
// LimitRange added after its group) fails its apply and is not in the state;
// terraform destroy still removes the rest, although Terraform plans that
// run again in the refresh before the destroy.
func TestAccRun_destroyNotBlocked(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-rundestroy")
	group := randName("grp")
	base := e.providerBlock() + fmt.Sprintf(`
resource "kubeplay_container_group" "g" {
  name      = %q
  namespace = %q
  image     = %q
  pod_spec_override = <<-EOT
    spec:
      containers:
        - name: worker
          resources:
            requests: {cpu: 50m}
            limits: {cpu: 200m}
  EOT
}
`, group, ns, acctest.TestImage())
	withRun := base + `
resource "kubeplay_run" "test" {
  container_group = kubeplay_container_group.g.name
  command         = ["true"]
}
`
	limitCPU := func() {
		lr := &corev1.LimitRange{
			ObjectMeta: metav1.ObjectMeta{Name: "small"},
			Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
				Type: corev1.LimitTypeContainer, Max: corev1.ResourceList{corev1.ResourceCPU: k8sresource.MustParse("100m")},
			}}},
		}
		if _, err := e.kube.CoreV1().LimitRanges(ns).Create(context.Background(), lr, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: func(s *terraform.State) error {
			if err := e.checkNoRunPods(ns)(s); err != nil {
				return err
			}
			if _, err := e.kube.CoreV1().ConfigMaps(e.catalog).Get(context.Background(), group, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("container group %s still in the catalog after destroy (err %v)", group, err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{Config: base},
			{
				PreConfig:   limitCPU,
				Config:      withRun,
				ExpectError: expectError(`(?s)maximum cpu usage per Container is 100m`),
			},
			{
				// The plan still holds the run, with the dry run's refusal as a warning.
				Config: withRun, PlanOnly: true, ExpectNonEmptyPlan: true,
			},
		},
	})
}

// waitTokenRejected waits until the API server refuses token: it caches a
// token's successful authentication for 10 seconds, so a revoked token
// still works that long.
func (e *testEnv) waitTokenRejected(host, ca, token string) {
	e.t.Helper()
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: []byte(ca)}})
	if err != nil {
		e.t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := kube.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if apierrors.IsUnauthorized(err) {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the revoked token is still accepted after a minute (last error %v)", err)
		}
		time.Sleep(time.Second)
	}
}
