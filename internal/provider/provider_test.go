// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/tfinvocation"
)

// testAccProtoV6ProviderFactories serves the provider in-process to the
// Terraform CLI that acceptance tests run. Its parent is go test, not
// Terraform, so it takes testInvocation as the command that started it.
var testAccProtoV6ProviderFactories = map[string]func() (tfprotov6.ProviderServer, error){
	"kubeplay": providerserver.NewProtocol6WithError(newWithInvocation("test", testInvocation)()),
}

// testInvocation is terraform test's: like the steps of an acceptance test,
// it plans, applies and destroys in one command, so plans may check and
// reuse the records of checks not applied yet.
func testInvocation() tfinvocation.Invocation {
	return tfinvocation.Invocation{Known: true, Command: "test"}
}

// writeOnlyVersions: write-only attributes need Terraform 1.11.
var writeOnlyVersions = []tfversion.TerraformVersionCheck{tfversion.RequireAbove(tfversion.Version1_11_0)}

// testEnv is one acceptance test's view of the test cluster: an admin client,
// a catalog namespace of its own and the provider block that uses them.
type testEnv struct {
	t          testing.TB
	kubeconfig string
	kube       kubernetes.Interface
	catalog    string
	// adminUser is the identity of the test kubeconfig.
	adminUser string
}

// newTestEnv starts an acceptance test that shares the cluster: it runs in
// parallel with the package's other such tests (go test -parallel), so
// everything it makes has a name of its own and nothing it checks depends on
// another test's absence. Use it instead of resource.ParallelTest, which
// would call t.Parallel a second time.
func newTestEnv(t *testing.T) *testEnv {
	t.Helper()
	if os.Getenv(resource.EnvTfAcc) == "" {
		t.Skipf("acceptance test: set %s=1 to run it against a Kubernetes cluster", resource.EnvTfAcc)
	}
	acctest.Parallel(t)
	return newEnv(t)
}

// newDisruptiveTestEnv starts an acceptance test that disturbs the whole
// cluster (restarts the API server, stops a kubelet): see
// acctest.Disruptive. why says how.
func newDisruptiveTestEnv(t *testing.T, why string) *testEnv {
	t.Helper()
	return newSerialEnv(t, func() { acctest.Disruptive(t, why) })
}

// newSecondDisruptiveEnv starts an acceptance test that disturbs the local
// second cluster as a whole (restarts its API server, stops its kubelet), on
// that cluster: its tests (acctest.ClusterAPILock's) wait, the first
// cluster's do not. why says how.
func newSecondDisruptiveEnv(t *testing.T, why string) *testEnv {
	t.Helper()
	return newSerialEnvOn(t, func() {
		acctest.Disruptive(t, why)
		acctest.Exclusive(t, acctest.ClusterAPILock)
	}, acctest.LocalSecondKubeconfig)
}

// newProcessWideTestEnv starts an acceptance test that sets what is
// process-wide (environment variables, the working directory): see
// acctest.ProcessWide. why says what.
func newProcessWideTestEnv(t *testing.T, why string) *testEnv {
	t.Helper()
	return newSerialEnv(t, func() { acctest.ProcessWide(t, why) })
}

// newSerialEnv starts an acceptance test that mark keeps out of the
// parallel ones.
func newSerialEnv(t *testing.T, mark func()) *testEnv {
	t.Helper()
	return newSerialEnvOn(t, mark, acctest.Kubeconfig)
}

// newSerialEnvOn is newSerialEnv on the cluster whose kubeconfig kubeconfig
// returns.
func newSerialEnvOn(t *testing.T, mark func(), kubeconfig func(testing.TB) string) *testEnv {
	t.Helper()
	if os.Getenv(resource.EnvTfAcc) == "" {
		t.Skipf("acceptance test: set %s=1 to run it against a Kubernetes cluster", resource.EnvTfAcc)
	}
	mark()
	return newEnvOn(t, kubeconfig(t))
}

func newEnv(t *testing.T) *testEnv {
	t.Helper()
	return newEnvOn(t, acctest.Kubeconfig(t))
}

// newEnvOn is newEnv on the cluster of the kubeconfig kc.
func newEnvOn(t *testing.T, kc string) *testEnv {
	t.Helper()
	kube, err := kubernetes.NewForConfig(acctest.RESTConfigOf(t, kc))
	if err != nil {
		t.Fatal(err)
	}
	ssr, err := kube.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("asking the test cluster who the test kubeconfig is: %v", err)
	}
	e := &testEnv{t: t, kubeconfig: kc, kube: kube, catalog: randName("kp-catalog"), adminUser: ssr.Status.UserInfo.Username}
	t.Cleanup(func() { e.deleteNamespace(e.catalog) })
	return e
}

func randName(prefix string) string {
	return fmt.Sprintf("%s-%06x", prefix, rand.IntN(1<<24))
}

// unreachableProvider configures the provider with an address where nothing
// listens, for plans that fail in validation, before any connection.
const unreachableProvider = "provider \"kubeplay\" {\n  host = \"https://127.0.0.1:1\"\n}\n"

// providerBlock configures the provider with the admin kubeconfig.
func (e *testEnv) providerBlock() string {
	return fmt.Sprintf("provider \"kubeplay\" {\n  config_path       = %q\n  catalog_namespace = %q\n}\n", e.kubeconfig, e.catalog)
}

// namespace creates a namespace, ready for pods, deleted when the test ends.
func (e *testEnv) namespace(prefix string) string {
	e.t.Helper()
	return acctest.Namespace(e.t, e.kube, prefix)
}

func (e *testEnv) deleteNamespace(name string) {
	err := e.kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	if err != nil && !strings.Contains(err.Error(), "not found") {
		e.t.Errorf("deleting namespace %s: %v", name, err)
	}
}

// clusterHostAndCA returns the API server URL and CA of the test kubeconfig.
func (e *testEnv) clusterHostAndCA() (string, string) {
	e.t.Helper()
	raw, err := clientcmd.LoadFromFile(e.kubeconfig)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx := raw.Contexts[raw.CurrentContext]
	cl := raw.Clusters[ctx.Cluster]
	ca := cl.CertificateAuthorityData
	if len(ca) == 0 && cl.CertificateAuthority != "" {
		if ca, err = os.ReadFile(cl.CertificateAuthority); err != nil {
			e.t.Fatal(err)
		}
	}
	return cl.Server, string(ca)
}

// token creates a ServiceAccount in ns, optionally bound to a ClusterRole
// there, and returns a one-hour token for it from the TokenRequest API.
func (e *testEnv) token(ns, sa, clusterRole string) string {
	e.t.Helper()
	ctx := context.Background()
	if _, err := e.kube.CoreV1().ServiceAccounts(ns).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	if clusterRole != "" {
		bindClusterRole(e.t, e.kube, ns, sa, clusterRole)
	}
	return createToken(e.t, e.kube, ns, sa)
}

// TestAccProvider_configErrors: contradictory provider settings fail the
// plan with the attribute at fault.
// It needs no cluster, so it runs in plain go test.
func TestAccProvider_configErrors(t *testing.T) {
	ca := selfSignedCA(t)
	withCred := func(p string) string {
		return p + "\nresource \"kubeplay_credential\" \"test\" {\n  name = \"x\"\n  kind = \"provider\"\n}\n"
	}
	cases := []struct{ provider, want string }{
		{`provider "kubeplay" {
  config_path  = "a"
  config_paths = ["b"]
}`, `(?s)Invalid Attribute Combination.*config_paths`},
		{fmt.Sprintf(`provider "kubeplay" {
  host                   = "https://127.0.0.1:1"
  insecure               = true
  cluster_ca_certificate = %q
}`, ca), `(?s)Contradictory TLS Settings.*insecure = true`},
		{`provider "kubeplay" {
  host = "https://127.0.0.1:1"
  exec {
    api_version = "client.authentication.k8s.io/v1"
  }
}`, `(?s)Missing Exec Command`},
		{fmt.Sprintf(`provider "kubeplay" {
  host               = "https://127.0.0.1:1"
  client_certificate = %q
}`, ca), `(?s)Invalid Attribute Combination.*client_key`},
		{`provider "kubeplay" {
  host = "127.0.0.1:6443"
}`, `(?s)Invalid URL`},
		{`provider "kubeplay" {
  catalog_namespace = "Kubeplay System"
}`, `(?s)catalog_namespace must be a lowercase RFC 1123 label`},
	}
	steps := make([]resource.TestStep, 0, len(cases))
	for _, c := range cases {
		steps = append(steps, resource.TestStep{Config: withCred(c.provider), PlanOnly: true, ExpectError: expectError(c.want)})
	}
	resource.UnitTest(t, resource.TestCase{ProtoV6ProviderFactories: testAccProtoV6ProviderFactories, Steps: steps})
}

// TestAccProvider_connections configures the provider each way a user can and
// checks, through a provider-kind credential, which identity it connected as.
func TestAccProvider_connections(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-conn")
	token := e.token(ns, "tf", "")
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-tf"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "tf", Namespace: ns}},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
	}
	if _, err := e.kube.RbacV1().ClusterRoleBindings().Create(context.Background(), crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
	})
	host, ca := e.clusterHostAndCA()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	plugin := writeExecPlugin(t, tokenFile)
	name := randName("conn")
	cred := fmt.Sprintf("\nresource \"kubeplay_credential\" \"test\" {\n  name = %q\n  kind = \"provider\"\n}\n", name)
	user := "system:serviceaccount:" + ns + ":tf"
	expectUser := func(u string) []statecheck.StateCheck {
		return []statecheck.StateCheck{statecheck.ExpectKnownValue(credAddr, tfjsonpath.New("username"), knownvalue.StringExact(u))}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: fmt.Sprintf(`provider "kubeplay" {
  host                   = %q
  token                  = %q
  cluster_ca_certificate = %q
  catalog_namespace      = %q
}`, host, token, ca, e.catalog) + cred,
				ConfigStateChecks: expectUser(user),
				Check:             checkNoSecretInState(token),
			},
			{
				Config: fmt.Sprintf(`provider "kubeplay" {
  host                   = %q
  cluster_ca_certificate = %q
  catalog_namespace      = %q
  exec {
    api_version = "client.authentication.k8s.io/v1"
    command     = %q
  }
}`, host, ca, e.catalog, plugin) + cred,
				Taint:             []string{credAddr},
				ConfigStateChecks: expectUser(user),
			},
			{
				// The admin kubeconfig through config_path.
				Config:            e.providerBlock() + cred,
				Taint:             []string{credAddr},
				ConfigPlanChecks:  resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(credAddr, plancheck.ResourceActionDestroyBeforeCreate)}},
				ConfigStateChecks: expectUser(e.adminUser),
			},
		},
	})
}

// writeExecPlugin writes a client-go credential plugin that prints the token
// in tokenFile.
func writeExecPlugin(t *testing.T, tokenFile string) string {
	t.Helper()
	script := filepath.Join(t.TempDir(), "kubeplay-test-exec-plugin")
	body := fmt.Sprintf(`#!/bin/sh
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%%s"}}' "$(cat %q)"
`, tokenFile)
	if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
		t.Fatal(err)
	}
	return script
}
func bindClusterRole(t testing.TB, kube kubernetes.Interface, ns, sa, role string) {
	t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: sa + "-" + role},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(context.Background(), rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createToken(t testing.TB, kube kubernetes.Interface, ns, sa string) string {
	t.Helper()
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), sa,
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// expectError compiles pattern with every space matching any run of white
// space, since Terraform wraps diagnostic text at its terminal width.
func expectError(pattern string) *regexp.Regexp {
	return regexp.MustCompile(strings.ReplaceAll(pattern, " ", `\s+`))
}
