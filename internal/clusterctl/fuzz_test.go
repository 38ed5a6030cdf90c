// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package clusterctl

import (
	"bytes"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// FuzzProviderValidate: whatever a user pastes as components, metadata and
// version, validation returns an error or nil, never panics, and accepts
// only a version whose series the metadata lists.
func FuzzProviderValidate(f *testing.F) {
	f.Add(testComponents, testMetadata, "v1.14.2")
	f.Add("kind: [", "releaseSeries: 3", "v1")
	f.Add("---\n---\n", "apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3\nkind: Metadata\n", "v0.0.0-rc.1+x")
	f.Fuzz(func(t *testing.T, components, metadata, version string) {
		p := Provider{Name: "p", Type: "CoreProvider", Version: version, Components: components, Metadata: metadata}
		if err := p.Validate(); err == nil && (version == "" || version[0] != 'v') {
			t.Fatalf("accepted version %q", version)
		}
	})
}

// FuzzKubeconfigRoundTrip: whatever server, token, CA and server name a
// credential holds, the kubeconfig clusterctl is given loads back to the
// same connection, or kubeconfigFor refuses it; it never panics.
func FuzzKubeconfigRoundTrip(f *testing.F) {
	f.Add("https://10.0.0.1:6443", "s3cret", []byte("ca"), "api", false)
	f.Add("", "", []byte{}, "", true)
	f.Add("http://[::1]:80/path", "tok\nen", []byte{0, 1, 2}, "x y", true)
	f.Fuzz(func(t *testing.T, host, token string, ca []byte, serverName string, insecure bool) {
		// Connections come from Terraform strings and kubeconfig YAML: UTF-8.
		if !utf8.ValidString(host) || !utf8.ValidString(token) || !utf8.ValidString(serverName) {
			t.Skip()
		}
		cfg := &rest.Config{Host: host, BearerToken: token,
			TLSClientConfig: rest.TLSClientConfig{CAData: ca, ServerName: serverName, Insecure: insecure}}
		kc, err := kubeconfigFor(cfg)
		if err != nil {
			if host != "" {
				t.Fatalf("refused host %q: %v", host, err)
			}
			return
		}
		raw, err := clientcmd.Write(*kc)
		if err != nil {
			// YAML refuses control characters other than tab and line breaks.
			if !strings.ContainsFunc(host+token+serverName, func(r rune) bool {
				return unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r'
			}) {
				t.Fatal(err)
			}
			return
		}
		back, err := clientcmd.Load(raw)
		if err != nil {
			t.Fatalf("the kubeconfig written does not load: %v\n%s", err, raw)
		}
		c, u := back.Clusters[kubeconfigContext], back.AuthInfos[kubeconfigContext]
		if c == nil || u == nil || back.CurrentContext != kubeconfigContext {
			t.Fatalf("context %q lost: %s", kubeconfigContext, raw)
		}
		if c.Server != host || u.Token != token || !bytes.Equal(c.CertificateAuthorityData, ca) ||
			c.TLSServerName != serverName || c.InsecureSkipTLSVerify != insecure {
			t.Fatalf("round trip changed the connection:\n%+v\n%+v", c, u)
		}
	})
}
