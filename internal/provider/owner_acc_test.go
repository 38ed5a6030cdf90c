// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/echoprovider"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
)

// ownerGroup is container group name on namespace ns, managing it, at
// level, declared through provider alias ("" for the default provider).
func ownerGroup(addr, alias, name, ns, level string) string {
	provider := ""
	if alias != "" {
		provider = "\n  provider         = kubeplay." + alias
	}
	return fmt.Sprintf(`
resource "kubeplay_container_group" %q {%s
  name               = %q
  namespace          = %q
  manage_namespace   = true
  image              = %q
  pod_security_level = %q
}
`, addr, provider, name, ns, acctest.TestImage(), level)
}

// TestAccContainerGroup_ownerUnique: two configurations, with catalogs in
// two catalog namespaces, declare group "deploy" on one managed namespace.
// The second is refused at plan, naming the first, and the first's
// namespace keeps its labels; the first's objects carry its owner id.
func TestAccContainerGroup_ownerUnique(t *testing.T) {
	e := newTestEnv(t)
	catalogB := randName("kp-catalog")
	t.Cleanup(func() { e.deleteNamespace(catalogB) })
	name, ns := randName("owner"), randName("kp-owned")
	t.Cleanup(func() { _ = e.kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	first := e.providerBlock() + ownerGroup("test", "", name, ns, "baseline")
	second := first + fmt.Sprintf("provider \"kubeplay\" {\n  alias             = \"b\"\n  config_path       = %q\n  catalog_namespace = %q\n}\n",
		e.kubeconfig, catalogB) + ownerGroup("b", "b", name, ns, "privileged")
	keepsLabels := e.checkNamespaceLabels(ns, map[string]string{"pod-security.kubernetes.io/enforce": "baseline",
		"kubeplay.io/container-group": name})
	ownerOnObjects := func(s *terraform.State) error {
		id := s.RootModule().Resources[groupAddr].Primary.Attributes["owner_id"]
		got, err := e.kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Annotations["kubeplay.io/owner-id"] != id || !strings.Contains(got.Annotations["kubeplay.io/owner"], e.catalog) {
			return fmt.Errorf("namespace %s annotations %v, want owner id %q of catalog %s", ns, got.Annotations, id, e.catalog)
		}
		return nil
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: first, Check: keepsLabels},
			{
				// The second configuration's plan fails at manage_namespace,
				// naming the first's catalog namespace.
				Config:   second,
				PlanOnly: true,
				ExpectError: regexp.MustCompile(`(?s)Namespace Owned By Another Container Group.*` + regexp.QuoteMeta(ns) +
					`.*catalog\s+namespace\s+"` + regexp.QuoteMeta(e.catalog) + `"`),
			},
			{
				// Nothing of the first changed: its plan is empty, its labels
				// and owner id are as it wrote them.
				Config: first,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(groupAddr, plancheck.ResourceActionNoop),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(groupAddr, tfjsonpath.New("owner_id"), knownvalue.StringRegexp(regexp.MustCompile(`^[0-9a-f]{32}$`))),
				},
				Check: resource.ComposeAggregateTestCheckFunc(keepsLabels, ownerOnObjects),
			},
		},
	})
}

// TestAccContainerGroup_podSecurityServerVersion: at restricted, kubeplay's
// plan gives a root pod with hostUsers: false the verdict of the cluster's
// own API server: refused up to v1.34 (v1.32 relaxes it only behind a
// feature gate), allowed from v1.35 on (make test-matrix runs both).
func TestAccContainerGroup_podSecurityServerVersion(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-userns")
	override := `spec:
  hostUsers: false
  securityContext:
    runAsUser: 0
    seccompProfile: {type: RuntimeDefault}
  containers:
  - name: worker
    securityContext:
      allowPrivilegeEscalation: false
      capabilities: {drop: [ALL]}
`
	// The server's own verdict, in a namespace enforcing restricted.
	ctx := context.Background()
	patch := []byte(`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"restricted"}}}`)
	if _, err := e.kube.CoreV1().Namespaces().Patch(ctx, ns, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "userns-"}, Spec: corev1.PodSpec{
		HostUsers: ptr.To(false),
		SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		Containers: []corev1.Container{{Name: "worker", Image: acctest.TestImage(), SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
	}}
	sv, err := e.kube.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	minor, err := strconv.Atoi(strings.TrimSuffix(sv.Minor, "+"))
	if err != nil {
		t.Fatalf("server version %+v: %v", sv, err)
	}
	_, err = e.kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	refuses := minor < 35
	if refuses != (apierrors.IsForbidden(err) && strings.Contains(err.Error(), "runAsNonRoot")) {
		t.Fatalf("the API server's (%s) verdict on a root pod with hostUsers: false at restricted: %v; want refused "+
			"up to v1.34 (without the UserNamespacesPodSecurityStandards gate), allowed from v1.35", sv.GitVersion, err)
	}
	if refuses {
		t.Logf("the API server (%s) refuses it: %v", sv.GitVersion, err)
	} else {
		t.Logf("the API server (%s) allows it", sv.GitVersion)
	}
	cfg := e.providerBlock() + fmt.Sprintf(`
resource "kubeplay_container_group" "test" {
  name               = %q
  namespace          = %q
  image              = %q
  pod_security_level = "restricted"
  pod_spec_override  = %q
}
`, randName("userns"), ns, acctest.TestImage(), override)
	step := resource.TestStep{Config: cfg, PlanOnly: true, ExpectNonEmptyPlan: true}
	if refuses {
		step.ExpectError = regexp.MustCompile(`(?s)Run Pod Below Pod Security Level.*runAsNonRoot.*Kubernetes\s+v1\.` + strconv.Itoa(minor) + `\b`)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps:                    []resource.TestStep{step},
	})
}

// accountChecks tries, with token, what the namespace account of ns may
// not do: make a privileged pod (the namespace's Pod Security level refuses
// it), make Secrets (a service-account-token Secret would mint a token that
// never expires), ServiceAccounts or tokens. Each is a server-side dry run.
func (e *testEnv) accountChecks(ctx context.Context, token, ns string) error {
	cfg := rest.AnonymousClientConfig(acctest.RESTConfig(e.t))
	cfg.BearerToken = token
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	priv := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "priv-"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c", Image: acctest.TestImage(),
			SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}}}
	_, err = kube.CoreV1().Pods(ns).Create(ctx, priv, dry)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "violates PodSecurity") {
		return fmt.Errorf("a privileged pod made with the namespace account's token: %v, want PodSecurity's refusal", err)
	}
	// A plain pod it may make: the account still does its job.
	plain := priv.DeepCopy()
	plain.Spec.Containers[0].SecurityContext = nil
	if _, err := kube.CoreV1().Pods(ns).Create(ctx, plain, dry); err != nil {
		return fmt.Errorf("a plain pod made with the namespace account's token: %w", err)
	}
	var errs []error
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "forever",
		Annotations: map[string]string{corev1.ServiceAccountNameKey: "kubeplay"}}, Type: corev1.SecretTypeServiceAccountToken}
	if _, err := kube.CoreV1().Secrets(ns).Create(ctx, sec, dry); !apierrors.IsForbidden(err) {
		errs = append(errs, fmt.Errorf("creating a token Secret: %v, want 403", err))
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "another"}}
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, sa, dry); !apierrors.IsForbidden(err) {
		errs = append(errs, fmt.Errorf("creating a ServiceAccount: %v, want 403", err))
	}
	tr := &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](48 * 3600)}}
	if _, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "kubeplay", tr, dry); !apierrors.IsForbidden(err) {
		errs = append(errs, fmt.Errorf("requesting a token of its own account: %v, want 403", err))
	}
	return errors.Join(errs...)
}

// TestAccRun_namespaceLabelSecurity: a namespace label may not set the Pod
// Security labels; a run's namespace enforces the group's level, and the
// run's account can neither make a privileged pod there nor mint tokens.
func TestAccRun_namespaceLabelSecurity(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-runsec")
	group, label := randName("grp"), randName("nsl")
	labelBlock := func(labels string) string {
		return fmt.Sprintf(`
resource "kubeplay_node_label" "ns" {
  name   = %q
  type   = "namespace"
  labels = %s
}
`, label, labels)
	}
	run := `
resource "kubeplay_run" "test" {
  container_group = kubeplay_container_group.g.name
  node_label      = kubeplay_node_label.ns.name
  command         = ["sh", "-c", "echo ns=$KUBEPLAY_NAMESPACE; sleep 20"]
}
`
	var probe *namespaceProbe
	var accountErr error
	done := make(chan struct{})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{
			{
				Config: e.runGroup(group, ns) + labelBlock(`{ team = "qa", "pod-security.kubernetes.io/enforce" = "privileged" }`) + run,
				ExpectError: regexp.MustCompile(`(?s)Pod Security Label Not Allowed.*pod-security.kubernetes.io/enforce.*` +
					`pod_security_level`),
			},
			{
				PreConfig: func() {
					ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
					go func() {
						defer close(done)
						defer cancel()
						if probe = e.probeRunNamespace(ctx, ns); probe.err == nil {
							accountErr = e.accountChecks(ctx, probe.token, probe.namespace)
						}
					}()
				},
				Config: e.runGroup(group, ns) + labelBlock(`{ team = "qa" }`) + run,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("successful")),
				},
				Check: func(*terraform.State) error {
					<-done
					switch {
					case probe.err != nil:
						return probe.err
					case probe.nsLabels["pod-security.kubernetes.io/enforce"] != "baseline" ||
						probe.nsLabels["pod-security.kubernetes.io/warn"] != "baseline" ||
						probe.nsLabels["pod-security.kubernetes.io/audit"] != "baseline":
						return fmt.Errorf("the run namespace's labels are %v, want the group's level (baseline) enforced", probe.nsLabels)
					}
					return accountErr
				},
			},
		},
	})
}

// jwtExpiry is the exp claim of a JWT, unverified: the token's own expiry.
func jwtExpiry(token string) (time.Time, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, errors.New("not a JWT")
	}
	body, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, err
	}
	var claims struct {
		Exp int64 `json:"exp"`
	}
	if err := json.Unmarshal(body, &claims); err != nil {
		return time.Time{}, err
	}
	return time.Unix(claims.Exp, 0), nil
}

// TestAccNode_namespaceSecurity: a held namespace node enforces its group's
// level; the account of its kubeconfig can neither make a privileged pod
// nor mint tokens; expires_at is the token's own expiry.
func TestAccNode_namespaceSecurity(t *testing.T) {
	e := newTestEnv(t)
	group, label, node, ns := randName("held"), randName("nsl"), randName("secnode"), e.namespace("kp-heldsec")
	cfg := e.runGroup(group, ns) + fmt.Sprintf(`
resource "kubeplay_node_label" "ns" {
  name   = %q
  type   = "namespace"
  labels = { team = "qa" }
}

resource "kubeplay_node" "n" {
  name            = %q
  container_group = kubeplay_container_group.g.name
  node_label      = kubeplay_node_label.ns.name
}

ephemeral "kubeplay_node_kubeconfig" "k" {
  node_id = kubeplay_node.n.id
  ttl     = "25m"
}

provider "echo" {
  data = jsonencode({
    kubeconfig = ephemeral.kubeplay_node_kubeconfig.k.kubeconfig
    expires_at = ephemeral.kubeplay_node_kubeconfig.k.expires_at
  })
}

resource "echo" "k" {}
`, label, node)
	check := func(s *terraform.State) error {
		n, err := e.kube.CoreV1().Namespaces().Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, mode := range []string{"enforce", "warn", "audit"} {
			if n.Labels["pod-security.kubernetes.io/"+mode] != "baseline" {
				return fmt.Errorf("the node's namespace has labels %v, want the group's level (baseline) enforced", n.Labels)
			}
		}
		var echoed struct {
			Kubeconfig string `json:"kubeconfig"`
			ExpiresAt  string `json:"expires_at"`
		}
		if err := json.Unmarshal([]byte(s.RootModule().Resources["echo.k"].Primary.Attributes["data"]), &echoed); err != nil {
			return err
		}
		kc, err := clientcmd.Load([]byte(echoed.Kubeconfig))
		if err != nil {
			return err
		}
		token := kc.AuthInfos[kc.Contexts[kc.CurrentContext].AuthInfo].Token
		exp, err := jwtExpiry(token)
		if err != nil {
			return fmt.Errorf("the node's token: %w", err)
		}
		if want := exp.UTC().Format(time.RFC3339); echoed.ExpiresAt != want {
			return fmt.Errorf("expires_at is %s, the token expires at %s", echoed.ExpiresAt, want)
		}
		return e.accountChecks(context.Background(), token, node)
	}
	factories := map[string]func() (tfprotov6.ProviderServer, error){
		"kubeplay": testAccProtoV6ProviderFactories["kubeplay"],
		"echo":     echoprovider.NewProviderServer(),
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_10_0)},
		Steps:                    []resource.TestStep{{Config: cfg, Check: check}},
	})
}

// TestAccCredential_serviceAccountOwnerUnique: another configuration's
// service_account credential "runner" (a catalog in another catalog
// namespace) made its ServiceAccount and token Secret in the namespace. A
// credential of the same name here is refused, naming the other, and
// neither changes nor deletes what the other made.
func TestAccCredential_serviceAccountOwnerUnique(t *testing.T) {
	e := newTestEnv(t)
	ns, name := e.namespace("kp-saown"), randName("runner")
	const otherID = "fedcba9876543210fedcba9876543210"
	meta := func(n string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: n, Labels: map[string]string{"app.kubernetes.io/managed-by": "kubeplay",
			"kubeplay.io/credential": name}, Annotations: map[string]string{"kubeplay.io/owner-id": otherID,
			"kubeplay.io/owner": `credential "` + name + `" of catalog namespace "team-b"`}}
	}
	var secretUID string
	others := func() {
		ctx := context.Background()
		if _, err := e.kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: meta(name)}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		m := meta(name + "-token")
		m.Annotations[corev1.ServiceAccountNameKey] = name
		sec, err := e.kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: m, Type: corev1.SecretTypeServiceAccountToken}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		secretUID = string(sec.UID)
	}
	intact := func(*terraform.State) error {
		ctx := context.Background()
		sec, err := e.kube.CoreV1().Secrets(ns).Get(ctx, name+"-token", metav1.GetOptions{})
		if err != nil || string(sec.UID) != secretUID || sec.Annotations["kubeplay.io/owner-id"] != otherID {
			return fmt.Errorf("the other credential's token Secret was changed or deleted (%v)", err)
		}
		sa, err := e.kube.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || sa.Annotations["kubeplay.io/owner-id"] != otherID {
			return fmt.Errorf("the other credential's ServiceAccount was changed or deleted (%v)", err)
		}
		return nil
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             intact,
		Steps: []resource.TestStep{{
			PreConfig: others,
			Config: e.providerBlock() + fmt.Sprintf(`
resource "kubeplay_credential" "test" {
  name      = %q
  kind      = "service_account"
  namespace = %q
}
`, name, ns),
			ExpectError: regexp.MustCompile(`(?s)Service Account Object Owned By Another Credential.*catalog\s+namespace\s+"team-b"` +
				`.*` + otherID),
		}},
	})
}
