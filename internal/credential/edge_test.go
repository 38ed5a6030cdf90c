// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package credential

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

// Secrets that FromSecret must refuse, each with what it says.
func TestFromSecretRefuses(t *testing.T) {
	good := Spec{Name: "x", Kind: KindBearerToken, Host: "https://h:1", BearerToken: "t", VerifySSL: true}
	cases := []struct {
		edit func(*corev1.Secret)
		want string
	}{
		{func(s *corev1.Secret) { s.Data[keyVerifySSL] = []byte("maybe") }, `verify-ssl is "maybe", not a boolean`},
		{func(s *corev1.Secret) { s.Data[keyKind] = []byte("password") }, `unknown credential kind "password"`},
		{func(s *corev1.Secret) { delete(s.Data, keyKind) }, `unknown credential kind ""`},
		{func(s *corev1.Secret) { s.Labels = nil }, "is not a kubeplay credential"},
	}
	for _, c := range cases {
		sec := good.Secret("cat", Report{}, time.Time{})
		c.edit(sec)
		if _, _, err := FromSecret(sec); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("err = %v, want %q", err, c.want)
		}
	}
	// No digest annotation at all: tampered, since kubeplay always writes one.
	sec := good.Secret("cat", Report{}, time.Time{})
	delete(sec.Annotations, AnnotationDigest)
	if _, tampered, err := FromSecret(sec); err != nil || !tampered {
		t.Errorf("without a digest: tampered %v, %v", tampered, err)
	}
}

func TestSpecDigestIsTheSecretsDigest(t *testing.T) {
	for _, s := range []Spec{
		{Name: "a", Kind: KindBearerToken, Host: "https://h:1", BearerToken: "t", VerifySSL: true},
		{Name: "b", Kind: KindServiceAccount, Host: "https://h:1", ServiceAccount: "sa", Namespace: "runs"},
		// Kinds without verify-ssl read back as verifying.
		{Name: "c", Kind: KindClusterAPI, Parent: "mgmt", ClusterName: "w", ClusterNamespace: "capi", KubeconfigTimeout: "1m", VerifySSL: true},
		{Name: "d", Kind: KindProvider, VerifySSL: true},
	} {
		sec := s.Secret("cat", Report{Username: "u"}, time.Now())
		if s.Digest() != Digest(sec.Data) || sec.Annotations[AnnotationDigest] != s.Digest() {
			t.Errorf("%s: spec digest %s, Secret's %s", s.Name, s.Digest(), Digest(sec.Data))
		}
		got, tampered, err := FromSecret(sec)
		if err != nil || tampered || got != s {
			t.Errorf("%s: round trip %+v, tampered %v, %v", s.Name, got, tampered, err)
		}
	}
	a := Spec{Name: "a", Kind: KindBearerToken, BearerToken: "t1"}
	b := a
	b.BearerToken = "t2"
	if a.Digest() == b.Digest() {
		t.Error("a new token must change the digest, or its clients would be reused")
	}
	c := a
	c.Description, c.SecretVersion = "only an annotation", "2"
	if a.Digest() != c.Digest() {
		t.Error("annotations must not change the digest of the data")
	}
}

func TestReportAnnotations(t *testing.T) {
	r, at := ReportFromAnnotations(nil)
	if at != "" || r.Username != "" || r.Groups != nil || !r.CanRun() {
		t.Errorf("no annotations: %+v %q", r, at)
	}
	r, _ = ReportFromAnnotations(map[string]string{AnnotationGroups: "not json", AnnotationMissing: `["get pods"]`})
	if r.Groups != nil || r.CanRun() || r.Missing[0] != "get pods" {
		t.Errorf("bad groups: %+v", r)
	}
	if p := (Permission{Verb: "create", Resource: "pods", Subresource: "exec"}); p.String() != "create pods/exec" {
		t.Errorf("permission = %s", p)
	}
}

func TestRESTConfigEdges(t *testing.T) {
	cfg, err := Spec{Name: "s", Kind: KindServiceAccount, Host: "https://h:1", BearerToken: "t", CACert: "ca", VerifySSL: true}.RESTConfig(nil, false)
	if err != nil || cfg.Insecure || string(cfg.CAData) != "ca" {
		t.Errorf("service_account: %+v %v", cfg, err)
	}
	if _, err := (Spec{Name: "c", Kind: KindClusterAPI}).RESTConfig(nil, false); err == nil || !strings.Contains(err.Error(), "no static configuration") {
		t.Errorf("cluster_api: %v", err)
	}
	if _, err := (Spec{Name: "u", Kind: "password"}).RESTConfig(nil, false); err == nil {
		t.Error("an unknown kind configured a client")
	}
	if _, err := (Spec{Name: "k", Kind: KindKubeconfig, Kubeconfig: ": : :"}).RESTConfig(nil, false); err == nil {
		t.Error("a kubeconfig that does not parse configured a client")
	}
	if _, err := (Spec{Name: "k", Kind: KindKubeconfig, Kubeconfig: "apiVersion: v1\nkind: Config\n", Context: "x"}).RESTConfig(nil, false); err == nil {
		t.Error("a missing context configured a client")
	}
}

func TestClusterAPIHelpers(t *testing.T) {
	s := Spec{Name: "w", Kind: KindClusterAPI, ClusterName: "work"}
	if s.KubeconfigSecretName() != "work-kubeconfig" || s.ClusterNamespaceOrDefault() != "default" || s.KubeconfigWait() != DefaultKubeconfigTimeout {
		t.Errorf("defaults: %s %s %s", s.KubeconfigSecretName(), s.ClusterNamespaceOrDefault(), s.KubeconfigWait())
	}
	s.ClusterNamespace, s.KubeconfigTimeout = "capi", "90s"
	if s.ClusterNamespaceOrDefault() != "capi" || s.KubeconfigWait() != 90*time.Second {
		t.Errorf("set: %s %s", s.ClusterNamespaceOrDefault(), s.KubeconfigWait())
	}
	s.KubeconfigTimeout = "soon"
	if s.KubeconfigWait() != DefaultKubeconfigTimeout {
		t.Errorf("a bad timeout must fall back to the default, got %s", s.KubeconfigWait())
	}
}

// kubeconfig_timeout = "0s" reads once, without waiting, and finds a
// Secret that is there.
func TestClusterAPIKubeconfigNoWait(t *testing.T) {
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "work-kubeconfig", Namespace: "capi"},
		Data: map[string][]byte{"value": []byte("kubeconfig")}}
	s := Spec{Name: "w", Kind: KindClusterAPI, Parent: "mgmt", ClusterName: "work", ClusterNamespace: "capi", KubeconfigTimeout: "0s"}
	if got, err := ClusterAPIKubeconfig(context.Background(), fake.NewClientset(sec), s); err != nil || string(got) != "kubeconfig" {
		t.Errorf("0s with the Secret there: %q, %v", got, err)
	}
	if _, err := ClusterAPIKubeconfig(context.Background(), fake.NewClientset(), s); err == nil || !strings.Contains(err.Error(), "not provisioned") {
		t.Errorf("0s without the Secret: %v", err)
	}
}

func TestClusterAPIKubeconfigRead(t *testing.T) {
	ctx := context.Background()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "work-kubeconfig", Namespace: "capi"},
		Data: map[string][]byte{"value": []byte("kubeconfig")}}
	s := Spec{Name: "w", Kind: KindClusterAPI, Parent: "mgmt", ClusterName: "work", ClusterNamespace: "capi"}
	got, err := ClusterAPIKubeconfig(ctx, fake.NewClientset(sec), s)
	if err != nil || string(got) != "kubeconfig" {
		t.Fatalf("got %q, %v", got, err)
	}
	s.KubeconfigTimeout = "0s"
	_, err = ClusterAPIKubeconfig(ctx, fake.NewClientset(), s)
	for _, want := range []string{"not provisioned", "Secret capi/work-kubeconfig", `credential "mgmt"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want it to say %q", err, want)
		}
	}
	s.KubeconfigTimeout = ""
	kube := fake.NewClientset()
	kube.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "work-kubeconfig", errors.New("no"))
	})
	if _, err := ClusterAPIKubeconfig(ctx, kube, s); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "reading Secret capi/work-kubeconfig") {
		t.Errorf("forbidden: %v", err)
	}
}

func TestAccountExistsAndDeprovision(t *testing.T) {
	ctx := context.Background()
	a := Account{Namespace: "runs", Name: "runner", Credential: "c"}
	own := a.labels()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: a.RoleName(), Namespace: a.Namespace, Labels: own}}
	objs := []runtime.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: a.Name, Namespace: a.Namespace, Labels: own}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: a.TokenSecretName(), Namespace: a.Namespace, Labels: own},
			Data: map[string][]byte{corev1.ServiceAccountTokenKey: []byte("t")}},
		role.DeepCopy(),
		// Another credential's binding of the same name is not this one's to delete.
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: a.RoleName(), Namespace: a.Namespace,
			Labels: managed.Labels(managed.LabelCredential, "other")}},
	}
	kube := fake.NewClientset(objs...)
	if ok, err := Exists(ctx, kube, a); err != nil || !ok {
		t.Fatalf("Exists = %v, %v", ok, err)
	}
	// A token Secret that someone else replaced is not the account's.
	if ok, err := Exists(ctx, kube, Account{Namespace: a.Namespace, Name: a.Name, Credential: "other"}); err != nil || ok {
		t.Errorf("another credential's account exists: %v, %v", ok, err)
	}
	if err := kube.CoreV1().ServiceAccounts(a.Namespace).Delete(ctx, a.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if ok, err := Exists(ctx, kube, a); err != nil || ok {
		t.Errorf("without its ServiceAccount: %v, %v", ok, err)
	}
	if err := Deprovision(ctx, kube, a); err != nil {
		t.Fatalf("Deprovision with the ServiceAccount already gone: %v", err)
	}
	if ok, err := Exists(ctx, kube, a); err != nil || ok {
		t.Errorf("after Deprovision: %v, %v", ok, err)
	}
	if _, err := kube.RbacV1().Roles(a.Namespace).Get(ctx, a.RoleName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Role survived: %v", err)
	}
	if _, err := kube.RbacV1().RoleBindings(a.Namespace).Get(ctx, a.RoleName(), metav1.GetOptions{}); err != nil {
		t.Errorf("another credential's RoleBinding was deleted: %v", err)
	}
	if _, err := kube.RbacV1().Roles(a.Namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kube.PrependReactor("delete", "roles", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "roles"}, a.RoleName(), errors.New("no"))
	})
	if err := Deprovision(ctx, kube, a); err == nil || !strings.Contains(err.Error(), "deleting Role runs/runner-pod-manager") {
		t.Errorf("a refused delete: %v", err)
	}
}

func TestKubeconfig(t *testing.T) {
	b, err := Kubeconfig("c", "https://h:1", "ca", "runner", "tok", "runs")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load(b)
	if err != nil {
		t.Fatal(err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if cfg.CurrentContext != "c" || ctx.Namespace != "runs" || cfg.AuthInfos["runner"].Token != "tok" || cfg.Clusters["c"].Server != "https://h:1" {
		t.Errorf("kubeconfig:\n%s", b)
	}
	if err := ValidateKubeconfig(string(b), ""); err != nil {
		t.Errorf("the exported kubeconfig does not validate: %v", err)
	}
}

// The Role grants RunPermissions and WarmPermissions, each once, and
// nothing else; every permission says why a run needs it.
func TestRoleRulesAreRunPermissions(t *testing.T) {
	var granted, want []string
	for _, r := range RoleRules() {
		if len(r.APIGroups) != 1 || r.APIGroups[0] != "" || len(r.Resources) != 1 {
			t.Errorf("rule %+v", r)
		}
		for _, v := range r.Verbs {
			granted = append(granted, v+" "+r.Resources[0])
		}
	}
	for _, p := range slices.Concat(RunPermissions, WarmPermissions) {
		want = append(want, p.String())
		if p.Why == "" {
			t.Errorf("%s says not why", p)
		}
	}
	if !slices.Equal(slices.Sorted(slices.Values(granted)), slices.Sorted(slices.Values(want))) {
		t.Errorf("RoleRules grant %v, RunPermissions and WarmPermissions are %v", granted, want)
	}
	if len(slices.Compact(slices.Sorted(slices.Values(want)))) != len(want) {
		t.Errorf("RunPermissions repeat a permission: %v", want)
	}
	for _, never := range []string{"patch pods", "get pods/log"} {
		if slices.Contains(want, never) {
			t.Errorf("RunPermissions hold %s, which no run calls", never)
		}
	}
}
