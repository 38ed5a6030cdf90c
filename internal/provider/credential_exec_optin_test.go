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
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/credential"
)

// markerPlugin writes an exec plugin that creates marker and then prints
// the token in tokenFile: if marker exists, kubeplay ran it.
func markerPlugin(t *testing.T, marker, tokenFile string) string {
	t.Helper()
	script := filepath.Join(t.TempDir(), "kubeplay-test-marker-plugin")
	body := fmt.Sprintf("#!/bin/sh\ntouch %q\n"+
		`printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%%s"}}' "$(cat %q)"`+"\n",
		marker, tokenFile)
	if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
		t.Fatal(err)
	}
	return script
}

// pluginKubeconfig is the test cluster's kubeconfig with every user
// authenticating through plugin.
func (e *testEnv) pluginKubeconfig(plugin string) string {
	e.t.Helper()
	raw, err := clientcmd.Load(e.selfContainedKubeconfig())
	if err != nil {
		e.t.Fatal(err)
	}
	for name := range raw.AuthInfos {
		raw.AuthInfos[name] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
			APIVersion: "client.authentication.k8s.io/v1", Command: plugin, InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
		}}
	}
	b, err := clientcmd.Write(*raw)
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}

func markerAbsent(marker string) error {
	if _, err := os.Stat(marker); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("the exec plugin ran on the Terraform host: %s exists (%v)", marker, err)
	}
	return nil
}

// TestAccCredential_catalogExecNeedsOptIn: a catalog Secret of kind
// kubeconfig that declares allow-exec-plugin, with a valid digest (written
// through the catalog store, as kubeplay writes it) and a user whose exec
// plugin writes a marker file, never makes the provider run the plugin on
// its own: a container group and a cluster_api child naming it fail with
// the opt-in diagnostic and the marker stays absent. The provider's
// exec_plugin_credentials must pin it, and the credential must declare
// it: a listed credential that does not declare it is still refused. With
// both, the plugin runs and the group is created. Then its command is
// swapped and the credential signed again, as a holder of the catalog key
// can: the pin is the exec blocks' digest, so the new command never runs.
func TestAccCredential_catalogExecNeedsOptIn(t *testing.T) {
	e := newTestEnv(t)
	ctx := context.Background()
	ns := e.namespace("cred-exec")
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(e.token(ns, "runner", "admin")), 0o600); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "exec-plugin-ran")
	undeclaredMarker := filepath.Join(t.TempDir(), "undeclared-exec-plugin-ran")
	swappedMarker := filepath.Join(t.TempDir(), "swapped-exec-plugin-ran")
	t.Cleanup(func() {
		for _, m := range []string{undeclaredMarker, swappedMarker} {
			if err := markerAbsent(m); err != nil {
				t.Error(err)
			}
		}
	})
	declared, undeclared := randName("cred-exec"), randName("cred-noexec")
	store := catalog.New(e.kube, e.catalog, nil)
	if err := store.EnsureNamespace(ctx); err != nil {
		t.Fatal(err)
	}
	// Planted by whoever may write Secrets in the catalog namespace.
	specs := []credential.Spec{
		{Name: declared, Kind: credential.KindKubeconfig, Kubeconfig: e.pluginKubeconfig(markerPlugin(t, marker, tokenFile)),
			AllowExecPlugin: true, Namespace: ns},
		{Name: undeclared, Kind: credential.KindKubeconfig, Kubeconfig: e.pluginKubeconfig(markerPlugin(t, undeclaredMarker, tokenFile)),
			Namespace: ns},
	}
	for _, s := range specs {
		if _, err := store.PutCredential(ctx, catalog.Credential{Spec: s, CheckedAt: time.Now()}, catalog.NewOnly); err != nil {
			t.Fatal(err)
		}
	}
	group := func(provider, cred string) string {
		return provider + fmt.Sprintf(`
resource "kubeplay_container_group" "test" {
  name       = %q
  namespace  = %q
  credential = %q
}
`, randName("cred-grp"), ns, cred)
	}
	pinned := specs[0].ExecSHA256()
	optIn := fmt.Sprintf("provider \"kubeplay\" {\n  config_path             = %q\n  catalog_namespace       = %q\n"+
		"  exec_plugin_credentials = { %q = %q, %q = %q }\n}\n", e.kubeconfig, e.catalog, declared, pinned, undeclared,
		specs[1].ExecSHA256())
	swapped := specs[0]
	swapped.Kubeconfig = e.pluginKubeconfig(markerPlugin(t, swappedMarker, tokenFile))
	notAllowed := `(?s)Exec Plugin Not Allowed.*credential "` + declared + `".*runs command .*kubeplay-test-marker-plugin on this host.*` +
		`exec_plugin_credentials`
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config:      group(e.providerBlock(), declared),
				ExpectError: expectError(notAllowed),
			},
			{
				// Through a cluster_api parent, too.
				PreConfig: func() {
					if err := markerAbsent(marker); err != nil {
						t.Fatal(err)
					}
				},
				Config: e.providerBlock() + fmt.Sprintf(`
resource "kubeplay_credential" "child" {
  name               = %q
  kind               = "cluster_api"
  parent             = %q
  cluster_name       = "wl"
  cluster_namespace  = %q
  kubeconfig_timeout = "0s"
}
`, randName("cred-child"), declared, ns),
				ExpectError: expectError(notAllowed),
			},
			{
				// Listed by the provider but not declared by the credential.
				PreConfig: func() {
					if err := markerAbsent(marker); err != nil {
						t.Fatal(err)
					}
				},
				Config:      group(optIn, undeclared),
				ExpectError: expectError(`(?s)Unsafe Kubeconfig Refused.*user "admin" sets exec, which runs command .* on this host`),
			},
			{
				PreConfig: func() {
					if err := markerAbsent(marker); err != nil {
						t.Fatal(err)
					}
				},
				Config: group(optIn, declared),
				Check: func(*terraform.State) error {
					if _, err := os.Stat(marker); err != nil {
						return fmt.Errorf("with the opt-in the exec plugin did not run: %w", err)
					}
					return nil
				},
			},
			{
				// The command swapped and signed as kubeplay signs it.
				PreConfig: func() {
					if _, err := store.PutCredential(ctx, catalog.Credential{Spec: swapped, CheckedAt: time.Now()}, catalog.CreateOrUpdate); err != nil {
						t.Fatal(err)
					}
				},
				Config: group(optIn, declared),
				ExpectError: expectError(`(?s)Exec Plugin Differs From Pin.*credential "` + declared + `".*command .*kubeplay-test-marker-plugin.*` +
					`has exec_sha256 ` + swapped.ExecSHA256() + `.*pins ` + pinned + `.*` + regexp.QuoteMeta(fmt.Sprintf("%q = %q", declared, swapped.ExecSHA256()))),
			},
		},
	})
}
