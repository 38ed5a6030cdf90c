// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package clusterctl

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
)

const testComponents = `apiVersion: v1
kind: Namespace
metadata:
  name: capi-system
  labels: {cluster.x-k8s.io/provider: cluster-api}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: capi-system
  labels: {cluster.x-k8s.io/provider: cluster-api}
data:
  host: ${KUBERNETES_SERVICE_HOST}
`

const testMetadata = `apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3
kind: Metadata
releaseSeries:
  - major: 1
    minor: 14
    contract: v1beta2
`

func testProvider() Provider {
	return Provider{Name: "cluster-api", Type: "CoreProvider", Version: "v1.14.2", Components: testComponents, Metadata: testMetadata}
}

func TestProviderValidate(t *testing.T) {
	if err := testProvider().Validate(); err != nil {
		t.Fatalf("a valid release: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Provider)
		want string
	}{
		{"no v", func(p *Provider) { p.Version = "1.14.2" }, "not a release version"},
		{"not semver", func(p *Provider) { p.Version = "latest" }, "not a release version"},
		{"no objects", func(p *Provider) { p.Components = "# nothing\n" }, "no Kubernetes object"},
		{"bad yaml", func(p *Provider) { p.Components = "kind: [" }, "components"},
		{"no kind", func(p *Provider) { p.Components = "apiVersion: v1\nmetadata: {name: x}\n" }, "components"},
		{"metadata kind", func(p *Provider) { p.Metadata = strings.Replace(testMetadata, "kind: Metadata", "kind: Other", 1) }, "want clusterctl.cluster.x-k8s.io/v1alpha3 Metadata"},
		{"metadata unknown field", func(p *Provider) { p.Metadata += "extra: 1\n" }, "not a clusterctl Metadata"},
		{"series missing", func(p *Provider) { p.Version = "v1.13.0" }, "no releaseSeries entry for 1.13"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testProvider()
			tc.edit(&p)
			err := p.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestMemoryProxyConfig: clusterctl gets the connection as kubeplay holds
// it, a proxy and an exec plugin included, with clusterctl's own request
// timeout and limits, as a copy it cannot change kubeplay's through.
func TestMemoryProxyConfig(t *testing.T) {
	proxy := func(*http.Request) (*url.URL, error) { return nil, nil }
	cfg := &rest.Config{
		Host:            "https://10.0.0.1:6443",
		BearerToken:     "s3cret",
		TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca"), ServerName: "api", CertData: []byte("c"), KeyData: []byte("k")},
		Impersonate:     rest.ImpersonationConfig{UserName: "u", Groups: []string{"g"}},
		ExecProvider:    &clientcmdapi.ExecConfig{Command: "cred"},
		Proxy:           proxy,
	}
	p := &memoryProxy{context: "kubeplay-1", cfg: cfg}
	got, err := p.GetConfig()
	if err != nil {
		t.Fatal(err)
	}
	if got.Host != cfg.Host || got.BearerToken != "s3cret" || string(got.CAData) != "ca" || got.ServerName != "api" ||
		string(got.CertData) != "c" || string(got.KeyData) != "k" || got.Impersonate.UserName != "u" ||
		got.ExecProvider == nil || got.ExecProvider.Command != "cred" || got.Proxy == nil {
		t.Errorf("connection changed: %+v", got)
	}
	if got.Timeout != proxyTimeout || got.QPS != 500 || got.Burst != 1000 {
		t.Errorf("timeout %v, QPS %v, burst %v: want clusterctl's", got.Timeout, got.QPS, got.Burst)
	}
	got.Host, got.BearerToken = "https://elsewhere", "other"
	if cfg.Host != "https://10.0.0.1:6443" || cfg.BearerToken != "s3cret" {
		t.Error("clusterctl's copy shares kubeplay's connection")
	}
	if ns, _ := p.CurrentNamespace(); ns != "default" {
		t.Errorf("namespace %q", ns)
	}
	if c, _ := p.GetContexts("kube"); len(c) != 1 || c[0] != "kubeplay-1" {
		t.Errorf("contexts %v", c)
	}
}

// TestInitWithoutCertManager: init stops before clusterctl when the
// cluster lacks cert-manager's API, instead of waiting out a timeout.
func TestInitWithoutCertManager(t *testing.T) {
	c, err := kubeclient.NewClients(&rest.Config{Host: newDiscoveryServer(t)})
	if err != nil {
		t.Fatal(err)
	}
	err = Init(context.Background(), c, InitRequest{Providers: []Provider{testProvider()}})
	if !errors.Is(err, ErrNoCertManager) {
		t.Fatalf("Init = %v, want ErrNoCertManager", err)
	}
}

// newDiscoveryServer serves no API group: every request is 404.
func newDiscoveryServer(t *testing.T) string {
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestSinkKeepsFields(t *testing.T) {
	s, ok := (&sink{ctx: context.Background()}).WithName("init").WithValues("provider", "cluster-api").(*sink)
	if !ok {
		t.Fatal("WithValues returned another sink type")
	}
	f := s.with([]any{"version", "v1.14.2", 3})
	if f["provider"] != "cluster-api" || f["version"] != "v1.14.2" || f["logger"] != "init" || len(f) != 3 {
		t.Errorf("fields = %v", f)
	}
	if !s.Enabled(0) || s.Enabled(6) {
		t.Error("levels 0 to 5 are logged, above are not")
	}
}

func TestDeploymentNamespaces(t *testing.T) {
	deploy := func(ns string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: m\n  namespace: " + ns + "\n---\n"
	}
	ps := []Provider{
		{Components: testComponents + "---\n" + deploy("capi-system")},
		{Components: deploy("capi-kubeadm-bootstrap-system") + deploy("capi-system")},
		{Components: deploy("${NAMESPACE}")},
		{Components: "kind: ["},
	}
	got := deploymentNamespaces(ps)
	if strings.Join(got, ",") != "capi-system,capi-kubeadm-bootstrap-system" {
		t.Errorf("deploymentNamespaces = %v", got)
	}
}
