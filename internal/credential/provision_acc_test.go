// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package credential

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalogkey"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/warmpool"
)

func accKube(t *testing.T) (*rest.Config, kubernetes.Interface) {
	t.Helper()
	cfg, kube := acctest.Clients(t)
	acctest.Parallel(t)
	return cfg, kube
}

// accountGetters read each of an account's objects, by kind.
func accountGetters(kube kubernetes.Interface, a Account) map[string]func(context.Context) (metav1.Object, error) {
	get := metav1.GetOptions{}
	return map[string]func(context.Context) (metav1.Object, error){
		"ServiceAccount": func(ctx context.Context) (metav1.Object, error) {
			return kube.CoreV1().ServiceAccounts(a.Namespace).Get(ctx, a.Name, get)
		},
		"Role": func(ctx context.Context) (metav1.Object, error) {
			return kube.RbacV1().Roles(a.Namespace).Get(ctx, a.RoleName(), get)
		},
		"RoleBinding": func(ctx context.Context) (metav1.Object, error) {
			return kube.RbacV1().RoleBindings(a.Namespace).Get(ctx, a.RoleName(), get)
		},
		"Secret": func(ctx context.Context) (metav1.Object, error) {
			return kube.CoreV1().Secrets(a.Namespace).Get(ctx, a.TokenSecretName(), get)
		},
	}
}

// TestAccProvisionRefusesForeignObjects: an object of one of the account's
// names that kubeplay did not make is neither adopted nor changed nor
// deleted, and nothing else is written.
func TestAccProvisionRefusesForeignObjects(t *testing.T) {
	_, kube := accKube(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := acctest.Namespace(t, kube, "kp-own")
	foreign := func(kind string, a Account) error {
		meta := metav1.ObjectMeta{Namespace: ns, Labels: map[string]string{"team": "theirs"}}
		var err error
		switch kind {
		case "ServiceAccount":
			meta.Name = a.Name
			_, err = kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: meta}, metav1.CreateOptions{})
		case "Role":
			meta.Name = a.RoleName()
			_, err = kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{})
		case "RoleBinding":
			meta.Name = a.RoleName()
			_, err = kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: meta,
				Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: ns}},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "theirs"}}, metav1.CreateOptions{})
		case "Secret":
			meta.Name = a.TokenSecretName()
			_, err = kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: meta,
				Data: map[string][]byte{"password": []byte("theirs")}}, metav1.CreateOptions{})
		}
		return err
	}
	for _, kind := range []string{"ServiceAccount", "Role", "RoleBinding", "Secret"} {
		t.Run(kind, func(t *testing.T) {
			a := Account{Namespace: ns, Name: "acct-" + strings.ToLower(kind), Credential: "c"}
			if err := foreign(kind, a); err != nil {
				t.Fatal(err)
			}
			get := accountGetters(kube, a)
			before, err := get[kind](ctx)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Provision(ctx, kube, a)
			var no *managed.NotOwnedError
			if !errors.As(err, &no) || no.Kind != kind || no.Namespace != ns || no.Name != before.GetName() {
				t.Fatalf("Provision = %v, want a NotOwnedError for %s %s/%s", err, kind, ns, before.GetName())
			}
			if msg := err.Error(); !strings.Contains(msg, kind+" "+ns+"/"+before.GetName()+" exists and was not created by kubeplay") ||
				!strings.Contains(msg, managed.LabelCredential+"=c") {
				t.Errorf("error %q does not name the object and the labels it lacks", msg)
			}
			// Deprovision, as a failed create runs it, leaves the object too.
			if err := Deprovision(ctx, kube, a); err != nil {
				t.Fatalf("Deprovision: %v", err)
			}
			after, err := get[kind](ctx)
			if err != nil {
				t.Fatalf("the foreign %s is gone: %v", kind, err)
			}
			if after.GetUID() != before.GetUID() || after.GetResourceVersion() != before.GetResourceVersion() ||
				managed.Owns(after) {
				t.Errorf("the foreign %s changed: uid %s→%s, version %s→%s, labels %v", kind, before.GetUID(), after.GetUID(),
					before.GetResourceVersion(), after.GetResourceVersion(), after.GetLabels())
			}
			for k, g := range get {
				if _, err := g(ctx); k != kind && !apierrors.IsNotFound(err) {
					t.Errorf("%s was written although provisioning was refused (err=%v)", k, err)
				}
			}
		})
	}
}

// TestAccDeprovisionLeavesReplacedObject: the token Secret is replaced
// between Deprovision's read and its delete; the UID precondition makes the
// API server refuse, and the replacement stays.
func TestAccDeprovisionLeavesReplacedObject(t *testing.T) {
	_, kube := accKube(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := acctest.Namespace(t, kube, "kp-uid")
	a := Account{Namespace: ns, Name: "runner", Credential: "c"}
	if _, err := Provision(ctx, kube, a); err != nil {
		t.Fatal(err)
	}
	var replacement *corev1.Secret
	wrapped := acctest.ReplacingKube{Interface: kube, Replace: func(ctx context.Context, ns, name string) {
		secrets := kube.CoreV1().Secrets(ns)
		old, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("reading %s before replacing it: %v", name, err)
		}
		if err := secrets.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		replacement, err = secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: old.Labels},
			Data: map[string][]byte{"k": []byte("someone else's")}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}}
	if err := Deprovision(ctx, wrapped, a); err != nil {
		t.Fatalf("Deprovision: %v", err)
	}
	if replacement == nil {
		t.Fatal("Deprovision deleted no Secret")
	}
	got, err := kube.CoreV1().Secrets(ns).Get(ctx, a.TokenSecretName(), metav1.GetOptions{})
	if err != nil || got.UID != replacement.UID {
		t.Fatalf("the replacement Secret was deleted (err=%v)", err)
	}
	get := accountGetters(kube, a)
	for _, kind := range []string{"ServiceAccount", "Role", "RoleBinding"} {
		if _, err := get[kind](ctx); !apierrors.IsNotFound(err) {
			t.Errorf("%s survived Deprovision (err=%v)", kind, err)
		}
	}
}

// TestAccProvisionedRoleGrantsRunPermissions: the Role on the cluster grants
// exactly RunPermissions, which can_run_pods checks, and WarmPermissions;
// its token runs a pod and execs into it over WebSocket and over SPDY, and
// may not patch pods.
func TestAccProvisionedRoleGrantsRunPermissions(t *testing.T) {
	cfg, kube := accKube(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := acctest.Namespace(t, kube, "kp-role")
	a := Account{Namespace: ns, Name: "runner", Credential: "c"}
	prov, err := Provision(ctx, kube, a)
	if err != nil {
		t.Fatal(err)
	}
	role, err := kube.RbacV1().Roles(ns).Get(ctx, a.RoleName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var granted, want []string
	for _, r := range role.Rules {
		if !slices.Equal(r.APIGroups, []string{""}) || len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
			t.Errorf("rule %+v is not a plain core API rule", r)
		}
		for _, res := range r.Resources {
			for _, v := range r.Verbs {
				granted = append(granted, v+" "+res)
			}
		}
	}
	for _, p := range slices.Concat(RunPermissions, WarmPermissions) {
		want = append(want, p.String())
	}
	slices.Sort(granted)
	slices.Sort(want)
	if !slices.Equal(granted, want) {
		t.Errorf("the Role grants %v, can_run_pods checks %v", granted, want)
	}
	for _, never := range []string{"patch pods", "get pods/log"} {
		if slices.Contains(granted, never) {
			t.Errorf("the Role grants %s, which no run calls", never)
		}
	}

	tcfg := &rest.Config{Host: cfg.Host, BearerToken: prov.Token, TLSClientConfig: rest.TLSClientConfig{CAData: []byte(prov.CACert)}}
	if len(tcfg.CAData) == 0 {
		tcfg.CAData = cfg.CAData
	}
	tkube, err := kubernetes.NewForConfig(tcfg)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := VerifyProvisioned(ctx, tkube, cfg.Host, ns)
	if err != nil || !rep.CanRun() {
		t.Fatalf("can_run_pods with the provisioned token: %+v, %v", rep, err)
	}
	for _, p := range []Permission{{Verb: "patch", Resource: "pods"},
		{Verb: "get", Resource: "pods", Subresource: "log"}, {Verb: "list", Resource: "secrets"}} {
		res, err := tkube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authzv1.SelfSubjectAccessReview{
			Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authzv1.ResourceAttributes{
				Namespace: ns, Verb: p.Verb, Resource: p.Resource, Subresource: p.Subresource}}}, metav1.CreateOptions{})
		if err != nil || res.Status.Allowed {
			t.Errorf("the token may %s (err=%v)", p, err)
		}
	}
	pod, err := acctest.StartPod(ctx, tkube, ns, "sa-exec", acctest.TestImage())
	if err != nil {
		t.Fatalf("running a pod with the token: %v", err)
	}
	// kubeplay signs each pod it makes with the rights the Role gives: an
	// update, never a patch.
	made, err := tkube.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	key, err := catalogkey.New([]byte("kubeplay-credential-acc-test-key-32b"))
	if err != nil {
		t.Fatal(err)
	}
	made.Labels = map[string]string{managed.LabelContainerGroup: "g", managed.LabelRun: "r"}
	if made, err = tkube.CoreV1().Pods(ns).Update(ctx, made, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("labelling the pod with the token: %v", err)
	}
	if signed, err := warmpool.SignRun(ctx, tkube, key, made); err != nil || !warmpool.VerifyRun(key, "g", signed, false) {
		t.Errorf("signing a run pod with the token: %v", err)
	}
	req := tkube.CoreV1().RESTClient().Post().Namespace(ns).Resource("pods").Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "worker", Command: []string{"echo", "ok"}, Stdout: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(tcfg, "GET", req.URL().String())
	if err != nil {
		t.Fatal(err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(tcfg, "POST", req.URL())
	if err != nil {
		t.Fatal(err)
	}
	for name, ex := range map[string]remotecommand.Executor{"WebSocket": ws, "SPDY": spdy} {
		var out bytes.Buffer
		if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out}); err != nil || out.String() != "ok\n" {
			t.Errorf("exec over %s with the token: %q, %v", name, out.String(), err)
		}
	}
	if _, err := tkube.CoreV1().Pods(ns).Patch(ctx, pod, "application/merge-patch+json",
		[]byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("patching a pod with the token: %v, want Forbidden", err)
	}
	if err := tkube.CoreV1().Pods(ns).Delete(ctx, pod, metav1.DeleteOptions{}); err != nil {
		t.Errorf("deleting the pod with the token: %v", err)
	}
}
