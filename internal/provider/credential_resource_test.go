// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	"github.com/hashicorp/terraform-plugin-testing/config"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/credential"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podexec"
)

const credAddr = "kubeplay_credential.test"

// tokenVar declares the token as an ephemeral input, as users pass secrets.
const tokenVar = `
variable "token" {
  type      = string
  sensitive = true
  ephemeral = true
}
`

// bearerConfig renders a bearer_token credential; token is an HCL expression.
func bearerConfig(e *testEnv, name, host, token, ca, extra string) string {
	caLine := ""
	if ca != "" {
		caLine = fmt.Sprintf("  ca_cert         = %q\n", ca)
	}
	cfg := e.providerBlock() + fmt.Sprintf(`
resource "kubeplay_credential" "test" {
  name            = %q
  kind            = "bearer_token"
  host            = %q
  bearer_token_wo = %s
%s%s}
`, name, host, token, caLine, extra)
	if token == "var.token" {
		cfg += tokenVar
	}
	return cfg
}

// TestAccCredential_bearerToken covers create, update, import, drift of the
// stored Secret, out-of-band deletion, a new token sent by a change of
// bearer_token_wo_version (and not without one), and that the tokens reach
// neither the state nor a TF_LOG=trace log.
func TestAccCredential_bearerToken(t *testing.T) {
	e := newProcessWideTestEnv(t, "captures Terraform and provider logs through TF_LOG and TF_ACC_LOG_PATH, which are process-wide")
	logFile := filepath.Join(t.TempDir(), "terraform.log")
	t.Setenv("TF_LOG", "trace")
	t.Setenv("TF_ACC_LOG_PATH", logFile)

	ns := e.namespace("kp-bearer")
	token := e.token(ns, "awx", "edit")
	// The next token is another account's, so the identity shows which one the check used.
	token2 := e.token(ns, "awx2", "edit")
	host, ca := e.clusterHostAndCA()
	name := randName("awx")
	vars := config.Variables{"token": config.StringVariable(token)}
	vars2 := config.Variables{"token": config.StringVariable(token2)}
	const desc = "  description     = \"AWX container group credential\"\n"
	version := func(v int) string { return fmt.Sprintf("  bearer_token_wo_version = %d\n", v) }

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		TerraformVersionChecks:   writeOnlyVersions,
		CheckDestroy:             e.checkSecretGone(name),
		Steps: []resource.TestStep{
			{
				ConfigVariables: vars,
				Config:          bearerConfig(e, name, host, "var.token", ca, fmt.Sprintf("  namespace       = %q\n", ns)+version(1)),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(credAddr, tfjsonpath.New("username"), knownvalue.StringExact("system:serviceaccount:"+ns+":awx")),
					statecheck.ExpectKnownValue(credAddr, tfjsonpath.New("server_version"), knownvalue.StringRegexp(regexp.MustCompile(`^v1\.`))),
					statecheck.ExpectKnownValue(credAddr, tfjsonpath.New("can_run_pods"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue(credAddr, tfjsonpath.New("missing_permissions"), knownvalue.ListExact([]knownvalue.Check{})),
					statecheck.ExpectKnownValue(credAddr, tfjsonpath.New("bearer_token_wo"), knownvalue.Null()),
					statecheck.ExpectKnownValue(credAddr, tfjsonpath.New("bearer_token_wo_version"), knownvalue.Int64Exact(1)),
					statecheck.ExpectKnownValue(credAddr, tfjsonpath.New("verify_ssl"), knownvalue.Bool(true)),
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					checkNoSecretInState(token),
					e.checkSecretData(name, "token", token),
				),
			},
			{
				// An update keeps the Secret and re-checks; the default namespace
				// is not covered by the account's RoleBinding: a warning, not an error.
				ConfigVariables: vars,
				Config:          bearerConfig(e, name, host, "var.token", ca, desc+version(1)),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(credAddr, plancheck.ResourceActionUpdate)},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(credAddr, tfjsonpath.New("description"), knownvalue.StringExact("AWX container group credential")),
					statecheck.ExpectKnownValue(credAddr, tfjsonpath.New("can_run_pods"), knownvalue.Bool(false)),
					statecheck.ExpectKnownValue(credAddr, tfjsonpath.New("missing_permissions"), knownvalue.ListPartial(map[int]knownvalue.Check{
						0: knownvalue.StringExact("get pods"),
					})),
				},
				Check: checkNoSecretInState(token),
			},
			{
				ResourceName:                         credAddr,
				ImportState:                          true,
				ImportStateId:                        name,
				ImportStateVerify:                    true,
				ImportStateVerifyIdentifierAttribute: "name",
				ConfigVariables:                      vars,
			},
			{
				// Drift: the stored host was edited outside Terraform.
				PreConfig:       func() { e.editSecret(name, func(s *corev1.Secret) { s.Data["host"] = []byte("https://127.0.0.2:1") }) },
				ConfigVariables: vars,
				Config:          bearerConfig(e, name, host, "var.token", ca, desc+version(1)),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(credAddr, plancheck.ResourceActionUpdate),
						plancheck.ExpectKnownValue(credAddr, tfjsonpath.New("host"), knownvalue.StringExact(host)),
					},
				},
				Check: e.checkSecretData(name, "host", host),
			},
			{
				// Drift of secret material: the token was replaced by hand.
				PreConfig:       func() { e.editSecret(name, func(s *corev1.Secret) { s.Data["token"] = []byte("tampered") }) },
				ConfigVariables: vars,
				Config:          bearerConfig(e, name, host, "var.token", ca, desc+version(1)),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(credAddr, plancheck.ResourceActionUpdate)},
				},
				Check: e.checkSecretData(name, "token", token),
			},
			{
				// Out-of-band deletion: the plan creates it again.
				PreConfig:       func() { e.deleteSecret(name) },
				ConfigVariables: vars,
				Config:          bearerConfig(e, name, host, "var.token", ca, desc+version(1)),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(credAddr, plancheck.ResourceActionCreate)},
				},
				Check: e.checkSecretData(name, "token", token),
			},
			{
				// A new token alone: Terraform sees no change, and the Secret keeps the old one.
				ConfigVariables: vars2,
				Config:          bearerConfig(e, name, host, "var.token", ca, desc+version(1)),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				Check: e.checkSecretData(name, "token", token),
			},
			{
				// With a new version, the update checks the new token and writes it.
				ConfigVariables: vars2,
				Config:          bearerConfig(e, name, host, "var.token", ca, desc+version(2)),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(credAddr, plancheck.ResourceActionUpdate),
						plancheck.ExpectKnownValue(credAddr, tfjsonpath.New("bearer_token_wo_version"), knownvalue.Int64Exact(2)),
					},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(credAddr, tfjsonpath.New("bearer_token_wo_version"), knownvalue.Int64Exact(2)),
					statecheck.ExpectKnownValue(credAddr, tfjsonpath.New("username"), knownvalue.StringExact("system:serviceaccount:"+ns+":awx2")),
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					checkNoSecretInState(token2),
					e.checkSecretData(name, "token", token2),
				),
			},
			{
				// The version is kept in the catalog Secret: import restores it.
				ResourceName:                         credAddr,
				ImportState:                          true,
				ImportStateId:                        name,
				ImportStateVerify:                    true,
				ImportStateVerifyIdentifierAttribute: "name",
				ConfigVariables:                      vars2,
			},
		},
	})

	logBytes, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatalf("reading the trace log: %v", err)
	}
	logText := string(logBytes)
	// The log must be a real trace of this test, or its absence of the token proves nothing.
	if !strings.Contains(logText, "checking credential") || !strings.Contains(logText, name) {
		t.Fatalf("trace log %s (%d bytes) does not contain the provider's trace of credential %s", logFile, len(logBytes), name)
	}
	for _, tok := range []string{token, token2} {
		if i := strings.Index(logText, tok); i >= 0 {
			t.Logf("context: %s", logText[max(0, i-600):i])
			t.Fatalf("a bearer token appears in the TF_LOG=trace log %s", logFile)
		}
	}
}

// checkNoSecretInState fails when any attribute of any resource in the state
// contains secret.
func checkNoSecretInState(secret string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		for _, m := range s.Modules {
			for addr, rs := range m.Resources {
				for k, v := range rs.Primary.Attributes {
					if strings.Contains(v, secret) {
						return fmt.Errorf("%s.%s holds the secret", addr, k)
					}
				}
			}
		}
		return nil
	}
}

func (e *testEnv) checkSecretData(name, key, want string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		s, err := e.kube.CoreV1().Secrets(e.catalog).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := string(s.Data[key]); got != want {
			return fmt.Errorf("Secret %s/%s data %s = %q, want %q", e.catalog, name, key, got, want)
		}
		return nil
	}
}

func (e *testEnv) checkSecretGone(name string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		_, err := e.kube.CoreV1().Secrets(e.catalog).Get(context.Background(), name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("Secret %s/%s still exists after destroy (err=%v)", e.catalog, name, err)
		}
		return nil
	}
}

func (e *testEnv) editSecret(name string, edit func(*corev1.Secret)) {
	ctx := context.Background()
	s, err := e.kube.CoreV1().Secrets(e.catalog).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	edit(s)
	if _, err := e.kube.CoreV1().Secrets(e.catalog).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *testEnv) deleteSecret(name string) {
	if err := e.kube.CoreV1().Secrets(e.catalog).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func TestAccCredential_provider(t *testing.T) {
	e := newTestEnv(t)
	name := randName("self")
	host, _ := e.clusterHostAndCA()
	config := e.providerBlock() + fmt.Sprintf(`
resource "kubeplay_credential" "test" {
  name = %q
  kind = "provider"
}

data "kubeplay_credential" "test" {
  name = kubeplay_credential.test.name
}
`, name)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkSecretGone(name),
		Steps: []resource.TestStep{
			{
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(credAddr, tfjsonpath.New("host"), knownvalue.StringExact(host)),
					statecheck.ExpectKnownValue(credAddr, tfjsonpath.New("username"), knownvalue.StringExact(e.adminUser)),
					statecheck.CompareValuePairs(credAddr, tfjsonpath.New("username"), "data.kubeplay_credential.test", tfjsonpath.New("username"), compare.ValuesSame()),
					statecheck.CompareValuePairs(credAddr, tfjsonpath.New("groups"), "data.kubeplay_credential.test", tfjsonpath.New("groups"), compare.ValuesSame()),
					statecheck.ExpectKnownValue(credAddr, tfjsonpath.New("can_run_pods"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue(credAddr, tfjsonpath.New("service_account_name"), knownvalue.Null()),
					statecheck.ExpectKnownValue("data.kubeplay_credential.test", tfjsonpath.New("kind"), knownvalue.StringExact("provider")),
					statecheck.ExpectKnownValue("data.kubeplay_credential.test", tfjsonpath.New("username"), knownvalue.StringExact(e.adminUser)),
					statecheck.CompareValuePairs(credAddr, tfjsonpath.New("checked_at"), "data.kubeplay_credential.test", tfjsonpath.New("checked_at"), compare.ValuesSame()),
				},
			},
			{
				ResourceName:                         credAddr,
				ImportState:                          true,
				ImportStateId:                        name,
				ImportStateVerify:                    true,
				ImportStateVerifyIdentifierAttribute: "name",
			},
		},
	})
}

// TestAccCredential_kubeconfig covers a refused context, create, import, and
// a new kubeconfig sent by a change of kubeconfig_wo_version (and not
// without one).
func TestAccCredential_kubeconfig(t *testing.T) {
	e := newTestEnv(t)
	name := randName("kc")
	kc, err := os.ReadFile(e.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := clientcmd.Load(kc)
	if err != nil {
		t.Fatal(err)
	}
	// The next kubeconfig is a service account's, with the same context name,
	// so the identity shows which one the check used.
	ns := e.namespace("kp-kc")
	host, ca := e.clusterHostAndCA()
	kc2, err := credential.Kubeconfig(raw.CurrentContext, host, ca, "kc", e.token(ns, "kc", ""), ns)
	if err != nil {
		t.Fatal(err)
	}
	config := func(kc []byte, context string, version int) string {
		return e.providerBlock() + fmt.Sprintf(`
resource "kubeplay_credential" "test" {
  name                  = %q
  kind                  = "kubeconfig"
  kubeconfig_wo         = %q
  kubeconfig_wo_version = %d
  context               = %q
}
`, name, string(kc), version, context)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		TerraformVersionChecks:   writeOnlyVersions,
		CheckDestroy:             e.checkSecretGone(name),
		Steps: []resource.TestStep{
			{
				Config:      config(kc, "no-such-context", 1),
				ExpectError: expectError(`(?s)Invalid Kubeconfig.*no context "no-such-context"`),
			},
			{
				Config: config(kc, raw.CurrentContext, 1),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(credAddr, tfjsonpath.New("context"), knownvalue.StringExact(raw.CurrentContext)),
					statecheck.ExpectKnownValue(credAddr, tfjsonpath.New("kubeconfig_wo"), knownvalue.Null()),
					statecheck.ExpectKnownValue(credAddr, tfjsonpath.New("kubeconfig_wo_version"), knownvalue.Int64Exact(1)),
					statecheck.ExpectKnownValue(credAddr, tfjsonpath.New("username"), knownvalue.StringExact(e.adminUser)),
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					checkNoSecretInState("client-key-data"),
					e.checkSecretData(name, "kubeconfig", string(kc)),
				),
			},
			{
				ResourceName:                         credAddr,
				ImportState:                          true,
				ImportStateId:                        name,
				ImportStateVerify:                    true,
				ImportStateVerifyIdentifierAttribute: "name",
			},
			{
				// A new kubeconfig alone: Terraform sees no change, and the Secret keeps the old one.
				Config: config(kc2, raw.CurrentContext, 1),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				Check: e.checkSecretData(name, "kubeconfig", string(kc)),
			},
			{
				// With a new version, the update checks the new kubeconfig and writes it.
				Config: config(kc2, raw.CurrentContext, 2),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(credAddr, plancheck.ResourceActionUpdate),
						plancheck.ExpectKnownValue(credAddr, tfjsonpath.New("kubeconfig_wo_version"), knownvalue.Int64Exact(2)),
					},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(credAddr, tfjsonpath.New("kubeconfig_wo_version"), knownvalue.Int64Exact(2)),
					statecheck.ExpectKnownValue(credAddr, tfjsonpath.New("username"), knownvalue.StringExact("system:serviceaccount:"+ns+":kc")),
				},
				Check: e.checkSecretData(name, "kubeconfig", string(kc2)),
			},
			{
				// The version is kept in the catalog Secret: import restores it.
				ResourceName:                         credAddr,
				ImportState:                          true,
				ImportStateId:                        name,
				ImportStateVerify:                    true,
				ImportStateVerifyIdentifierAttribute: "name",
			},
		},
	})
}

// TestAccCredential_serviceAccount provisions an account, then uses only its
// exported kubeconfig to run a pod from the test image and exec into it,
// and checks that the token is refused anything outside its Role.
func TestAccCredential_serviceAccount(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-sa")
	other := e.namespace("kp-other")
	name := randName("runner")
	config := e.providerBlock() + fmt.Sprintf(`
resource "kubeplay_credential" "test" {
  name              = %q
  kind              = "service_account"
  namespace         = %q
  export_kubeconfig = true
}
`, name, ns)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: resource.ComposeAggregateTestCheckFunc(
			e.checkSecretGone(name),
			func(*terraform.State) error {
				_, err := e.kube.CoreV1().ServiceAccounts(ns).Get(context.Background(), name, metav1.GetOptions{})
				if !apierrors.IsNotFound(err) {
					return fmt.Errorf("ServiceAccount %s/%s survived destroy (err=%v)", ns, name, err)
				}
				_, err = e.kube.RbacV1().Roles(ns).Get(context.Background(), name+"-pod-manager", metav1.GetOptions{})
				if !apierrors.IsNotFound(err) {
					return fmt.Errorf("Role %s/%s-pod-manager survived destroy (err=%v)", ns, name, err)
				}
				return nil
			},
		),
		Steps: []resource.TestStep{
			{
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(credAddr, tfjsonpath.New("service_account_name"), knownvalue.StringExact(name)),
					statecheck.ExpectKnownValue(credAddr, tfjsonpath.New("username"), knownvalue.StringExact("system:serviceaccount:"+ns+":"+name)),
					statecheck.ExpectKnownValue(credAddr, tfjsonpath.New("can_run_pods"), knownvalue.Bool(true)),
					statecheck.ExpectSensitiveValue(credAddr, tfjsonpath.New("exported_kubeconfig")),
				},
				Check: func(s *terraform.State) error {
					kc := s.RootModule().Resources[credAddr].Primary.Attributes["exported_kubeconfig"]
					return useServiceAccountKubeconfig(kc, ns, other)
				},
			},
			{
				ResourceName:                         credAddr,
				ImportState:                          true,
				ImportStateId:                        name,
				ImportStateVerify:                    true,
				ImportStateVerifyIdentifierAttribute: "name",
			},
			{
				// The token Secret deleted outside Terraform: the plan re-provisions.
				PreConfig: func() {
					err := e.kube.CoreV1().Secrets(ns).Delete(context.Background(), name+"-token", metav1.DeleteOptions{})
					if err != nil {
						t.Fatal(err)
					}
				},
				Config: config,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(credAddr, plancheck.ResourceActionUpdate)},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(credAddr, tfjsonpath.New("can_run_pods"), knownvalue.Bool(true)),
				},
			},
		},
	})
}

// TestAccCredential_serviceAccountRefusesForeign: a ServiceAccount of the
// credential's name that kubeplay did not create is not adopted: the apply
// fails naming it and the remedy, and the account is left as it was.
func TestAccCredential_serviceAccountRefusesForeign(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-safor")
	name := randName("runner")
	sa, err := e.kube.CoreV1().ServiceAccounts(ns).Create(context.Background(),
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			got, err := e.kube.CoreV1().ServiceAccounts(ns).Get(context.Background(), name, metav1.GetOptions{})
			if err != nil || got.UID != sa.UID || got.ResourceVersion != sa.ResourceVersion {
				return fmt.Errorf("the foreign ServiceAccount %s/%s was deleted or changed (err=%v)", ns, name, err)
			}
			return nil
		},
		Steps: []resource.TestStep{{
			Config: e.providerBlock() + fmt.Sprintf(`
resource "kubeplay_credential" "test" {
  name      = %q
  kind      = "service_account"
  namespace = %q
}
`, name, ns),
			ExpectError: expectError(`(?s)Service Account Object Exists.*ServiceAccount ` + ns + `/` + name +
				` exists and was not created by kubeplay.*service_account_name`),
		}},
	})
}

func useServiceAccountKubeconfig(kubeconfig, ns, other string) error {
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(kubeconfig))
	if err != nil {
		return fmt.Errorf("exported kubeconfig: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pod, err := acctest.StartPod(ctx, kube, ns, "sa-probe", acctest.TestImage())
	if err != nil {
		return fmt.Errorf("the service account could not run a pod: %w", err)
	}
	var out strings.Builder
	code, err := podexec.Run(ctx, cfg, kube, ns, pod, "worker", []string{"sh", "-c", "cat; exit 3"},
		strings.NewReader("hello from stdin"), &out, &out)
	if err != nil {
		return fmt.Errorf("exec as the service account: %w", err)
	}
	if code != 3 || out.String() != "hello from stdin" {
		return fmt.Errorf("exec as the service account: exit %d, output %q; want exit 3 and the stdin echoed", code, out.String())
	}
	if _, err := kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		return fmt.Errorf("listing secrets with the pod-manager token: want 403 Forbidden, got %v", err)
	}
	if _, err := kube.CoreV1().Pods(other).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		return fmt.Errorf("listing pods in another namespace: want 403 Forbidden, got %v", err)
	}
	if err := kube.CoreV1().Pods(ns).Delete(ctx, pod, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		return fmt.Errorf("deleting the pod as the service account: %w", err)
	}
	return nil
}

// TestAccCredential_connectionErrors checks that each failure names its
// cause and the attribute to fix, and that a failed create leaves no Secret.
func TestAccCredential_connectionErrors(t *testing.T) {
	e := newTestEnv(t)
	host, ca := e.clusterHostAndCA()
	otherCA := selfSignedCA(t)
	name := randName("bad")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		TerraformVersionChecks:   writeOnlyVersions,
		CheckDestroy:             e.checkSecretGone(name),
		Steps: []resource.TestStep{
			{
				Config:      bearerConfig(e, name, host, `"not-a-valid-token"`, ca, ""),
				ExpectError: expectError(`(?s)Credential Rejected.*401 Unauthorized.*Check bearer_token_wo\.`),
			},
			{
				Config:      bearerConfig(e, name, host, `"not-a-valid-token"`, otherCA, ""),
				ExpectError: expectError(`(?s)TLS Verification Failed.*ca_cert`),
			},
			{
				// verify_ssl defaults to true: without ca_cert the system roots do not know the test CA.
				Config:      bearerConfig(e, name, host, `"not-a-valid-token"`, "", ""),
				ExpectError: expectError(`(?s)TLS Verification Failed.*certificate signed by unknown authority`),
			},
			{
				Config:      bearerConfig(e, name, "https://127.0.0.1:1", `"not-a-valid-token"`, ca, ""),
				ExpectError: expectError(`(?s)Cluster Unreachable.*https://127.0.0.1:1.*connection refused`),
			},
		},
	})
}

func selfSignedCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "not-the-cluster-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// TestAccCredential_planErrors covers each plan-time validation. It needs
// no cluster, so it runs in plain go test.
func TestAccCredential_planErrors(t *testing.T) {
	cred := func(body string) string {
		return "provider \"kubeplay\" {\n  host = \"https://127.0.0.1:1\"\n}\nresource \"kubeplay_credential\" \"test\" {\n" + body + "\n}\n"
	}
	ca := selfSignedCA(t)
	cases := []struct{ body, want string }{
		{`name = "Bad_Name"
  kind = "provider"`, `(?s)Attribute name must be a lowercase RFC 1123 label`},
		{`name = "x"
  kind = "password"`, `(?s)Attribute kind value must be one of`},
		{`name = "x"
  kind = "bearer_token"
  bearer_token_wo = "t"`, `(?s)Missing Required Attribute.*needs host`},
		{`name = "x"
  kind = "bearer_token"
  host = "https://127.0.0.1:1"`, `(?s)Missing Required Attribute.*needs bearer_token_wo:`},
		{`name = "x"
  kind = "bearer_token"
  host = "https://127.0.0.1:1"
  bearer_token_wo_version = 1`, `(?s)Invalid Attribute Combination.*bearer_token_wo_version = 1.*Attribute "bearer_token_wo" must be specified when "bearer_token_wo_version" is specified`},
		{`name = "x"
  kind = "provider"
  bearer_token_wo_version = 1`, `(?s)Attribute Not Allowed For Kind.*bearer_token_wo_version = 1.*bearer_token_wo_version does not apply to a credential of kind "provider"`},
		{`name = "x"
  kind = "bearer_token"
  host = "127.0.0.1:6443"
  bearer_token_wo = "t"`, `(?s)Invalid URL.*https://HOST`},
		{`name = "x"
  kind = "bearer_token"
  host = "https://127.0.0.1:1"
  bearer_token_wo = "t"
  ca_cert = "/etc/ssl/ca.crt"`, `(?s)Invalid PEM.*not its path`},
		{fmt.Sprintf(`name = "x"
  kind = "bearer_token"
  host = "https://127.0.0.1:1"
  bearer_token_wo = "t"
  verify_ssl = false
  ca_cert = %q`, ca), `(?s)Contradictory TLS Settings`},
		{`name = "x"
  kind = "provider"
  host = "https://127.0.0.1:1"`, `(?s)Attribute Not Allowed For Kind.*host does not apply.*"provider"`},
		{`name = "x"
  kind = "kubeconfig"
  context = "a"`, `(?s)Missing Required Attribute.*needs kubeconfig_wo:`},
		{`name = "x"
  kind = "kubeconfig"
  kubeconfig_wo = "{{{ not yaml"`, `(?s)Invalid Kubeconfig.*does not parse`},
		{`name = "x"
  kind = "kubeconfig"
  context = "a"
  kubeconfig_wo_version = 1`, `(?s)Invalid Attribute Combination.*kubeconfig_wo_version = 1.*Attribute "kubeconfig_wo" must be specified when "kubeconfig_wo_version" is specified`},
		{`name = "x"
  kind = "bearer_token"
  host = "https://127.0.0.1:1"
  bearer_token_wo = "t"
  kubeconfig_wo_version = 1`, `(?s)Attribute Not Allowed For Kind.*kubeconfig_wo_version = 1.*kubeconfig_wo_version does not apply to a credential of kind "bearer_token"`},
		{`name = "x"
  kind = "service_account"
  bearer_token_wo = "t"`, `(?s)Attribute Not Allowed For Kind.*bearer_token_wo does not apply`},
	}
	steps := make([]resource.TestStep, 0, len(cases))
	for _, c := range cases {
		steps = append(steps, resource.TestStep{Config: cred(c.body), PlanOnly: true, ExpectError: expectError(c.want)})
	}
	resource.UnitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		TerraformVersionChecks:   writeOnlyVersions,
		Steps:                    steps,
	})
}
