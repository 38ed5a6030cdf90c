// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/config"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalogkey"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/waitfor"
)

// TestAccExamples applies every directory under examples/ as it is, the
// files it reads included, with variables that point it at the test cluster;
// checks what it made; destroys it; and checks with client-go that nothing it
// made is left. Data source examples read what the matching resource example,
// applied with the terraform CLI as another workspace, defined.
//
// The examples' names are literal (awx-runs, target-infra, ...), so the
// subtests of one test run one after another; each has a catalog namespace
// of its own. The examples are split between this test (the provider,
// credentials, container groups and node labels) and
// TestAccExamples_runsAndPhases (held nodes, phases, clusterctl, runs),
// which make no namespace or CRD in common, so that make test-all runs the
// two in processes of their own at once: one after the other they were its
// longest job. The guides' configurations (examples/guides), which need the
// clusters and
// credentials they migrate from, and the subdirectories of resource examples
// are only validated, by TestDocsCodeBlocksValidate, as are the list
// examples; TestAccRunAction_example applies the action example.
func TestAccExamples(t *testing.T) {
	runExamples(t, examplesPlatform)
}

// TestAccExamples_runsAndPhases is TestAccExamples for the examples of held
// nodes, phases, clusterctl, runs and the node kubeconfig.
func TestAccExamples_runsAndPhases(t *testing.T) {
	runExamples(t, examplesRunsAndPhases)
}

// The example directories each test applies, and how.
var (
	examplesPlatform = []string{
		"provider", "quickstart", "project",
		"resources/kubeplay_credential", "resources/kubeplay_container_group", "resources/kubeplay_node_label",
		"data-sources/kubeplay_credential", "data-sources/kubeplay_container_group", "data-sources/kubeplay_node_label",
	}
	examplesRunsAndPhases = []string{
		"resources/kubeplay_node", "resources/kubeplay_phase", "resources/kubeplay_clusterctl", "resources/kubeplay_run",
		"ephemeral-resources/kubeplay_node_kubeconfig", "data-sources/kubeplay_phase",
	}
	exampleTests = map[string]func(t *testing.T, dir string, cli func() exampleCLI){
		"provider":                                     testExampleProvider,
		"quickstart":                                   withoutCLI(testExampleQuickstart),
		"project":                                      withoutCLI(testExampleProject),
		"resources/kubeplay_credential":                withoutCLI(testExampleCredential),
		"resources/kubeplay_container_group":           withoutCLI(testExampleContainerGroup),
		"resources/kubeplay_node_label":                withoutCLI(testExampleNodeLabel),
		"resources/kubeplay_node":                      withoutCLI(testExampleNode),
		"resources/kubeplay_phase":                     withoutCLI(testExamplePhase),
		"resources/kubeplay_clusterctl":                withoutCLI(testExampleClusterctl),
		"resources/kubeplay_run":                       withoutCLI(testExampleRun),
		"ephemeral-resources/kubeplay_node_kubeconfig": withoutCLI(testExampleNodeKubeconfig),
		"data-sources/kubeplay_credential":             testExampleCredentialData,
		"data-sources/kubeplay_container_group":        testExampleContainerGroupData,
		"data-sources/kubeplay_node_label":             testExampleNodeLabelData,
		"data-sources/kubeplay_phase":                  testExamplePhaseData,
	}
)

func withoutCLI(test func(t *testing.T, dir string)) func(*testing.T, string, func() exampleCLI) {
	return func(t *testing.T, dir string, _ func() exampleCLI) { test(t, dir) }
}

func runExamples(t *testing.T, dirs []string) {
	if os.Getenv(resource.EnvTfAcc) == "" {
		t.Skipf("acceptance test: set %s=1 to run it against a Kubernetes cluster", resource.EnvTfAcc)
	}
	root, err := acctest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	// The examples' required_providers name kubeplay/kubeplay; the framework
	// serves the in-process provider as hashicorp/kubeplay unless told.
	t.Setenv("TF_ACC_PROVIDER_NAMESPACE", "kubeplay")
	cli := sync.OnceValue(func() exampleCLI {
		var c exampleCLI
		c.bin, c.config, c.err = providerCLI(t)
		return c
	})
	for _, dir := range dirs {
		t.Run(dir, func(t *testing.T) {
			test := exampleTests[dir]
			if test == nil {
				t.Fatalf("examples/%s has no test in exampleTests", dir)
			}
			start := time.Now()
			test(t, filepath.Join(root, "examples", dir), cli)
			t.Logf("%s: %s", dir, time.Since(start).Round(100*time.Millisecond))
		})
	}
}

// TestExamplesAllApplied: every example directory of the provider, the
// quickstart, the project and each resource, data source and ephemeral
// resource is applied by one of the two tests, once.
func TestExamplesAllApplied(t *testing.T) {
	root, err := acctest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, pattern := range []string{"provider", "quickstart", "project", "resources/*", "data-sources/*", "ephemeral-resources/*"} {
		dirs, err := filepath.Glob(filepath.Join(root, "examples", pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range dirs {
			if tf, _ := filepath.Glob(filepath.Join(d, "*.tf")); len(tf) > 0 {
				rel, _ := filepath.Rel(filepath.Join(root, "examples"), d)
				want[filepath.ToSlash(rel)] = true
			}
		}
	}
	got := map[string]int{}
	for _, dir := range slices.Concat(examplesPlatform, examplesRunsAndPhases) {
		got[dir]++
	}
	for dir := range want {
		if got[dir] != 1 {
			t.Errorf("examples/%s is applied %d times by TestAccExamples and TestAccExamples_runsAndPhases, want once", dir, got[dir])
		}
	}
	for dir := range got {
		if !want[dir] {
			t.Errorf("examples/%s is applied but has no configuration", dir)
		}
	}
}

// Namespaces and CRDs the examples make; destroy must remove them all.
var (
	credentialExampleNamespaces = []string{"ci-runs"}
	groupExampleNamespaces      = []string{"team-runs", "awx-runs", "ci-runs"}
	phaseExampleNamespaces      = []string{"team-apps", "ephemeral-infra", "target-infra", "shop"}
	phaseExampleCRDs            = []string{"racks.infra.example.com"}
	runExampleNamespaces        = []string{"example-runs", "ansible-runs"}
)

// testExampleProvider applies the provider example with the provider built
// from this tree, started by terraform as a plugin: the in-process provider
// of the other tests is one server for every provider block, so the last
// block configured would serve all three.
func testExampleProvider(t *testing.T, dir string, cli func() exampleCLI) {
	c := cli()
	if c.err != nil {
		t.Fatal(c.err)
	}
	t.Setenv("TF_CLI_CONFIG_FILE", mirrorCLIConfig(t))
	x := newExampleEnv(t, dir, nil, nil)
	ns := x.namespace("example-provider")
	tokenUser, execUser := "token-user", "exec-user"
	token := x.token(ns, tokenUser, "")
	execToken := x.token(ns, execUser, "")
	x.bindClusterWide(ns, tokenUser, "cluster-admin")
	x.bindClusterWide(ns, execUser, "cluster-admin")
	// The eks block runs `aws eks get-token`: a stand-in on PATH prints a
	// token of another service account, so the identity shows which block
	// connected how.
	bin := t.TempDir()
	aws := fmt.Sprintf("#!/bin/sh\nprintf '%%s' '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"%s\"}}'\n", execToken)
	if err := os.WriteFile(filepath.Join(bin, "aws"), []byte(aws), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	host, ca := x.clusterHostAndCA()
	sa := func(name string) string { return "system:serviceaccount:" + ns + ":" + name }
	step := x.step(map[string]string{
		"cluster_endpoint": host,
		"cluster_ca":       ca,
		"cluster_token":    token,
	},
		statecheck.ExpectKnownOutputValue("identities", knownvalue.ObjectExact(map[string]knownvalue.Check{
			"kubeconfig": knownvalue.StringExact(x.adminUser),
			"token":      knownvalue.StringExact(sa(tokenUser)),
			"exec":       knownvalue.StringExact(sa(execUser)),
		})),
		statecheck.ExpectKnownValue("kubeplay_credential.eks", tfjsonpath.New("can_run_pods"), knownvalue.Bool(true)),
	)
	// No factories: terraform init installs the build from the mirror.
	step.ProtoV6ProviderFactories = nil
	step.Check = x.checkCatalog(3, 0, 0)
	resource.Test(t, x.testCase(x.checkGone, step))
}

// mirrorCLIConfig returns a CLI configuration that installs kubeplay/kubeplay
// from a filesystem mirror holding the build, since terraform init, which the
// framework runs, fails with dev_overrides when the registry is unreachable.
func mirrorCLIConfig(t *testing.T) string {
	t.Helper()
	mirror := t.TempDir()
	dir := filepath.Join(mirror, "registry.terraform.io", "kubeplay", "kubeplay", "0.0.1", runtime.GOOS+"_"+runtime.GOARCH)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	binDir, err := providerBuild()
	if err != nil {
		t.Fatal(err)
	}
	build := filepath.Join(binDir, "terraform-provider-kubeplay")
	if err = os.Symlink(build, filepath.Join(dir, "terraform-provider-kubeplay")); err != nil {
		t.Fatal(err)
	}
	rc := filepath.Join(mirror, "terraformrc")
	body := fmt.Sprintf(`provider_installation {
  filesystem_mirror {
    path    = %q
    include = ["registry.terraform.io/kubeplay/kubeplay"]
  }
  direct {
    exclude = ["registry.terraform.io/kubeplay/kubeplay"]
  }
}
`, mirror)
	if err := os.WriteFile(rc, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return rc
}

func testExampleQuickstart(t *testing.T, dir string) {
	ns := randName("example-quickstart")
	x := newExampleEnv(t, dir, []string{ns}, nil)
	resource.Test(t, x.testCase(x.checkGone,
		x.step(map[string]string{"namespace": ns},
			statecheck.ExpectKnownValue("kubeplay_run.hello", tfjsonpath.New("status"), knownvalue.StringExact("successful")),
			// localhost changed: counted, and not listed, as only hosts that failed or were unreachable are.
			statecheck.ExpectKnownValue("kubeplay_run.hello", tfjsonpath.New("host_counts"), hostCounts(0, 1, 0, 0, 0, 0)),
			statecheck.ExpectKnownValue("kubeplay_run.hello", tfjsonpath.New("host_stats"), knownvalue.MapExact(map[string]knownvalue.Check{})),
			statecheck.ExpectKnownOutputValue("output", knownvalue.StringRegexp(regexp.MustCompile(`Hello from an ephemeral pod \(release 2026\.11\)`))),
			// What make quickstart prints as the recap, with no python3 on the host.
			statecheck.ExpectKnownOutputValue("recap", knownvalue.StringExact(
				"hosts: changed=1, failed=0, ignored=0, ok=0, rescued=0, unreachable=0")),
			statecheck.ExpectKnownValue("kubeplay_container_group.quickstart", tfjsonpath.New("namespace"), knownvalue.StringExact(ns)),
		),
	))
}

// testExampleProject applies the project example: its playbook asserts the
// role, group_vars, ansible.cfg, binary file and collection; the limit on
// the constructed group leaves db1 out of the recap.
func testExampleProject(t *testing.T, dir string) {
	ns := randName("example-project")
	x := newExampleEnv(t, dir, []string{ns}, nil)
	none := knownvalue.ObjectPartial(map[string]knownvalue.Check{"failed": knownvalue.Int64Exact(0), "unreachable": knownvalue.Int64Exact(0)})
	resource.Test(t, x.testCase(x.checkGone,
		x.step(map[string]string{"namespace": ns},
			statecheck.ExpectKnownValue("kubeplay_run.site", tfjsonpath.New("status"), knownvalue.StringExact("successful")),
			// web1 and web2, counted; neither failed nor was unreachable, so none is listed.
			statecheck.ExpectKnownValue("kubeplay_run.site", tfjsonpath.New("host_count"), knownvalue.Int64Exact(2)),
			statecheck.ExpectKnownValue("kubeplay_run.site", tfjsonpath.New("host_counts"), none),
			statecheck.ExpectKnownValue("kubeplay_run.site", tfjsonpath.New("host_stats"), knownvalue.MapExact(map[string]knownvalue.Check{})),
			statecheck.ExpectKnownValue("kubeplay_run.site", tfjsonpath.New("output"), knownvalue.StringRegexp(regexp.MustCompile(`hello from the kubeplay\.demo collection on web1`))),
			statecheck.ExpectKnownValue("kubeplay_run.site", tfjsonpath.New("project_files").AtMapKey("files/tool.bin"), knownvalue.StringRegexp(regexp.MustCompile(`^0755 sha256:[0-9a-f]{64}$`))),
			statecheck.ExpectKnownOutputValue("project_hash", knownvalue.StringRegexp(regexp.MustCompile(`^[0-9a-f]{64}$`))),
		),
	))
}

// credentialVars sets up what the credential example needs: a service
// account whose token may run pods in any namespace (the awx credential
// checks awx-runs), and the test kubeconfig as the staging one.
func (x *exampleEnv) credentialVars() (vars map[string]string, awxUser string) {
	ns := x.namespace("example-awx")
	token := x.token(ns, "awx", "")
	x.bindClusterWide(ns, "awx", "edit")
	host, ca := x.clusterHostAndCA()
	return map[string]string{
		"host":               host,
		"cluster_ca":         ca,
		"awx_token":          token,
		"staging_kubeconfig": x.kubeconfig,
		"staging_context":    x.currentContext(),
	}, "system:serviceaccount:" + ns + ":awx"
}

func testExampleCredential(t *testing.T, dir string) {
	x := newExampleEnv(t, dir, credentialExampleNamespaces, nil)
	vars, awxUser := x.credentialVars()
	cred := func(name, attr string, want knownvalue.Check) statecheck.StateCheck {
		return statecheck.ExpectKnownValue("kubeplay_credential."+name, tfjsonpath.New(attr), want)
	}
	step := x.step(vars,
		cred("awx", "username", knownvalue.StringExact(awxUser)),
		cred("awx", "can_run_pods", knownvalue.Bool(true)),
		cred("awx", "namespace", knownvalue.StringExact("awx-runs")),
		cred("staging", "username", knownvalue.StringExact(x.adminUser)),
		cred("self", "username", knownvalue.StringExact(x.adminUser)),
		cred("runner", "username", knownvalue.StringExact("system:serviceaccount:ci-runs:runner")),
		cred("runner", "can_run_pods", knownvalue.Bool(true)),
		cred("runner", "exported_kubeconfig", knownvalue.StringRegexp(regexp.MustCompile(`(?m)^\s+namespace: ci-runs$`))),
	)
	step.Check = resource.ComposeTestCheckFunc(checkNoSecretInState(vars["awx_token"]), x.checkCatalog(4, 1, 0))
	resource.Test(t, x.testCase(x.checkGone, step))
}

func testExampleContainerGroup(t *testing.T, dir string) {
	x := newExampleEnv(t, dir, groupExampleNamespaces, nil)
	group := func(name, attr string, want knownvalue.Check) statecheck.StateCheck {
		return statecheck.ExpectKnownValue("kubeplay_container_group."+name, tfjsonpath.New(attr), want)
	}
	step := x.step(nil,
		group("team", "namespace", knownvalue.StringExact("team-runs")),
		group("team", "image", knownvalue.StringExact("quay.io/ansible/awx-ee:latest")),
		group("awx", "namespace", knownvalue.StringExact("awx-runs")),
		group("awx", "rendered_pod", knownvalue.StringRegexp(regexp.MustCompile(`(?s)name: ANSIBLE_FORCE_COLOR.*image: `+regexp.QuoteMeta(acctest.TestImage())))),
		group("pool", "namespace", knownvalue.StringExact("ci-runs")),
		group("pool", "pod_pending_timeout", knownvalue.StringExact("10m")),
		group("pool", "warm_pods", knownvalue.Int64Exact(2)),
	)
	step.Check = resource.ComposeTestCheckFunc(
		x.checkQuota("awx-runs", "kubeplay-awx", corev1.ResourcePods, "10"),
		x.checkQuota("ci-runs", "kubeplay-main", "requests.nvidia.com/gpu", "2"),
		func(*terraform.State) error {
			acctest.WaitWarmReady(t, x.kube, "ci-runs", "main", 2)
			return nil
		},
	)
	resource.Test(t, x.testCase(x.checkGone, step))
}

func testExampleNode(t *testing.T, dir string) {
	x := newExampleEnv(t, dir, []string{"ci-nodes", "ci-sandbox"}, nil)
	step := x.step(nil,
		statecheck.ExpectKnownValue("kubeplay_node.sandbox", tfjsonpath.New("kind"), knownvalue.StringExact("namespace")),
		statecheck.ExpectKnownValue("kubeplay_run.in_sandbox", tfjsonpath.New("output"), knownvalue.StringExact("working in namespace ci-sandbox\n")),
		statecheck.ExpectKnownValue("kubeplay_node.debug", tfjsonpath.New("status"), knownvalue.StringExact("running")),
		statecheck.ExpectKnownValue("kubeplay_run.check", tfjsonpath.New("pod_name"), knownvalue.StringExact("debug")),
		statecheck.ExpectKnownValue("kubeplay_run.check", tfjsonpath.New("status"), knownvalue.StringExact("successful")),
		// The second run read what the first wrote: the same pod.
		statecheck.ExpectKnownValue("kubeplay_run.check", tfjsonpath.New("output"), knownvalue.StringRegexp(regexp.MustCompile(`UTC 20\d\d`))),
	)
	resource.Test(t, x.testCase(x.checkGone, step))
}

// testExampleNodeKubeconfig: the node's kubeconfig reaches a run of
// another group through a write-only attribute.
func testExampleNodeKubeconfig(t *testing.T, dir string) {
	x := newExampleEnv(t, dir, []string{"staging-runs", "team-sandbox"}, nil)
	step := x.step(nil,
		statecheck.ExpectKnownValue("kubeplay_run.handoff", tfjsonpath.New("status"), knownvalue.StringExact("successful")),
		statecheck.ExpectKnownValue("kubeplay_run.handoff", tfjsonpath.New("output"), knownvalue.StringExact("got a kubeconfig for team-sandbox\n")),
	)
	resource.Test(t, x.testCase(x.checkGone, step))
}

func testExampleNodeLabel(t *testing.T, dir string) {
	x := newExampleEnv(t, dir, nil, nil)
	label := func(name, attr string, want knownvalue.Check) statecheck.StateCheck {
		return statecheck.ExpectKnownValue("kubeplay_node_label."+name, tfjsonpath.New(attr), want)
	}
	step := x.step(nil,
		label("large", "rendered_template", knownvalue.StringRegexp(regexp.MustCompile(`(?s)limits:\n\s+cpu: "2"\n\s+memory: 4Gi`))),
		label("fedora", "rendered_template", knownvalue.StringRegexp(regexp.MustCompile(`(?s)image: docker.io/fedora:40.*nvidia.com/gpu: "?1`))),
		label("custom", "rendered_template", knownvalue.StringRegexp(regexp.MustCompile(`name: custom-pod`))),
		label("namespace", "type", knownvalue.StringExact("namespace")),
	)
	step.Check = x.checkCatalog(0, 0, 4)
	resource.Test(t, x.testCase(x.checkGone, step))
}

// provisionWorkload01 does what Cluster API would for the phase example:
// namespace target-infra on the target cluster (the test cluster) holds
// workload01's kubeconfig, the test cluster's with its certificates
// embedded, in Secret workload01-kubeconfig, key value.
func (x *exampleEnv) provisionWorkload01() {
	x.t.Helper()
	ctx := context.Background()
	if _, err := x.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "target-infra"}}, metav1.CreateOptions{}); err != nil {
		x.t.Fatal(err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "workload01-kubeconfig"},
		Data:       map[string][]byte{"value": x.selfContainedKubeconfig()},
	}
	if _, err := x.kube.CoreV1().Secrets("target-infra").Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		x.t.Fatal(err)
	}
}

func (x *exampleEnv) phaseVars() map[string]string {
	return map[string]string{"target_kubeconfig": string(x.selfContainedKubeconfig())}
}

// phaseObjects checks a phase's objects, in document order.
func phaseObjects(addr string, objs ...[4]string) statecheck.StateCheck {
	l := make([]knownvalue.Check, 0, len(objs))
	for _, o := range objs {
		l = append(l, knownvalue.ObjectPartial(map[string]knownvalue.Check{
			"api_version": knownvalue.StringExact(o[0]), "kind": knownvalue.StringExact(o[1]),
			"namespace": knownvalue.StringExact(o[2]), "name": knownvalue.StringExact(o[3]),
		}))
	}
	return statecheck.ExpectKnownValue(addr, tfjsonpath.New("objects"), knownvalue.ListExact(l))
}

func testExamplePhase(t *testing.T, dir string) {
	x := newExampleEnv(t, dir, phaseExampleNamespaces, phaseExampleCRDs)
	step := x.step(x.phaseVars(),
		phaseObjects("kubeplay_phase.team", [4]string{"v1", "Namespace", "", "team-apps"}),
		phaseObjects("kubeplay_phase.initinfra_ephemeral",
			[4]string{"v1", "Namespace", "", "ephemeral-infra"},
			[4]string{"apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "racks.infra.example.com"}),
		phaseObjects("kubeplay_phase.initinfra_target",
			[4]string{"v1", "Namespace", "", "target-infra"},
			[4]string{"infra.example.com/v1alpha1", "Rack", "target-infra", "rack-a"},
			[4]string{"infra.example.com/v1alpha1", "Rack", "target-infra", "rack-b"},
			[4]string{"v1", "ConfigMap", "target-infra", "site-settings"}),
		phaseObjects("kubeplay_phase.workload",
			[4]string{"v1", "Namespace", "", "shop"},
			[4]string{"batch/v1", "Job", "shop", "migrate"}),
		statecheck.ExpectKnownValue("kubeplay_credential.workload", tfjsonpath.New("username"), knownvalue.StringExact(x.adminUser)),
	)
	prepare := step.PreConfig
	step.PreConfig = func() { x.provisionWorkload01(); prepare() }
	step.Check = func(*terraform.State) error {
		job, err := x.kube.BatchV1().Jobs("shop").Get(context.Background(), "migrate", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if job.Status.Succeeded != 1 {
			return fmt.Errorf("job shop/migrate has not succeeded: %+v", job.Status)
		}
		return nil
	}
	resource.Test(t, x.testCase(x.checkGone, step))
}

// testExampleClusterctl plans the example with the Cluster API release
// TestAccClusterctl_initAndMove installs: its plan has the two
// cert-manager phases, both inits and the move, and no error. It is not
// applied here: that test applies the same resources, and a move needs a
// provisioned Cluster, which only a test can fake.
func testExampleClusterctl(t *testing.T, dir string) {
	x := newExampleEnv(t, dir, nil, nil)
	vars := x.phaseVars()
	vars["core_components"], vars["core_metadata"], vars["cert_manager_manifests"] = capiFiles(t, nil)
	step := x.step(vars)
	step.PlanOnly, step.ExpectNonEmptyPlan = true, true
	step.ConfigPlanChecks = resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{
		plancheck.ExpectResourceAction("kubeplay_phase.cert_manager_ephemeral", plancheck.ResourceActionCreate),
		plancheck.ExpectResourceAction("kubeplay_phase.cert_manager_target", plancheck.ResourceActionCreate),
		plancheck.ExpectResourceAction("kubeplay_clusterctl.init_ephemeral", plancheck.ResourceActionCreate),
		plancheck.ExpectResourceAction("kubeplay_clusterctl.init_target", plancheck.ResourceActionCreate),
		plancheck.ExpectResourceAction("kubeplay_clusterctl.move", plancheck.ResourceActionCreate),
	}}
	resource.Test(t, x.testCase(x.checkGone, step))
}

func testExampleRun(t *testing.T, dir string) {
	x := newExampleEnv(t, dir, runExampleNamespaces, nil)
	password, token := randName("example-password"), randName("example-token")
	run := func(name, attr string, want knownvalue.Check) statecheck.StateCheck {
		return statecheck.ExpectKnownValue("kubeplay_run."+name, tfjsonpath.New(attr), want)
	}
	step := x.step(map[string]string{"db_password": password, "api_token": token},
		run("hello", "status", knownvalue.StringExact("successful")),
		run("hello", "output", knownvalue.StringRegexp(regexp.MustCompile(`"msg": "Hello from an ephemeral pod"`))),
		run("site", "status", knownvalue.StringExact("successful")),
		// limit = ["web"]: db1 is in the inventory but not in the recap; web1 and web2 changed.
		run("site", "host_count", knownvalue.Int64Exact(2)),
		run("site", "host_counts", hostCounts(0, 2, 0, 0, 0, 0)),
		run("site", "host_stats", knownvalue.MapExact(map[string]knownvalue.Check{})),
		run("placed", "container_group", knownvalue.StringExact("default")),
		run("placed", "status", knownvalue.StringExact("successful")),
	)
	step.Check = resource.ComposeTestCheckFunc(checkNoSecretInState(password), checkNoSecretInState(token))
	resource.Test(t, x.testCase(x.checkGone, step))
}

// The data source examples. Each reads definitions that another workspace,
// the matching resource example applied with the terraform CLI, made; the
// data source workspace's destroy leaves them, the other's removes them.

func testExampleCredentialData(t *testing.T, dir string, cli func() exampleCLI) {
	x := newExampleEnv(t, dir, credentialExampleNamespaces, nil)
	vars, awxUser := x.credentialVars()
	x.otherWorkspace(cli, "resources/kubeplay_credential", vars)
	resource.Test(t, x.testCase(x.checkStillDefined(4, 0, 0),
		x.step(nil,
			statecheck.ExpectKnownValue("data.kubeplay_credential.awx", tfjsonpath.New("kind"), knownvalue.StringExact("bearer_token")),
			statecheck.ExpectKnownValue("data.kubeplay_credential.awx", tfjsonpath.New("username"), knownvalue.StringExact(awxUser)),
			statecheck.ExpectKnownValue("data.kubeplay_credential.awx", tfjsonpath.New("namespace"), knownvalue.StringExact("awx-runs")),
			statecheck.ExpectKnownOutputValue("awx_can_run_pods", knownvalue.Bool(true)),
		),
	))
}

func testExampleContainerGroupData(t *testing.T, dir string, cli func() exampleCLI) {
	x := newExampleEnv(t, dir, groupExampleNamespaces, nil)
	x.otherWorkspace(cli, "resources/kubeplay_container_group", nil)
	resource.Test(t, x.testCase(x.checkStillDefined(1, 3, 0),
		x.step(nil,
			statecheck.ExpectKnownValue("data.kubeplay_container_group.awx", tfjsonpath.New("namespace"), knownvalue.StringExact("awx-runs")),
			statecheck.ExpectKnownValue("data.kubeplay_container_group.awx", tfjsonpath.New("max_concurrent_runs"), knownvalue.Int64Exact(10)),
			statecheck.ExpectKnownValue("data.kubeplay_container_group.awx", tfjsonpath.New("credential"), knownvalue.StringExact("awx")),
			statecheck.ExpectKnownOutputValue("awx_run_pod", knownvalue.StringRegexp(regexp.MustCompile(`image: `+regexp.QuoteMeta(acctest.TestImage())))),
		),
	))
}

func testExampleNodeLabelData(t *testing.T, dir string, cli func() exampleCLI) {
	x := newExampleEnv(t, dir, nil, nil)
	x.otherWorkspace(cli, "resources/kubeplay_node_label", nil)
	resource.Test(t, x.testCase(x.checkStillDefined(0, 0, 4),
		x.step(nil,
			statecheck.ExpectKnownValue("data.kubeplay_node_label.fedora", tfjsonpath.New("cpu"), knownvalue.StringExact("1")),
			statecheck.ExpectKnownValue("data.kubeplay_node_label.fedora", tfjsonpath.New("gpu_resource"), knownvalue.StringExact("nvidia.com/gpu")),
			statecheck.ExpectKnownOutputValue("fedora_template", knownvalue.StringRegexp(regexp.MustCompile(`image: docker.io/fedora:40`))),
		),
	))
}

func testExamplePhaseData(t *testing.T, dir string, cli func() exampleCLI) {
	x := newExampleEnv(t, dir, phaseExampleNamespaces, phaseExampleCRDs)
	x.provisionWorkload01()
	x.otherWorkspace(cli, "resources/kubeplay_phase", x.phaseVars())
	step := x.step(nil,
		statecheck.ExpectKnownOutputValue("target_infra_objects", knownvalue.SetExact([]knownvalue.Check{
			knownvalue.StringExact("Namespace /target-infra"),
			knownvalue.StringExact("Rack target-infra/rack-a"),
			knownvalue.StringExact("Rack target-infra/rack-b"),
			knownvalue.StringExact("ConfigMap target-infra/site-settings"),
		})),
	)
	// The inventory id is the one the phase put on its members.
	step.Check = func(s *terraform.State) error {
		ds := s.RootModule().Resources["data.kubeplay_phase.initinfra_target"]
		if ds == nil {
			return errors.New("no data.kubeplay_phase.initinfra_target in the state")
		}
		ns, err := x.kube.CoreV1().Namespaces().Get(context.Background(), "target-infra", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got, want := ds.Primary.Attributes["inventory_id"], ns.Labels["applyset.kubernetes.io/part-of"]; got == "" || got != want {
			return fmt.Errorf("inventory_id = %q, want %q, the part-of label of namespace target-infra", got, want)
		}
		return nil
	}
	resource.Test(t, x.testCase(x.checkStillDefined(2, 0, 0), step))
}

// exampleEnv is one example directory applied to the test cluster, with a
// catalog namespace of its own.
type exampleEnv struct {
	*testEnv
	t *testing.T
	// dir is the example directory.
	dir string
	// workParent is the TestCase's WorkingDir; the framework makes its
	// working directory, the one directory in it, when the test starts.
	workParent string
	prepared   bool
	// made are the namespaces and CRDs the example makes.
	made, crds []string
}

// exampleCLI is the terraform CLI and a CLI configuration for the provider
// built from this tree.
type exampleCLI struct {
	bin, config string
	err         error
}

func newExampleEnv(t *testing.T, dir string, namespaces, crds []string) *exampleEnv {
	t.Helper()
	e := newProcessWideTestEnv(t, "sets TF_ACC_PROVIDER_NAMESPACE and the working directory, which are process-wide")
	// newTestEnv's cleanup deletes whatever e.catalog names when the test ends.
	e.catalog = randName("example-catalog")
	x := &exampleEnv{testEnv: e, t: t, dir: dir, workParent: t.TempDir(), made: slices.Clone(namespaces), crds: crds}
	ctx := context.Background()
	for _, ns := range namespaces {
		if _, err := x.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil {
			t.Fatalf("namespace %s, which the example makes, already exists: an interrupted run left it; delete it", ns)
		}
	}
	// Normally destroy has removed them; this is for a test that failed.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		for _, ns := range x.made {
			if err := waitfor.Delete(ctx, x.kube.CoreV1().Namespaces(), ns, metav1.DeleteOptions{}, &corev1.Namespace{}); err != nil {
				t.Errorf("deleting namespace %s: %v", ns, err)
			}
		}
		for _, crd := range x.crds {
			if err := x.dynamic().Resource(crdResource).Delete(ctx, crd, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting CRD %s: %v", crd, err)
			}
		}
	})
	return x
}

// step applies the example directory with vars, and the kubeconfig and
// catalog namespace of the test.
func (x *exampleEnv) step(vars map[string]string, checks ...statecheck.StateCheck) resource.TestStep {
	v := config.Variables{
		"kubeconfig":        config.StringVariable(x.kubeconfig),
		"catalog_namespace": config.StringVariable(x.catalog),
	}
	for k, s := range vars {
		v[k] = config.StringVariable(s)
	}
	return resource.TestStep{
		// At the step: the example's own provider blocks configure it.
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		PreConfig:                x.prepareWorkDir,
		ConfigDirectory:          config.StaticDirectory(x.dir),
		ConfigVariables:          v,
		ConfigStateChecks:        checks,
	}
}

func (x *exampleEnv) testCase(checkDestroy func() error, steps ...resource.TestStep) resource.TestCase {
	return resource.TestCase{
		TerraformVersionChecks: writeOnlyVersions,
		WorkingDir:             x.workParent,
		CheckDestroy:           func(*terraform.State) error { return checkDestroy() },
		Steps:                  steps,
	}
}

// prepareWorkDir copies the example's subdirectories (roles/, a
// kustomization), which ConfigDirectory leaves out, into the framework's
// working directory, and makes that the process's working directory: the
// provider runs in this process, and resolves the relative paths an example
// gives it (a kustomization) from there, as it would in its own process
// started by terraform.
func (x *exampleEnv) prepareWorkDir() {
	if x.prepared {
		return
	}
	x.prepared = true
	work, err := filepath.Glob(filepath.Join(x.workParent, "work*"))
	if err != nil || len(work) != 1 {
		x.t.Fatalf("want one working directory in %s, found %v (%v)", x.workParent, work, err)
	}
	entries, err := os.ReadDir(x.dir)
	if err != nil {
		x.t.Fatal(err)
	}
	for _, de := range entries {
		if de.IsDir() {
			if err := os.CopyFS(filepath.Join(work[0], de.Name()), os.DirFS(filepath.Join(x.dir, de.Name()))); err != nil {
				x.t.Fatal(err)
			}
		}
	}
	x.t.Chdir(work[0])
}

// otherWorkspace applies the example directory rel (under examples/) with
// the terraform CLI and the provider built from this tree, from a copy with
// a state of its own, as another team's workspace would. When the test ends
// it is destroyed, and then nothing it made may be left.
func (x *exampleEnv) otherWorkspace(cli func() exampleCLI, rel string, vars map[string]string) {
	x.t.Helper()
	c := cli()
	if c.err != nil {
		x.t.Fatal(c.err)
	}
	ws := filepath.Join(x.t.TempDir(), "workspace")
	if err := os.CopyFS(ws, os.DirFS(filepath.Join(filepath.Dir(filepath.Dir(x.dir)), rel))); err != nil {
		x.t.Fatal(err)
	}
	all := map[string]string{"kubeconfig": x.kubeconfig, "catalog_namespace": x.catalog}
	for k, v := range vars {
		all[k] = v
	}
	b, err := json.Marshal(all)
	if err != nil {
		x.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "test.auto.tfvars.json"), b, 0o600); err != nil {
		x.t.Fatal(err)
	}
	args := []string{"-auto-approve", "-input=false", "-no-color", "-compact-warnings"}
	x.t.Cleanup(func() {
		if err := terraformCLI(c.bin, c.config, ws, append([]string{"destroy"}, args...)...); err != nil {
			x.t.Errorf("destroying the %s workspace: %v", rel, err)
			return
		}
		if err := x.checkGone(); err != nil {
			x.t.Errorf("after destroying the %s workspace: %v", rel, err)
		}
	})
	if err := terraformCLI(c.bin, c.config, ws, append([]string{"apply"}, args...)...); err != nil {
		x.t.Fatalf("applying %s as another workspace: %v", rel, err)
	}
}

// checkGone fails when anything the example made is left: a definition in
// its catalog namespace (credentials, groups, phase inventories, labels), a
// namespace or CRD it made, or a kubeplay pod in one of its namespaces.
func (x *exampleEnv) checkGone() error {
	ctx := context.Background()
	var errs []error
	if err := x.checkCatalog(0, 0, 0)(nil); err != nil {
		errs = append(errs, err)
	}
	for _, ns := range x.made {
		n, err := x.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		switch {
		case err == nil:
			errs = append(errs, fmt.Errorf("namespace %s is left (%s)", ns, n.Status.Phase))
		case !apierrors.IsNotFound(err):
			errs = append(errs, err)
		}
	}
	for _, crd := range x.crds {
		_, err := x.dynamic().Resource(crdResource).Get(ctx, crd, metav1.GetOptions{})
		switch {
		case err == nil:
			errs = append(errs, fmt.Errorf("CRD %s is left", crd))
		case !apierrors.IsNotFound(err):
			errs = append(errs, err)
		}
	}
	pods, err := x.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: managed.Selector()})
	if err != nil {
		errs = append(errs, err)
	} else {
		for _, p := range pods.Items {
			if slices.Contains(x.made, p.Namespace) {
				errs = append(errs, fmt.Errorf("kubeplay pod %s/%s is left", p.Namespace, p.Name))
			}
		}
	}
	return errors.Join(errs...)
}

// checkCatalog fails unless the catalog namespace holds exactly these
// numbers of credential Secrets, phase inventory ConfigMaps and node label
// PodTemplates, and no container group ConfigMap.
func (x *exampleEnv) checkCatalog(credentials, phases, labels int) resource.TestCheckFunc {
	return func(*terraform.State) error {
		ctx := context.Background()
		secrets, err := x.kube.CoreV1().Secrets(x.catalog).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		cms, err := x.kube.CoreV1().ConfigMaps(x.catalog).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		templates, err := x.kube.CoreV1().PodTemplates(x.catalog).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		// The catalog's key Secret stays with the catalog namespace; count
		// the credentials.
		creds := slices.DeleteFunc(secrets.Items, func(s corev1.Secret) bool { return s.Name == catalogkey.SecretName })
		var groupCMs, phaseCMs []string
		for _, cm := range cms.Items {
			switch {
			case cm.Name == "kube-root-ca.crt": // in every namespace
			case managed.Owns(&cm, managed.LabelComponent, managed.ComponentContainerGroup):
				groupCMs = append(groupCMs, cm.Name)
			default:
				phaseCMs = append(phaseCMs, cm.Name)
			}
		}
		got := [4]int{len(creds), len(groupCMs), len(phaseCMs), len(templates.Items)}
		if want := [4]int{credentials, 0, phases, labels}; got != want {
			return fmt.Errorf("catalog %s holds %d credential Secrets, %d group ConfigMaps, %d other ConfigMaps %v and %d PodTemplates; want %v",
				x.catalog, got[0], got[1], got[2], phaseCMs, got[3], want)
		}
		return nil
	}
}

// checkStillDefined is the data source workspace's CheckDestroy: its
// destroy deletes nothing, so the other workspace's definitions remain.
func (x *exampleEnv) checkStillDefined(credentials, groups, labels int) func() error {
	return func() error {
		ctx := context.Background()
		secrets, err := x.kube.CoreV1().Secrets(x.catalog).List(ctx, metav1.ListOptions{LabelSelector: managed.Selector(managed.LabelComponent, managed.ComponentCredential)})
		if err != nil {
			return err
		}
		cms, err := x.kube.CoreV1().ConfigMaps(x.catalog).List(ctx, metav1.ListOptions{LabelSelector: managed.Selector(managed.LabelComponent, managed.ComponentContainerGroup)})
		if err != nil {
			return err
		}
		templates, err := x.kube.CoreV1().PodTemplates(x.catalog).List(ctx, metav1.ListOptions{LabelSelector: managed.Selector(managed.LabelComponent, managed.ComponentNodeLabel)})
		if err != nil {
			return err
		}
		if got, want := [3]int{len(secrets.Items), len(cms.Items), len(templates.Items)}, [3]int{credentials, groups, labels}; got != want {
			return fmt.Errorf("after the data source workspace's destroy, catalog %s holds %v credentials, groups and labels; want %v", x.catalog, got, want)
		}
		return nil
	}
}

// checkQuota checks one hard limit of a ResourceQuota.
func (x *exampleEnv) checkQuota(ns, name string, res corev1.ResourceName, want string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		q, err := x.kube.CoreV1().ResourceQuotas(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := q.Spec.Hard[res]; got.String() != want {
			return fmt.Errorf("ResourceQuota %s/%s: %s = %s, want %s", ns, name, res, got.String(), want)
		}
		return nil
	}
}

// bindClusterWide binds a service account to a ClusterRole in every
// namespace, until the test ends.
func (x *exampleEnv) bindClusterWide(ns, sa, role string) {
	x.t.Helper()
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + sa},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
	}
	if _, err := x.kube.RbacV1().ClusterRoleBindings().Create(context.Background(), crb, metav1.CreateOptions{}); err != nil {
		x.t.Fatal(err)
	}
	x.t.Cleanup(func() {
		if err := x.kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			x.t.Errorf("deleting ClusterRoleBinding %s: %v", crb.Name, err)
		}
	})
}

// currentContext is the test kubeconfig's current context.
func (x *exampleEnv) currentContext() string {
	x.t.Helper()
	raw, err := clientcmd.LoadFromFile(x.kubeconfig)
	if err != nil {
		x.t.Fatal(err)
	}
	return raw.CurrentContext
}
