package kubeclient_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
)

// TestAccExecTokenRefresh proves that a provider client runs its exec plugin
// again when the token expires, instead of keeping the token of configure
// time: after expiry the same client authenticates with the new token.
func TestAccExecTokenRefresh(t *testing.T) {
	admin, kube := acctest.Clients(t)
	acctest.Parallel(t)
	ctx := context.Background()
	ns := fmt.Sprintf("kp-exec-%d", time.Now().UnixNano()%1_000_000)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	token := func(sa string) string {
		if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa,
			&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	first, second := token("first"), token("second")

	dir := t.TempDir()
	tokenFile, countFile := filepath.Join(dir, "token"), filepath.Join(dir, "count")
	if err := os.WriteFile(tokenFile, []byte(first), 0o600); err != nil {
		t.Fatal(err)
	}
	// The plugin hands out a token that "expires" in one second.
	plugin := filepath.Join(dir, "plugin")
	script := fmt.Sprintf(`#!/bin/sh
echo run >> %q
exp=$(date -u -d '+1 second' +%%Y-%%m-%%dT%%H:%%M:%%SZ)
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%%s","expirationTimestamp":"%%s"}}' "$(cat %q)" "$exp"
`, countFile, tokenFile)
	if err := os.WriteFile(plugin, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	s := kubeclient.Settings{
		Host:                 admin.Host,
		ClusterCACertificate: string(admin.CAData),
		Exec:                 &kubeclient.ExecSettings{APIVersion: "client.authentication.k8s.io/v1", Command: plugin},
	}
	cfg, _, err := s.RESTConfig(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubeclient.NewClients(cfg)
	if err != nil {
		t.Fatal(err)
	}
	whoami := func() string {
		r, err := c.Kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status.UserInfo.Username
	}
	if got := whoami(); got != "system:serviceaccount:"+ns+":first" {
		t.Fatalf("first identity %q", got)
	}
	// Rotate the token behind the plugin and let the first one expire.
	if err := os.WriteFile(tokenFile, []byte(second), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if got := whoami(); got != "system:serviceaccount:"+ns+":second" {
		t.Fatalf("after expiry the client still authenticates as %q: the exec token was frozen", got)
	}
	runs, _ := os.ReadFile(countFile)
	if n := strings.Count(string(runs), "run"); n < 2 {
		t.Fatalf("the plugin ran %d times, want at least 2", n)
	}
}
