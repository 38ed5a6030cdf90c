package kubeclient

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
)

const testKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: one
  cluster: {server: "https://one.example:6443"}
- name: two
  cluster: {server: "https://two.example:6443"}
users:
- name: alice
  user: {token: alice-token}
- name: bob
  user: {token: bob-token}
contexts:
- name: a
  context: {cluster: one, user: alice}
- name: b
  context: {cluster: two, user: bob}
current-context: a
`

func writeKubeconfig(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(p, []byte(testKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestRESTConfigPrecedence(t *testing.T) {
	kc := writeKubeconfig(t)
	tests := []struct {
		name      string
		settings  Settings
		env       map[string]string
		wantHost  string
		wantToken string
		wantSrc   Source
	}{
		{"kubeconfig current context", Settings{ConfigPaths: []string{kc}}, nil, "https://one.example:6443", "alice-token", SourceKubeconfig},
		{"kubeconfig other context", Settings{ConfigPaths: []string{kc}, ConfigContext: "b"}, nil, "https://two.example:6443", "bob-token", SourceKubeconfig},
		{"explicit token over kubeconfig", Settings{ConfigPaths: []string{kc}, Token: "override"}, nil, "https://one.example:6443", "override", SourceKubeconfig},
		{"context auth info override", Settings{ConfigPaths: []string{kc}, ConfigContextAuthInfo: "bob"}, nil, "https://one.example:6443", "bob-token", SourceKubeconfig},
		{"explicit only", Settings{Host: "https://h:1", Token: "t"}, nil, "https://h:1", "t", SourceExplicit},
		{"KUBECONFIG when nothing explicit", Settings{}, map[string]string{"KUBECONFIG": kc}, "https://one.example:6443", "alice-token", SourceKubeconfig},
		{"KUBECONFIG ignored when host is set", Settings{Host: "https://h:1", Token: "t"}, map[string]string{"KUBECONFIG": kc}, "https://h:1", "t", SourceExplicit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, src, err := tt.settings.RESTConfig(env(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tt.wantHost || cfg.BearerToken != tt.wantToken || src != tt.wantSrc {
				t.Fatalf("got host %q token %q source %q; want %q %q %q", cfg.Host, cfg.BearerToken, src, tt.wantHost, tt.wantToken, tt.wantSrc)
			}
			if cfg.QPS != 300 || cfg.Burst != 600 {
				t.Fatalf("client limits not tuned: qps %v burst %d", cfg.QPS, cfg.Burst)
			}
		})
	}
}

func TestApplyEnv(t *testing.T) {
	kc := writeKubeconfig(t)
	s := Settings{Host: "https://attr:1"}
	err := s.ApplyEnv(env(map[string]string{
		"KUBE_HOST": "https://env:1", "KUBE_TOKEN": "env-token", "KUBE_INSECURE": "true",
		"KUBE_CONFIG_PATHS": kc + string(filepath.ListSeparator) + "/other", "KUBE_CTX": "b",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if s.Host != "https://attr:1" {
		t.Errorf("the attribute must win over KUBE_HOST, got %q", s.Host)
	}
	if s.Token != "env-token" || s.Insecure == nil || !*s.Insecure || s.ConfigContext != "b" {
		t.Errorf("environment not applied: %+v", s)
	}
	if len(s.ConfigPaths) != 2 || s.ConfigPaths[0] != kc {
		t.Errorf("KUBE_CONFIG_PATHS not split: %q", s.ConfigPaths)
	}
	var envErr *EnvError
	if err := (&Settings{}).ApplyEnv(env(map[string]string{"KUBE_INSECURE": "yes please"})); !errors.As(err, &envErr) || envErr.Name != "KUBE_INSECURE" {
		t.Errorf("a malformed KUBE_INSECURE must be an EnvError naming it, got %v", err)
	}
}

func TestRESTConfigErrors(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	if _, _, err := (&Settings{}).RESTConfig(env(nil)); !errors.Is(err, ErrNoConfiguration) {
		t.Errorf("no settings at all: want ErrNoConfiguration, got %v", err)
	}
	if _, _, err := (&Settings{ConfigPaths: []string{"/does/not/exist"}}).RESTConfig(env(nil)); err == nil {
		t.Error("a missing kubeconfig file must be an error")
	}
	kc := writeKubeconfig(t)
	if _, _, err := (&Settings{ConfigPaths: []string{kc}, ConfigContext: "nope"}).RESTConfig(env(nil)); err == nil {
		t.Error("an unknown context must be an error")
	}
	if _, _, err := (&Settings{Token: "t"}).RESTConfig(env(nil)); err == nil {
		t.Error("explicit settings without host must be an error")
	}
}

func TestPoolReusesClients(t *testing.T) {
	p := NewPool()
	builds := 0
	for range 3 {
		if _, err := p.Get("k", func() (*rest.Config, error) {
			builds++
			s := Settings{Host: "https://h:1", Token: "t"}
			cfg, _, err := s.RESTConfig(env(nil))
			return cfg, err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if builds != 1 {
		t.Fatalf("the pool built %d times; want 1", builds)
	}
	if _, err := p.Get("bad", func() (*rest.Config, error) { return nil, errors.New("boom") }); err == nil {
		t.Fatal("a failed build must be returned")
	}
	rebuilt := false
	if _, err := p.Get("bad", func() (*rest.Config, error) { rebuilt = true; return &rest.Config{Host: "https://h:2"}, nil }); err != nil || !rebuilt {
		t.Fatalf("a failed build must not be cached (err %v, rebuilt %t)", err, rebuilt)
	}
}
