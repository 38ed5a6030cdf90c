// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/credential"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

// execKubeconfig is the test kubeconfig whose users authenticate with an
// exec plugin that creates marker: if the file exists, kubeplay ran a
// program that cluster data asked for.
func (e *testEnv) execKubeconfig(marker string) string {
	e.t.Helper()
	raw, err := clientcmd.Load(e.selfContainedKubeconfig())
	if err != nil {
		e.t.Fatal(err)
	}
	for name := range raw.AuthInfos {
		raw.AuthInfos[name] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
			APIVersion: "client.authentication.k8s.io/v1", Command: "/bin/touch", Args: []string{marker},
			InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
		}}
	}
	b, err := clientcmd.Write(*raw)
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}

// assertNoMarker checks, when the test ends however it ends, that the exec
// plugin writing marker never ran.
func assertNoMarker(t *testing.T, marker string) {
	t.Helper()
	t.Cleanup(func() {
		if _, err := os.Stat(marker); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the exec plugin ran on the Terraform host: %s exists (%v)", marker, err)
		}
	})
}

// TestAccCredential_clusterAPIExecRefused: a Cluster API kubeconfig Secret
// on the parent cluster whose user is an exec plugin is refused with the
// Secret, entry and field named, and the plugin never runs.
func TestAccCredential_clusterAPIExecRefused(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-capi-exec")
	marker := filepath.Join(t.TempDir(), "exec-plugin-ran")
	assertNoMarker(t, marker)
	if _, err := e.kube.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "evil-kubeconfig", Namespace: ns},
		Data:       map[string][]byte{"value": []byte(e.execKubeconfig(marker))},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: clusterAPIConfig(e, randName("evil"), "evil", ns, "0s"),
			ExpectError: expectError(`(?s)Unsafe Kubeconfig Refused.*the kubeconfig in Secret ` + ns +
				`/evil-kubeconfig on the parent cluster: user "admin" sets exec, which runs command /bin/touch on this host.*` +
				`may hold only inline data`),
		}},
	})
}

// TestAccCredential_tamperedCatalogRefused: a catalog Secret edited outside
// kubeplay (here: its kubeconfig swapped for one with an exec plugin and
// the exec opt-in set, the digest left as kubeplay wrote it) is refused by every reader that would
// connect with it or show it, with the repair in the message; the plugin
// never runs. Written again with a matching digest, it is usable.
func TestAccCredential_tamperedCatalogRefused(t *testing.T) {
	e := newTestEnv(t)
	ctx := context.Background()
	marker := filepath.Join(t.TempDir(), "exec-plugin-ran")
	assertNoMarker(t, marker)
	ns := e.namespace("kp-tamper")
	name := randName("shared")
	// Another workspace wrote the credential: the catalog holds it, this
	// configuration only names it.
	spec := credential.Spec{Name: name, Kind: credential.KindKubeconfig, Kubeconfig: string(e.selfContainedKubeconfig()), Namespace: "default"}
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.catalog, Labels: managed.Labels()}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	secrets := e.kube.CoreV1().Secrets(e.catalog)
	store := catalog.New(e.kube, e.catalog, nil) // signs as that workspace does
	write := func(mode catalog.Mode) {
		c := catalog.Credential{Spec: spec, Report: credential.Report{Username: "someone"}, CheckedAt: time.Now()}
		if _, err := store.PutCredential(ctx, c, mode); err != nil {
			t.Fatal(err)
		}
	}
	write(catalog.NewOnly)
	tamper := func() {
		sec, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// The opt-in too: only the digest stands between this edit and
		// the plugin running.
		sec.Data["kubeconfig"] = []byte(e.execKubeconfig(marker))
		sec.Data["allow-exec-plugin"] = []byte("true")
		if _, err := secrets.Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tamper()
	repair := `Write it again from its definition: apply the workspace that manages the kubeplay_credential named "` + name +
		`".*terraform apply -replace=ADDRESS`
	refused := `[cC]redential "` + name + `" is refused: Secret ` + e.catalog + "/" + name + ` was changed outside kubeplay`
	dataSource := e.providerBlock() + fmt.Sprintf("data \"kubeplay_credential\" \"shared\" {\n  name = %q\n}\n", name)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				// A cluster_api credential connects through its parent.
				Config: e.providerBlock() + fmt.Sprintf(`
resource "kubeplay_credential" "child" {
  name               = %q
  kind               = "cluster_api"
  parent             = %q
  cluster_name       = "workload"
  cluster_namespace  = %q
  kubeconfig_timeout = "0s"
}
`, randName("child"), name, ns),
				ExpectError: expectError(`(?s)Credential Changed Outside Kubeplay.*` + refused + `.*` + repair),
			},
			{
				// A container group connects to provision its namespace.
				Config: e.providerBlock() + fmt.Sprintf(`
resource "kubeplay_container_group" "test" {
  name       = %q
  namespace  = %q
  credential = %q
}
`, randName("grp"), ns, name),
				ExpectError: expectError(`(?s)Credential Changed Outside Kubeplay.*` + refused + `.*` + repair),
			},
			{
				Config:      dataSource,
				ExpectError: expectError(`(?s)Credential Changed Outside Kubeplay.*` + refused + `.*` + repair),
			},
			{
				// Written again by its owner, with a matching digest, it is used.
				PreConfig: func() { write(catalog.CreateOrUpdate) },
				Config:    dataSource,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.kubeplay_credential.shared", tfjsonpath.New("username"), knownvalue.StringExact("someone")),
				},
			},
		},
	})
}

// TestAccCredential_kubeconfigExecPlugin: a kubeconfig written in
// configuration may use an exec plugin only with allow_exec_plugin; the
// declaration is stored with it, and a reader of the catalog (here the
// parent of a cluster_api credential) runs the plugin when the provider
// also pins the credential in exec_plugin_credentials, and the resource
// shows the digest to pin (exec_sha256).
func TestAccCredential_kubeconfigExecPlugin(t *testing.T) {
	e := newTestEnv(t)
	ctx := context.Background()
	ns := e.namespace("kp-exec")
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(e.token(ns, "runner", "edit")), 0o600); err != nil {
		t.Fatal(err)
	}
	plugin := writeExecPlugin(t, tokenFile)
	raw, err := clientcmd.Load(e.selfContainedKubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	for name := range raw.AuthInfos {
		raw.AuthInfos[name] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
			APIVersion: "client.authentication.k8s.io/v1", Command: plugin, InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
		}}
	}
	kc, err := clientcmd.Write(*raw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "wl-kubeconfig", Namespace: ns},
		Data:       map[string][]byte{"value": e.selfContainedKubeconfig()},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	name := randName("exec")
	config := func(optIn string) string {
		provider := e.providerBlock()
		if optIn != "" {
			provider = fmt.Sprintf("provider \"kubeplay\" {\n  config_path = %q\n  catalog_namespace = %q\n"+
				"  exec_plugin_credentials = { %q = %q }\n}\n", e.kubeconfig, e.catalog, name,
				credential.Spec{Kind: credential.KindKubeconfig, Kubeconfig: string(kc)}.ExecSHA256())
		}
		return provider + fmt.Sprintf(`
resource "kubeplay_credential" "test" {
  name          = %q
  kind          = "kubeconfig"
  kubeconfig_wo = %q
  namespace     = %q
%s}

resource "kubeplay_credential" "child" {
  name               = "%s-child"
  kind               = "cluster_api"
  parent             = kubeplay_credential.test.name
  cluster_name       = "wl"
  cluster_namespace  = %q
  kubeconfig_timeout = "0s"
}

data "kubeplay_credential" "test" {
  name = kubeplay_credential.child.parent
}
`, name, string(kc), ns, optIn, name, ns)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		TerraformVersionChecks:   writeOnlyVersions,
		CheckDestroy:             e.checkSecretGone(name),
		Steps: []resource.TestStep{
			{
				Config: config(""),
				ExpectError: expectError(`(?s)Unsafe Kubeconfig Refused.*The kubeconfig: user "admin" sets exec, which runs ` +
					`command ` + plugin + ` on this host.*Set allow_exec_plugin = true if you trust the command`),
			},
			{
				Config: config("  allow_exec_plugin = true\n"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(credAddr, tfjsonpath.New("allow_exec_plugin"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue(credAddr, tfjsonpath.New("username"), knownvalue.StringExact("system:serviceaccount:"+ns+":runner")),
					statecheck.ExpectKnownValue("kubeplay_credential.child", tfjsonpath.New("username"), knownvalue.StringExact(e.adminUser)),
					statecheck.ExpectKnownValue("data.kubeplay_credential.test", tfjsonpath.New("allow_exec_plugin"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue(credAddr, tfjsonpath.New("exec_sha256"), knownvalue.StringExact(
						credential.Spec{Kind: credential.KindKubeconfig, Kubeconfig: string(kc)}.ExecSHA256())),
					statecheck.ExpectKnownValue("data.kubeplay_credential.test", tfjsonpath.New("exec_sha256"), knownvalue.StringExact(
						credential.Spec{Kind: credential.KindKubeconfig, Kubeconfig: string(kc)}.ExecSHA256())),
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
