// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	fwprovider "github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// configOf builds a configuration of the schema's type with the given
// attributes set and every other one null.
func configOf(t *testing.T, typ tftypes.Type, set map[string]tftypes.Value) tftypes.Value {
	t.Helper()
	obj, ok := typ.(tftypes.Object)
	if !ok {
		t.Fatalf("schema type %T is not an object", typ)
	}
	vals := map[string]tftypes.Value{}
	for name, at := range obj.AttributeTypes {
		vals[name] = tftypes.NewValue(at, nil)
		if v, ok := set[name]; ok {
			vals[name] = v
		}
	}
	return tftypes.NewValue(typ, vals)
}

func credentialDiags(t *testing.T, set map[string]tftypes.Value) diag.Diagnostics {
	t.Helper()
	ctx := context.Background()
	r := &credentialResource{}
	var sr resource.SchemaResponse
	r.Schema(ctx, resource.SchemaRequest{}, &sr)
	cfg := tfsdk.Config{Schema: sr.Schema, Raw: configOf(t, sr.Schema.Type().TerraformType(ctx), set)}
	var resp resource.ValidateConfigResponse
	r.ValidateConfig(ctx, resource.ValidateConfigRequest{Config: cfg}, &resp)
	return resp.Diagnostics
}

// kubeconfigUser is a kubeconfig with one cluster and one user.
func kubeconfigUser(cluster, user string) string {
	return "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\n" + cluster +
		"users:\n- name: u\n  user:\n" + user +
		"contexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n"
}

// Every insecure TLS setting of a credential is a warning at its attribute,
// saying the risk and the remedy; plan-time refusals of a kubeconfig in
// configuration name the entry, the field and the opt-in.
func TestCredentialValidateConfigTLSAndHostAccess(t *testing.T) {
	str := func(s string) tftypes.Value { return tftypes.NewValue(tftypes.String, s) }
	boolean := func(b bool) tftypes.Value { return tftypes.NewValue(tftypes.Bool, b) }
	exec := "    exec: {apiVersion: client.authentication.k8s.io/v1, interactiveMode: Never, command: aws}\n"
	cases := []struct {
		name     string
		set      map[string]tftypes.Value
		severity diag.Severity // 0: no diagnostic
		summary  string
		path     path.Path
		detail   []string
	}{
		{"verify_ssl false", map[string]tftypes.Value{"name": str("x"), "kind": str("bearer_token"), "host": str("https://h:1"),
			"bearer_token_wo": str("t"), "verify_ssl": boolean(false)},
			diag.SeverityWarning, "TLS Verification Disabled", path.Root("verify_ssl"),
			[]string{"With verify_ssl = false", "pose as the API server", "set ca_cert"}},
		{"verify_ssl true", map[string]tftypes.Value{"name": str("x"), "kind": str("bearer_token"), "host": str("https://h:1"),
			"bearer_token_wo": str("t"), "verify_ssl": boolean(true)}, 0, "", path.Empty(), nil},
		{"insecure kubeconfig", map[string]tftypes.Value{"name": str("x"), "kind": str("kubeconfig"),
			"kubeconfig_wo": str(kubeconfigUser("    insecure-skip-tls-verify: true\n", "    token: t\n"))},
			diag.SeverityWarning, "TLS Verification Disabled", path.Root("kubeconfig_wo"),
			[]string{`cluster "c" sets insecure-skip-tls-verify`, "certificate-authority-data"}},
		{"exec without the opt-in", map[string]tftypes.Value{"name": str("x"), "kind": str("kubeconfig"),
			"kubeconfig_wo": str(kubeconfigUser("", exec))},
			diag.SeverityError, "Unsafe Kubeconfig Refused", path.Root("kubeconfig_wo"),
			[]string{`The kubeconfig: user "u" sets exec, which runs command aws on this host`, "Set allow_exec_plugin = true"}},
		{"exec with the opt-in", map[string]tftypes.Value{"name": str("x"), "kind": str("kubeconfig"),
			"kubeconfig_wo": str(kubeconfigUser("", exec)), "allow_exec_plugin": boolean(true)}, 0, "", path.Empty(), nil},
		{"exec with an unknown opt-in", map[string]tftypes.Value{"name": str("x"), "kind": str("kubeconfig"),
			"kubeconfig_wo": str(kubeconfigUser("", exec)), "allow_exec_plugin": tftypes.NewValue(tftypes.Bool, tftypes.UnknownValue)},
			0, "", path.Empty(), nil},
		{"tokenFile even with the opt-in", map[string]tftypes.Value{"name": str("x"), "kind": str("kubeconfig"),
			"kubeconfig_wo": str(kubeconfigUser("", "    tokenFile: /var/run/token\n")), "allow_exec_plugin": boolean(true)},
			diag.SeverityError, "Unsafe Kubeconfig Refused", path.Root("kubeconfig_wo"),
			[]string{`user "u" sets tokenFile, which reads file /var/run/token`, "Replace tokenFile with the data it points to"}},
		{"auth-provider", map[string]tftypes.Value{"name": str("x"), "kind": str("kubeconfig"),
			"kubeconfig_wo": str(kubeconfigUser("", "    auth-provider: {name: oidc}\n"))},
			diag.SeverityError, "Unsafe Kubeconfig Refused", path.Root("kubeconfig_wo"), []string{"sets auth-provider"}},
		{"opt-in on another kind", map[string]tftypes.Value{"name": str("x"), "kind": str("provider"), "allow_exec_plugin": boolean(true)},
			diag.SeverityError, "Attribute Not Allowed For Kind", path.Root("allow_exec_plugin"), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			diags := credentialDiags(t, c.set)
			if c.severity == 0 {
				if len(diags) != 0 {
					t.Fatalf("diagnostics: %v", diags)
				}
				return
			}
			if len(diags) != 1 {
				t.Fatalf("got %d diagnostics, want 1: %v", len(diags), diags)
			}
			d := diags[0]
			wp, _ := d.(diag.DiagnosticWithPath)
			if d.Severity() != c.severity || d.Summary() != c.summary || wp == nil || !wp.Path().Equal(c.path) {
				t.Fatalf("got %v %q at %v, want %v %q at %v", d.Severity(), d.Summary(), wp, c.severity, c.summary, c.path)
			}
			for _, w := range c.detail {
				if !strings.Contains(d.Detail(), w) {
					t.Errorf("detail %q lacks %q", d.Detail(), w)
				}
			}
		})
	}
}

// The provider's own insecure = true is a warning at the attribute.
func TestProviderValidateConfigInsecure(t *testing.T) {
	ctx := context.Background()
	p := &kubeplayProvider{}
	var sr fwprovider.SchemaResponse
	p.Schema(ctx, fwprovider.SchemaRequest{}, &sr)
	raw := configOf(t, sr.Schema.Type().TerraformType(ctx), map[string]tftypes.Value{
		"host": tftypes.NewValue(tftypes.String, "https://h:1"), "insecure": tftypes.NewValue(tftypes.Bool, true),
	})
	var resp fwprovider.ValidateConfigResponse
	p.ValidateConfig(ctx, fwprovider.ValidateConfigRequest{Config: tfsdk.Config{Schema: sr.Schema, Raw: raw}}, &resp)
	if len(resp.Diagnostics) != 1 {
		t.Fatalf("diagnostics: %v", resp.Diagnostics)
	}
	d := resp.Diagnostics[0]
	wp, _ := d.(diag.DiagnosticWithPath)
	if d.Severity() != diag.SeverityWarning || d.Summary() != "TLS Verification Disabled" || wp == nil ||
		!wp.Path().Equal(path.Root("insecure")) || !strings.Contains(d.Detail(), "set cluster_ca_certificate") {
		t.Errorf("got %v %q %q", d.Severity(), d.Summary(), d.Detail())
	}
}

// A provider kubeconfig with insecure-skip-tls-verify is warned about when
// the provider is configured, which happens at plan.
func TestProviderConfigureWarnsInsecureKubeconfig(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		cluster string
		warn    bool
	}{
		{"    insecure-skip-tls-verify: true\n", true},
		{"    certificate-authority-data: Y2E=\n", false},
	} {
		kc := filepath.Join(t.TempDir(), "kubeconfig")
		if err := os.WriteFile(kc, []byte(kubeconfigUser(c.cluster, "    token: t\n")), 0o600); err != nil {
			t.Fatal(err)
		}
		p := &kubeplayProvider{version: "test"}
		var sr fwprovider.SchemaResponse
		p.Schema(ctx, fwprovider.SchemaRequest{}, &sr)
		raw := configOf(t, sr.Schema.Type().TerraformType(ctx), map[string]tftypes.Value{"config_path": tftypes.NewValue(tftypes.String, kc)})
		var resp fwprovider.ConfigureResponse
		p.Configure(ctx, fwprovider.ConfigureRequest{Config: tfsdk.Config{Schema: sr.Schema, Raw: raw}}, &resp)
		if resp.Diagnostics.HasError() {
			t.Fatalf("configure: %v", resp.Diagnostics)
		}
		warned := len(resp.Diagnostics) == 1 && resp.Diagnostics[0].Summary() == "TLS Verification Disabled" &&
			strings.Contains(resp.Diagnostics[0].Detail(), "the provider's connection from kubeconfig")
		if warned != c.warn || len(resp.Diagnostics) > 1 {
			t.Errorf("cluster %q: diagnostics %v, want a warning: %v", c.cluster, resp.Diagnostics, c.warn)
		}
	}
}
