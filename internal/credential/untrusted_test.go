// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package credential

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
)

// userKubeconfig is a kubeconfig whose only user carries the YAML user.
func userKubeconfig(user string) string {
	return `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:7443", certificate-authority-data: Y2E=}
users:
- name: u
  user:
` + user + `
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`
}

// hostFile writes a file that a kubeconfig from cluster data must never
// make kubeplay read.
func hostFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(p, []byte("secret-from-the-host"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Kubeconfigs stored in the catalog go through RESTConfig when any reader
// uses them: each way to reach the host is refused before client-go reads.
func TestRESTConfigRefusesHostAccess(t *testing.T) {
	file := hostFile(t)
	exec := "    exec: {apiVersion: client.authentication.k8s.io/v1, interactiveMode: Never, command: /bin/sh, args: [-c, 'touch /tmp/x']}"
	cases := []struct {
		name, user string
		// declared: the credential's allow_exec_plugin; optIn: the
		// configuration using it lists it in exec_plugin_credentials.
		declared, optIn bool
		field           string // "" when allowed
	}{
		{"exec", exec, false, false, "exec"},
		{"exec declared, no opt-in", exec, true, false, "exec"},
		{"exec opted in, not declared", exec, false, true, "exec"},
		{"exec declared and opted in", exec, true, true, ""},
		{"auth-provider", "    auth-provider: {name: oidc, config: {client-id: x}}", true, true, "auth-provider"},
		{"tokenFile", "    tokenFile: " + file, true, true, "tokenFile"},
		{"client-certificate", "    client-certificate: " + file + "\n    client-key-data: a2V5", true, true, "client-certificate"},
		{"client-key", "    client-certificate-data: Y2VydA==\n    client-key: " + file, true, true, "client-key"},
		{"inline token", "    token: abc", false, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := Spec{Name: "k", Kind: KindKubeconfig, Kubeconfig: userKubeconfig(c.user), AllowExecPlugin: c.declared}
			cfg, err := s.RESTConfig(nil, c.optIn)
			if c.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if c.declared && (cfg.ExecProvider == nil || cfg.ExecProvider.Command != "/bin/sh") {
					t.Errorf("the opt-in lost the exec plugin: %+v", cfg.ExecProvider)
				}
				return
			}
			var he *kubeclient.HostAccessError
			var ne *ExecNotAllowedError
			switch {
			case !errors.As(err, &he) || he.Field != c.field:
				t.Fatalf("err = %v, want %s refused for credential k", err, c.field)
			case c.declared && c.field == "exec":
				// Declared: what is missing is the configuration's opt-in.
				want := `credential "k": its kubeconfig's user "u" sets exec, which runs command /bin/sh on this host, ` +
					`and this provider's exec_plugin_credentials does not list "k"`
				if !errors.As(err, &ne) || err.Error() != want {
					t.Fatalf("err = %v, want %q", err, want)
				}
			case !strings.HasPrefix(err.Error(), `credential "k": its kubeconfig: user "u" sets `+c.field):
				t.Fatalf("err = %v, want %s refused for credential k", err, c.field)
			}
			if cfg != nil {
				t.Errorf("a refused kubeconfig configured a client: %+v", cfg)
			}
		})
	}
	ca := Spec{Name: "k", Kind: KindKubeconfig, Kubeconfig: strings.Replace(userKubeconfig("    token: abc"),
		"certificate-authority-data: Y2E=", "certificate-authority: "+file, 1)}
	if _, err := ca.RESTConfig(nil, false); !errors.Is(err, kubeclient.ErrHostAccess) || !strings.Contains(err.Error(), `cluster "c" sets certificate-authority`) {
		t.Errorf("certificate-authority file: %v, want ErrHostAccess", err)
	}
}

func TestClusterAPIRESTConfig(t *testing.T) {
	s := Spec{Name: "wl", Kind: KindClusterAPI, ClusterName: "wl", ClusterNamespace: "infra"}
	cfg, err := ClusterAPIRESTConfig(s, []byte(userKubeconfig("    token: abc")))
	if err != nil || cfg.Host != "https://127.0.0.1:7443" || cfg.BearerToken != "abc" {
		t.Fatalf("inline kubeconfig: %+v %v", cfg, err)
	}
	// No opt-in reaches cluster data: exec is always refused.
	_, err = ClusterAPIRESTConfig(s, []byte(userKubeconfig("    exec: {apiVersion: client.authentication.k8s.io/v1, command: touch}")))
	want := `credential "wl": the kubeconfig in Secret infra/wl-kubeconfig on the parent cluster: user "u" sets exec, which runs command touch on this host`
	if !errors.Is(err, kubeclient.ErrHostAccess) || err.Error() != want {
		t.Errorf("exec: %v, want %q", err, want)
	}
	if _, err := ClusterAPIRESTConfig(s, []byte("tokenFile: [")); err == nil || !strings.Contains(err.Error(), "does not parse") {
		t.Errorf("garbage: %v", err)
	}
}

// The opt-in is data, so the digest covers it: turning it on by hand shows
// as tampering.
func TestAllowExecPluginIsDigested(t *testing.T) {
	s := Spec{Name: "k", Kind: KindKubeconfig, Kubeconfig: userKubeconfig("    token: abc")}
	without := s.Secret("cat", Report{}, time.Time{})
	if _, ok := without.Data[keyAllowExec]; ok {
		t.Error("the opt-in is stored while off; digests of older Secrets would change")
	}
	s.AllowExecPlugin = true
	with := s.Secret("cat", Report{}, time.Time{})
	if string(with.Data[keyAllowExec]) != "true" || with.Annotations[AnnotationDigest] == without.Annotations[AnnotationDigest] {
		t.Fatalf("the opt-in is not in the digested data: %q", with.Data[keyAllowExec])
	}
	back, tampered, err := FromSecret(with)
	if err != nil || tampered || !back.AllowExecPlugin {
		t.Errorf("round trip: %+v tampered=%v %v", back.AllowExecPlugin, tampered, err)
	}
	without.Data[keyAllowExec] = []byte("true")
	if back, tampered, err := FromSecret(without); err != nil || !tampered || !back.AllowExecPlugin {
		t.Errorf("opt-in added by hand: tampered=%v %v, want tampered", tampered, err)
	}
	without.Data[keyAllowExec] = []byte("yes please")
	if _, _, err := FromSecret(without); err == nil || !strings.Contains(err.Error(), "allow-exec-plugin") {
		t.Errorf("a bad opt-in: %v", err)
	}
}

func TestCheckKubeconfigAndInsecure(t *testing.T) {
	exec := userKubeconfig("    exec: {apiVersion: client.authentication.k8s.io/v1, command: aws}")
	if err := CheckKubeconfig(exec, false); !errors.Is(err, kubeclient.ErrHostAccess) {
		t.Errorf("exec without the opt-in: %v", err)
	}
	if err := CheckKubeconfig(exec, true); err != nil {
		t.Errorf("exec with the opt-in: %v", err)
	}
	if err := CheckKubeconfig(": : :", true); err == nil {
		t.Error("garbage passed")
	}
	insecure := strings.Replace(userKubeconfig("    token: abc"), "certificate-authority-data: Y2E=", "insecure-skip-tls-verify: true", 1)
	if got := InsecureKubeconfigClusters(insecure); !reflect.DeepEqual(got, []string{"c"}) {
		t.Errorf("insecure clusters %v, want [c]", got)
	}
	if got := InsecureKubeconfigClusters(": : :"); got != nil {
		t.Errorf("garbage: %v", got)
	}
}
