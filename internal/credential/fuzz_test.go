// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package credential

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

// kubeconfigSeeds are kubeconfigs as a catalog or parent Secret may hold
// them: inline ones, and each way of reaching the host, some hidden in a
// user or cluster no context names.
var kubeconfigSeeds = []string{
	userKubeconfig("    token: abc"),
	userKubeconfig("    client-certificate-data: Y2VydA==\n    client-key-data: a2V5"),
	userKubeconfig("    exec: {apiVersion: client.authentication.k8s.io/v1, interactiveMode: Never, command: /bin/sh, args: [-c, 'touch /tmp/x']}"),
	userKubeconfig("    exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: ''}"),
	userKubeconfig("    exec: null\n    token: abc"),
	userKubeconfig("    auth-provider: {name: oidc, config: {client-id: x, idp-issuer-url: 'https://x'}}"),
	userKubeconfig("    auth-provider: {}"),
	userKubeconfig("    tokenFile: /etc/shadow"),
	userKubeconfig("    client-certificate: /etc/ssl/c.pem\n    client-key: ~/.ssh/id_rsa"),
	userKubeconfig("    token: abc") + "users:\n- name: hidden\n  user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: id}}\n",
	userKubeconfig("    token: abc") + "clusters:\n- name: d\n  cluster: {server: 'https://h', certificate-authority: /etc/ca.pem}\n",
	`{"apiVersion":"v1","kind":"Config","clusters":[{"name":"c","cluster":{"server":"https://h:6443"}}],` +
		`"users":[{"name":"u","user":{"exec":{"apiVersion":"client.authentication.k8s.io/v1","command":"id"}}}],` +
		`"contexts":[{"name":"x","context":{"cluster":"c","user":"u"}}],"current-context":"x"}`,
	"apiVersion: v1\nkind: Config\nusers:\n- &u {name: u, user: {tokenFile: /x}}\n- *u\n",
	"apiVersion: v1\nkind: Config\ncurrent-context: nope\n",
	"users: [",
	"",
}

// FuzzCatalogSecret: whatever a writer of the catalog namespace puts in a
// Secret with kubeplay's labels, reading it back and building its client
// configuration never panics, and never yields a configuration that runs
// a program or reads a file on this host, except an exec plugin that the
// credential declares and the configuration opted into.
func FuzzCatalogSecret(f *testing.F) {
	for i, kc := range kubeconfigSeeds {
		f.Add(KindKubeconfig, []byte(kc), "", "true", "", "", i%2 == 0)
	}
	f.Add(KindBearerToken, []byte(nil), "", "", "https://10.0.0.1:6443", "tok", false)
	f.Add(KindServiceAccount, []byte(nil), "", "1", "https://h", "t", true)
	f.Add(KindKubeconfig, []byte(userKubeconfig("    token: abc")), "x", "yes", "", "", true)
	f.Add(KindProvider, []byte(nil), "", "false", "", "", false)
	f.Add(KindClusterAPI, []byte("x"), "", "", "", "", true)
	f.Fuzz(func(t *testing.T, kind string, kubeconfig []byte, context, allowExec, host, token string, optIn bool) {
		data := map[string][]byte{keyKind: []byte(kind), keyKubeconfig: kubeconfig, keyContext: []byte(context),
			keyHost: []byte(host), keyToken: []byte(token)}
		if allowExec != "" {
			data[keyAllowExec] = []byte(allowExec)
		}
		sec := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "kubeplay-system",
				Labels: map[string]string{managed.LabelComponent: managed.ComponentCredential}},
			Data: data,
		}
		spec, _, err := FromSecret(sec)
		if err != nil {
			return
		}
		_ = spec.KubeconfigServer()
		cfg, err := spec.RESTConfig(&rest.Config{Host: "https://provider:6443"}, optIn)
		if err != nil {
			return
		}
		if optIn && spec.AllowExecPlugin {
			cfg.ExecProvider = nil // declared and opted into: the one thing allowed
		}
		if reach := kubeclient.HostReach(cfg); reach != "" {
			t.Fatalf("kind %q, allow-exec-plugin %q, opt-in %v: the configuration uses %s\n%s", kind, allowExec, optIn, reach, kubeconfig)
		}
	})
}

// FuzzClusterAPIKubeconfig: whatever the <cluster>-kubeconfig Secret on a
// cluster_api credential's parent holds, no opt-in reaches it: building its
// configuration never panics and never yields one that runs a program or
// reads a file on this host.
func FuzzClusterAPIKubeconfig(f *testing.F) {
	for _, kc := range kubeconfigSeeds {
		f.Add([]byte(kc))
	}
	s := Spec{Name: "wl", Kind: KindClusterAPI, ClusterName: "wl", ClusterNamespace: "infra"}
	f.Fuzz(func(t *testing.T, kubeconfig []byte) {
		cfg, err := ClusterAPIRESTConfig(s, kubeconfig)
		if err != nil {
			return
		}
		if reach := kubeclient.HostReach(cfg); reach != "" {
			t.Fatalf("the configuration uses %s\n%s", reach, kubeconfig)
		}
	})
}
