package kubeclient

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func TestApplyEnvFillsEverySetting(t *testing.T) {
	vars := map[string]string{
		"KUBE_HOST": "https://env:1", "KUBE_TOKEN": "tok", "KUBE_TLS_SERVER_NAME": "sni",
		"KUBE_CLIENT_CERT_DATA": "cert", "KUBE_CLIENT_KEY_DATA": "key", "KUBE_CLUSTER_CA_CERT_DATA": "ca",
		"KUBE_CTX": "ctx", "KUBE_CTX_AUTH_INFO": "user", "KUBE_CTX_CLUSTER": "cluster", "KUBE_PROXY_URL": "http://proxy:3128",
		"KUBE_INSECURE": "false", "KUBE_CONFIG_PATH": "/one", "KUBE_CONFIG_PATHS": "/two" + string(filepath.ListSeparator) + "/three",
	}
	for k, v := range vars {
		t.Setenv(k, v)
	}
	var s Settings
	if err := s.ApplyEnv(os.Getenv); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{
		"host": s.Host, "token": s.Token, "sni": s.TLSServerName, "cert": s.ClientCertificate, "key": s.ClientKey,
		"ca": s.ClusterCACertificate, "ctx": s.ConfigContext, "user": s.ConfigContextAuthInfo, "cluster": s.ConfigContextCluster,
		"proxy": s.ProxyURL,
	}
	want := map[string]string{
		"host": "https://env:1", "token": "tok", "sni": "sni", "cert": "cert", "key": "key", "ca": "ca", "ctx": "ctx",
		"user": "user", "cluster": "cluster", "proxy": "http://proxy:3128",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %q, want %q", k, got[k], w)
		}
	}
	if s.Insecure == nil || *s.Insecure {
		t.Errorf("KUBE_INSECURE=false gave %v, want a set false", s.Insecure)
	}
	if !slices.Equal(s.ConfigPaths, []string{"/one"}) {
		t.Errorf("config paths %q: KUBE_CONFIG_PATH must win over KUBE_CONFIG_PATHS", s.ConfigPaths)
	}
}

func TestApplyEnvKeepsAttributes(t *testing.T) {
	insecure := true
	s := Settings{Token: "attr", Insecure: &insecure, ConfigPaths: []string{"/attr"}, ProxyURL: "http://attr"}
	err := s.ApplyEnv(env(map[string]string{
		"KUBE_TOKEN": "env", "KUBE_INSECURE": "not a bool", "KUBE_CONFIG_PATH": "/env", "KUBE_PROXY_URL": "http://env",
	}))
	if err != nil {
		t.Fatalf("a malformed KUBE_INSECURE must not matter when insecure is set: %v", err)
	}
	if s.Token != "attr" || !*s.Insecure || !slices.Equal(s.ConfigPaths, []string{"/attr"}) || s.ProxyURL != "http://attr" {
		t.Errorf("the environment overrode attributes: %+v", s)
	}
	var empty Settings
	if err := empty.ApplyEnv(env(nil)); err != nil || empty.HasExplicit() || empty.ConfigPaths != nil {
		t.Errorf("an empty environment set something: %+v (%v)", empty, err)
	}
}

func TestEnvErrorMessage(t *testing.T) {
	err := (&Settings{}).ApplyEnv(env(map[string]string{"KUBE_INSECURE": "maybe"}))
	if err == nil || !strings.Contains(err.Error(), "KUBE_INSECURE") || !strings.Contains(err.Error(), `"maybe" is not a boolean`) {
		t.Fatalf("error %v, want one naming KUBE_INSECURE and the value", err)
	}
}

func TestHasExplicit(t *testing.T) {
	f := false
	for name, s := range map[string]Settings{
		"host": {Host: "h"}, "token": {Token: "t"}, "cert": {ClientCertificate: "c"}, "key": {ClientKey: "k"},
		"ca": {ClusterCACertificate: "ca"}, "exec": {Exec: &ExecSettings{}}, "insecure false": {Insecure: &f},
		"sni": {TLSServerName: "n"}, "proxy": {ProxyURL: "p"},
	} {
		if !s.HasExplicit() {
			t.Errorf("%s: HasExplicit = false", name)
		}
	}
	for name, s := range map[string]Settings{
		"nothing": {}, "paths": {ConfigPaths: []string{"/x"}}, "context": {ConfigContext: "c", ConfigContextAuthInfo: "u", ConfigContextCluster: "c"},
		"user agent": {UserAgent: "ua"},
	} {
		if s.HasExplicit() {
			t.Errorf("%s: HasExplicit = true; kubeconfig selection is not a connection attribute", name)
		}
	}
}

func TestRESTConfigExplicitAttributes(t *testing.T) {
	s := Settings{
		Host: "https://h:6443", Token: "t", TLSServerName: "api.internal", ClusterCACertificate: "CA PEM",
		ClientCertificate: "CERT PEM", ClientKey: "KEY PEM", ProxyURL: "http://proxy:3128", UserAgent: "kubeplay/test",
		Exec: &ExecSettings{APIVersion: "client.authentication.k8s.io/v1", Command: "get-token", Args: []string{"--a", "b"},
			Env: map[string]string{"Z": "1", "A": "2"}},
	}
	cfg, src, err := s.RESTConfig(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if src != SourceExplicit || cfg.Host != "https://h:6443" || cfg.BearerToken != "t" || cfg.UserAgent != "kubeplay/test" {
		t.Errorf("source %q host %q token %q agent %q", src, cfg.Host, cfg.BearerToken, cfg.UserAgent)
	}
	tls := cfg.TLSClientConfig
	if tls.ServerName != "api.internal" || string(tls.CAData) != "CA PEM" || string(tls.CertData) != "CERT PEM" ||
		string(tls.KeyData) != "KEY PEM" || tls.Insecure {
		t.Errorf("TLS config %+v", tls)
	}
	if cfg.Proxy == nil {
		t.Fatal("no proxy configured")
	}
	req, _ := http.NewRequest(http.MethodGet, "https://h:6443/api", nil)
	if u, err := cfg.Proxy(req); err != nil || u == nil || u.String() != "http://proxy:3128" {
		t.Errorf("proxy for a request = %v, %v", u, err)
	}
	e := cfg.ExecProvider
	if e == nil || e.Command != "get-token" || !slices.Equal(e.Args, []string{"--a", "b"}) ||
		e.InteractiveMode != clientcmdapi.NeverExecInteractiveMode || e.APIVersion != "client.authentication.k8s.io/v1" {
		t.Fatalf("exec provider %+v", e)
	}
	if len(e.Env) != 2 || e.Env[0] != (clientcmdapi.ExecEnvVar{Name: "A", Value: "2"}) || e.Env[1].Name != "Z" {
		t.Errorf("exec env %+v, want sorted by name", e.Env)
	}

	insecure := true
	cfg, _, err = (&Settings{Host: "https://h:1", Insecure: &insecure}).RESTConfig(env(nil))
	if err != nil || !cfg.Insecure {
		t.Errorf("insecure: %+v %v", cfg, err)
	}
	// client-go refuses insecure together with a CA when it builds the clients.
	cfg, _, err = (&Settings{Host: "https://h:1", Insecure: &insecure, ClusterCACertificate: "CA"}).RESTConfig(env(nil))
	if err == nil {
		_, err = NewClients(cfg)
	}
	if err == nil || !strings.Contains(err.Error(), "https://h:1") {
		t.Errorf("insecure together with a CA certificate: %v, want an error naming the host", err)
	}
}

func TestRESTConfigKubeconfigOverrides(t *testing.T) {
	kc := writeKubeconfig(t)
	cases := []struct {
		name            string
		s               Settings
		host, token, ua string
	}{
		{"host over the kubeconfig", Settings{ConfigPaths: []string{kc}, Host: "https://other:1"}, "https://other:1", "alice-token", ""},
		{"context cluster", Settings{ConfigPaths: []string{kc}, ConfigContextCluster: "two"}, "https://two.example:6443", "alice-token", ""},
		{"user agent", Settings{ConfigPaths: []string{kc}, UserAgent: "ua/1"}, "https://one.example:6443", "alice-token", "ua/1"},
	}
	for _, c := range cases {
		cfg, src, err := c.s.RESTConfig(env(nil))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if src != SourceKubeconfig || cfg.Host != c.host || cfg.BearerToken != c.token || (c.ua != "" && cfg.UserAgent != c.ua) {
			t.Errorf("%s: source %q host %q token %q agent %q", c.name, src, cfg.Host, cfg.BearerToken, cfg.UserAgent)
		}
	}
}

func TestRESTConfigSeveralFiles(t *testing.T) {
	kc := writeKubeconfig(t)
	extra := filepath.Join(t.TempDir(), "extra")
	if err := os.WriteFile(extra, []byte(`apiVersion: v1
kind: Config
clusters: [{name: three, cluster: {server: "https://three.example:6443"}}]
users: [{name: carol, user: {token: carol-token}}]
contexts: [{name: c, context: {cluster: three, user: carol}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	// The first file's current context wins; the second file's contexts are usable.
	list := kc + string(filepath.ListSeparator) + extra
	cfg, _, err := (&Settings{}).RESTConfig(env(map[string]string{"KUBECONFIG": list}))
	if err != nil || cfg.Host != "https://one.example:6443" {
		t.Fatalf("merged KUBECONFIG: %v %v", cfg, err)
	}
	cfg, _, err = (&Settings{ConfigPaths: []string{kc, extra}, ConfigContext: "c"}).RESTConfig(env(nil))
	if err != nil || cfg.Host != "https://three.example:6443" || cfg.BearerToken != "carol-token" {
		t.Fatalf("context of the second file: %v %v", cfg, err)
	}
	_, _, err = (&Settings{ConfigPaths: []string{kc, filepath.Join(t.TempDir(), "missing")}}).RESTConfig(env(nil))
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("a missing second file: %v, want an error naming it", err)
	}
}

func TestRESTConfigExpandsHome(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	if err := os.MkdirAll(filepath.Join(home, ".kube"), 0o700); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(writeKubeconfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".kube", "config"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := (&Settings{ConfigPaths: []string{"~/.kube/config"}}).RESTConfig(env(nil))
	if err != nil || cfg.Host != "https://one.example:6443" {
		t.Fatalf("~/.kube/config: %v %v", cfg, err)
	}
	// Only a leading ~/ is the home directory.
	if _, _, err := (&Settings{ConfigPaths: []string{"~other/config"}}).RESTConfig(env(nil)); err == nil {
		t.Fatal("~other/config resolved although no such file exists")
	}
}

func TestRESTConfigInClusterWithoutAccount(t *testing.T) {
	if _, err := os.Stat("/var/run/secrets/kubernetes.io/serviceaccount/token"); err == nil {
		t.Skip("this machine has a service account token")
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
	t.Setenv("KUBERNETES_SERVICE_PORT", "443")
	_, src, err := (&Settings{}).RESTConfig(env(nil))
	if err == nil || errors.Is(err, ErrNoConfiguration) || src != SourceInCluster {
		t.Fatalf("in a pod without a token: source %q, error %v; want the in-cluster error", src, err)
	}
}

func TestTune(t *testing.T) {
	cfg := &rest.Config{UserAgent: "kept"}
	Tune(cfg, "")
	if cfg.QPS != 300 || cfg.Burst != 600 || cfg.UserAgent != "kept" {
		t.Errorf("Tune(\"\") = qps %v burst %d agent %q", cfg.QPS, cfg.Burst, cfg.UserAgent)
	}
	Tune(cfg, "new")
	if cfg.UserAgent != "new" {
		t.Errorf("user agent %q", cfg.UserAgent)
	}
}

func TestPoolKeys(t *testing.T) {
	p := NewPool()
	builds := map[string]int{}
	build := func(key, host string) func() (*rest.Config, error) {
		return func() (*rest.Config, error) {
			builds[key]++
			return &rest.Config{Host: host, QPS: 300, Burst: 600}, nil
		}
	}
	a1, err := p.Get("a", build("a", "https://a:1"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Get("b", build("b", "https://b:1"))
	if err != nil {
		t.Fatal(err)
	}
	a2, err := p.Get("a", build("a", "https://ignored:1"))
	if err != nil {
		t.Fatal(err)
	}
	if a1 != a2 || a1 == b || builds["a"] != 1 || builds["b"] != 1 {
		t.Fatalf("same key gave %p and %p, other key %p; builds %v", a1, a2, b, builds)
	}
	if a1.Config.Host != "https://a:1" || b.Config.Host != "https://b:1" || a1.Kube == nil || a1.Dynamic == nil {
		t.Errorf("clients a %+v b %+v", a1, b)
	}
	// client-go refuses a rate without a burst; the pool must not cache the failure.
	_, err = p.Get("c", func() (*rest.Config, error) { return &rest.Config{Host: "https://c:1", QPS: 5}, nil })
	if err == nil || !strings.Contains(err.Error(), "https://c:1") {
		t.Fatalf("a config client-go refuses: err %v", err)
	}
	c, err := p.Get("c", build("c", "https://c:1"))
	if err != nil || c.Config.Host != "https://c:1" || builds["c"] != 1 {
		t.Fatalf("a later good build: %v %v, builds %v", c, err, builds)
	}
}

func TestMapperIsSharedAndResolves(t *testing.T) {
	kube := fake.NewClientset()
	kube.Resources = []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "pods", Kind: "Pod", Namespaced: true, Verbs: []string{"get"}}}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{{Name: "deployments", Kind: "Deployment", Namespaced: true, Verbs: []string{"get"}}}},
	}
	c := &Clients{Kube: kube}
	m := c.Mapper()
	if c.Mapper() != m {
		t.Fatal("Mapper built a second mapper")
	}
	mapping, err := m.RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "v1")
	if err != nil {
		t.Fatal(err)
	}
	if mapping.Resource != (schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}) {
		t.Errorf("Deployment maps to %v", mapping.Resource)
	}
	if _, err := m.RESTMapping(schema.GroupKind{Group: "example.com", Kind: "Widget"}); err == nil {
		t.Fatal("an unknown kind mapped")
	}
	// A CRD installed later is found after Reset.
	kube.Resources = append(kube.Resources, &metav1.APIResourceList{GroupVersion: "example.com/v1",
		APIResources: []metav1.APIResource{{Name: "widgets", Kind: "Widget", Namespaced: true, Verbs: []string{"get"}}}})
	m.Reset()
	mapping, err = m.RESTMapping(schema.GroupKind{Group: "example.com", Kind: "Widget"})
	if err != nil || mapping.Resource.Resource != "widgets" {
		t.Fatalf("after Reset: %v %v", mapping, err)
	}
}
