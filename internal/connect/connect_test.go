// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package connect

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/credential"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
)

const childKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:7443", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: abc}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`

func newResolver(t *testing.T, execPins ...map[string]string) (*Resolver, *catalog.Store, *fake.Clientset) {
	t.Helper()
	kube := fake.NewClientset()
	base := &kubeclient.Clients{Config: &rest.Config{Host: "https://127.0.0.1:6443"}, Kube: kube}
	store := catalog.New(kube, "kubeplay-system", nil)
	r := New(kubeclient.NewPool(),
		func() (*kubeclient.Clients, error) { return base, nil },
		func() (*catalog.Store, error) { return store, nil }, nil)
	if len(execPins) > 0 {
		r.execPins = execPins[0]
	}
	return r, store, kube
}

func put(t *testing.T, s *catalog.Store, spec credential.Spec) {
	t.Helper()
	if _, err := s.PutCredential(context.Background(), catalog.Credential{Spec: spec}, catalog.CreateOrUpdate); err != nil {
		t.Fatalf("storing credential %s: %v", spec.Name, err)
	}
}

func TestNamedProviderAndMissing(t *testing.T) {
	r, store, _ := newResolver(t)
	c, err := r.Named(context.Background(), "")
	if err != nil || c.Config.Host != "https://127.0.0.1:6443" {
		t.Fatalf("no name: %v %v, want the provider's clients", c, err)
	}
	if _, err := r.Named(context.Background(), "nope"); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("missing credential: %v, want ErrNotFound", err)
	}
	put(t, store, credential.Spec{Name: "self", Kind: credential.KindProvider})
	if c2, err := r.Named(context.Background(), "self"); err != nil || c2 != c {
		t.Errorf("provider kind: %v %v, want the provider's own clients", c2, err)
	}
}

func TestNamedBearerTokenIsPooledByContent(t *testing.T) {
	r, store, _ := newResolver(t)
	spec := credential.Spec{Name: "awx", Kind: credential.KindBearerToken, Host: "https://127.0.0.1:8443", BearerToken: "t0k3n"}
	put(t, store, spec)
	a, err := r.Named(context.Background(), "awx")
	if err != nil {
		t.Fatal(err)
	}
	if a.Config.Host != spec.Host || a.Config.BearerToken != "t0k3n" {
		t.Errorf("config %s %q, want the credential's host and token", a.Config.Host, a.Config.BearerToken)
	}
	b, _ := r.Named(context.Background(), "awx")
	if a != b {
		t.Error("an unchanged credential got new clients")
	}
	spec.BearerToken = "rotated"
	put(t, store, spec)
	c, err := r.Named(context.Background(), "awx")
	if err != nil || c == a || c.Config.BearerToken != "rotated" {
		t.Errorf("a changed credential: %v (same clients %v), want new clients with the new token", err, c == a)
	}
	// Spec keys by the content about to be stored: the same clients.
	if d, err := r.Spec(context.Background(), spec); err != nil || d.Config.BearerToken != "rotated" {
		t.Errorf("Spec: %v %v", d, err)
	}
}

func TestClusterAPIReadsTheParentsSecret(t *testing.T) {
	r, store, kube := newResolver(t)
	if _, err := kube.CoreV1().Secrets("infra").Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "wl-kubeconfig", Namespace: "infra"},
		Data:       map[string][]byte{"value": []byte(childKubeconfig)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	spec := credential.Spec{Name: "wl", Kind: credential.KindClusterAPI, ClusterName: "wl", ClusterNamespace: "infra", KubeconfigTimeout: "1s"}
	put(t, store, spec)
	c, err := r.Named(context.Background(), "wl")
	if err != nil {
		t.Fatal(err)
	}
	if c.Config.Host != "https://127.0.0.1:7443" || c.Config.BearerToken != "abc" {
		t.Errorf("child clients: %s %q, want the kubeconfig's server and token", c.Config.Host, c.Config.BearerToken)
	}
}

func TestClusterAPICycle(t *testing.T) {
	r, store, _ := newResolver(t)
	put(t, store, credential.Spec{Name: "a", Kind: credential.KindClusterAPI, Parent: "b", ClusterName: "x"})
	put(t, store, credential.Spec{Name: "b", Kind: credential.KindClusterAPI, Parent: "a", ClusterName: "y"})
	_, err := r.Named(context.Background(), "a")
	if !errors.Is(err, ErrCycle) || !strings.Contains(err.Error(), "a -> b -> a") {
		t.Errorf("cycle: %v, want ErrCycle naming a -> b -> a", err)
	}
}

// A catalog credential whose Secret was edited outside kubeplay is refused,
// not connected with.
func TestNamedRefusesTamperedCredential(t *testing.T) {
	r, store, kube := newResolver(t)
	put(t, store, credential.Spec{Name: "awx", Kind: credential.KindBearerToken, Host: "https://127.0.0.1:8443", BearerToken: "t"})
	sec, err := kube.CoreV1().Secrets("kubeplay-system").Get(context.Background(), "awx", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sec.Data["host"] = []byte("https://attacker.example:443")
	if _, err := kube.CoreV1().Secrets("kubeplay-system").Update(context.Background(), sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c, err := r.Named(context.Background(), "awx")
	if !errors.Is(err, catalog.ErrTampered) || c != nil {
		t.Errorf("tampered: %v %v, want ErrTampered and no clients", c, err)
	}
}

// Cluster data may not run programs or read files here: a parent Secret
// with an exec plugin, or a catalog kubeconfig with a tokenFile, is refused.
func TestRefusesHostAccessFromClusterData(t *testing.T) {
	r, store, kube := newResolver(t)
	execKubeconfig := strings.Replace(childKubeconfig, "user: {token: abc}",
		"user: {exec: {apiVersion: client.authentication.k8s.io/v1, interactiveMode: Never, command: /bin/touch, args: [/tmp/kubeplay-pwned]}}", 1)
	if _, err := kube.CoreV1().Secrets("infra").Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "wl-kubeconfig", Namespace: "infra"},
		Data:       map[string][]byte{"value": []byte(execKubeconfig)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	put(t, store, credential.Spec{Name: "wl", Kind: credential.KindClusterAPI, ClusterName: "wl", ClusterNamespace: "infra", KubeconfigTimeout: "1s"})
	_, err := r.Named(context.Background(), "wl")
	var he *kubeclient.HostAccessError
	if !errors.As(err, &he) || he.Field != "exec" || !strings.Contains(err.Error(), "Secret infra/wl-kubeconfig") {
		t.Errorf("cluster_api with exec: %v, want a HostAccessError naming the Secret", err)
	}
	// The exec opt-in does not open file paths to a catalog kubeconfig.
	tokenFile := strings.Replace(childKubeconfig, "user: {token: abc}", "user: {tokenFile: /etc/hostname}", 1)
	put(t, store, credential.Spec{Name: "kc", Kind: credential.KindKubeconfig, Kubeconfig: tokenFile, AllowExecPlugin: true})
	if _, err := r.Named(context.Background(), "kc"); !errors.As(err, &he) || he.Field != "tokenFile" {
		t.Errorf("kubeconfig with tokenFile: %v, want a HostAccessError", err)
	}
}

// A catalog kubeconfig credential that declares allow-exec-plugin, stored
// with a valid digest, does not make the resolver configure its exec
// plugin: the configuration that uses it has not opted in. With the
// opt-in it does; the clients built then are not handed to a use without.
func TestNamedExecNeedsOptIn(t *testing.T) {
	execKubeconfig := strings.Replace(childKubeconfig, "user: {token: abc}",
		"user: {exec: {apiVersion: client.authentication.k8s.io/v1, interactiveMode: Never, command: /bin/touch, args: [/tmp/kubeplay-pwned]}}", 1)
	spec := credential.Spec{Name: "kc", Kind: credential.KindKubeconfig, Kubeconfig: execKubeconfig, AllowExecPlugin: true}
	r, store, _ := newResolver(t, map[string]string{"other": spec.ExecSHA256()})
	put(t, store, spec)
	c, err := r.Named(context.Background(), "kc")
	if c != nil {
		t.Fatalf("clients configured with exec plugin %+v (err %v): the catalog alone enabled it", c.Config.ExecProvider, err)
	}
	var ne *credential.ExecNotAllowedError
	if !errors.As(err, &ne) || !errors.Is(err, kubeclient.ErrHostAccess) || ne.Credential != "kc" {
		t.Errorf("err = %v, want an ExecNotAllowedError for kc", err)
	}
	// Written in this configuration (Spec), its own declaration is the opt-in.
	if c, err := r.Spec(context.Background(), spec); err != nil || c.Config.ExecProvider == nil {
		t.Fatalf("Spec of a declared exec kubeconfig: %v", err)
	}
	if c, err := r.Named(context.Background(), "kc"); c != nil || !errors.As(err, &ne) {
		t.Errorf("after Spec built exec clients, Named without opt-in: %v %v, want refused", c, err)
	}

	opted, store, _ := newResolver(t, map[string]string{"kc": spec.ExecSHA256()})
	put(t, store, spec)
	c, err = opted.Named(context.Background(), "kc")
	if err != nil || c.Config.ExecProvider == nil || c.Config.ExecProvider.Command != "/bin/touch" {
		t.Fatalf("declared and opted in: %v, want the exec plugin configured", err)
	}
	// Opted in but not declared: refused.
	spec.AllowExecPlugin = false
	put(t, store, spec)
	var he *kubeclient.HostAccessError
	if c, err := opted.Named(context.Background(), "kc"); c != nil || !errors.As(err, &he) || errors.As(err, &ne) || he.Field != "exec" {
		t.Errorf("opted in, not declared: %v %v, want a HostAccessError", c, err)
	}
}

// A catalog credential opted in by digest whose exec command (or
// arguments) someone changed and signed again, as a holder of the catalog
// key can, is refused before client-go sees it: the pin is the exec
// blocks' content, not the credential's name (issue 40).
func TestNamedExecPinnedByContent(t *testing.T) {
	pinned := strings.Replace(childKubeconfig, "user: {token: abc}",
		"user: {exec: {apiVersion: client.authentication.k8s.io/v1, interactiveMode: Never, command: /bin/true}}", 1)
	spec := credential.Spec{Name: "kc", Kind: credential.KindKubeconfig, Kubeconfig: pinned, AllowExecPlugin: true}
	pin := spec.ExecSHA256()
	r, store, _ := newResolver(t, map[string]string{"kc": pin})
	put(t, store, spec)
	if c, err := r.Named(context.Background(), "kc"); err != nil || c.Config.ExecProvider == nil || c.Config.ExecProvider.Command != "/bin/true" {
		t.Fatalf("the pinned exec plugin: %v, want it configured", err)
	}
	for _, swapped := range []string{
		"command: /bin/touch, args: [/tmp/kubeplay-pwned]",
		"command: /bin/true, args: [--pwned]",
		"command: /bin/true, env: [{name: LD_PRELOAD, value: /tmp/x.so}]",
	} {
		spec.Kubeconfig = strings.Replace(pinned, "command: /bin/true", swapped, 1)
		put(t, store, spec) // signed as kubeplay signs it
		c, err := r.Named(context.Background(), "kc")
		var pe *credential.ExecPinMismatchError
		if c != nil || !errors.As(err, &pe) || pe.Pinned != pin || pe.Found != spec.ExecSHA256() || pe.Found == pin {
			t.Errorf("%s: %v %v, want an ExecPinMismatchError", swapped, c, err)
		}
	}
}
