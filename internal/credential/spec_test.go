package credential

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

func TestSecretRoundTrip(t *testing.T) {
	spec := Spec{
		Name: "awx", Kind: KindBearerToken, Description: "d", Host: "https://h:6443", BearerToken: "tok",
		CACert: "ca", VerifySSL: false, Namespace: "runs", SecretVersion: "2", ExportKubeconfig: false,
	}
	rep := Report{ServerVersion: "v1.32.4", Username: "u", Groups: []string{"g1", "g2"}, Namespace: "runs", Missing: []string{"get pods"}}
	sec := spec.Secret("catalog", rep, time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC))
	if sec.Namespace != "catalog" || sec.Name != "awx" || sec.Labels[managed.LabelComponent] != managed.ComponentCredential {
		t.Fatalf("metadata: %+v", sec.ObjectMeta)
	}
	got, tampered, err := FromSecret(sec)
	if err != nil || tampered {
		t.Fatalf("FromSecret: tampered=%v err=%v", tampered, err)
	}
	if got != spec {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, spec)
	}
	r, at := ReportFromAnnotations(sec.Annotations)
	if at != "2026-11-22T00:00:00Z" || r.Username != "u" || len(r.Groups) != 2 || r.CanRun() {
		t.Fatalf("report round trip: %+v at %s", r, at)
	}

	sec.Data["token"] = []byte("edited")
	if _, tampered, _ := FromSecret(sec); !tampered {
		t.Fatal("an edited token must be reported as tampered")
	}
	delete(sec.Labels, managed.LabelComponent)
	var nc *ErrNotCredential
	if _, _, err := FromSecret(sec); !errors.As(err, &nc) {
		t.Fatalf("a Secret without the label is not a credential, got %v", err)
	}
}

func TestDigestIsStableAndUnambiguous(t *testing.T) {
	a := map[string][]byte{"k": []byte("ab"), "l": []byte("c")}
	b := map[string][]byte{"l": []byte("c"), "k": []byte("ab")}
	if Digest(a) != Digest(b) {
		t.Fatal("the digest must not depend on map order")
	}
	c := map[string][]byte{"k": []byte("a"), "l": []byte("bc")}
	if Digest(a) == Digest(c) {
		t.Fatal("moving bytes between values must change the digest")
	}
}

func TestRESTConfigByKind(t *testing.T) {
	cfg, err := Spec{Name: "b", Kind: KindBearerToken, Host: "https://h:1", BearerToken: "t", VerifySSL: false}.RESTConfig(nil, false)
	if err != nil || cfg.BearerToken != "t" || !cfg.Insecure {
		t.Fatalf("bearer_token: %+v %v", cfg, err)
	}
	kc := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://k:1"}}]
users: [{name: u, user: {token: kt}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
`
	cfg, err = Spec{Name: "k", Kind: KindKubeconfig, Kubeconfig: kc, Context: "x"}.RESTConfig(nil, false)
	if err != nil || cfg.Host != "https://k:1" || cfg.BearerToken != "kt" {
		t.Fatalf("kubeconfig: %+v %v", cfg, err)
	}
	if _, err := (Spec{Name: "p", Kind: KindProvider}).RESTConfig(nil, false); err == nil {
		t.Fatal("kind provider without a provider connection must fail")
	}
	if err := ValidateKubeconfig(kc, ""); err == nil {
		t.Fatal("a kubeconfig without current-context and no context must be refused")
	}
	if err := ValidateKubeconfig(kc, "x"); err != nil {
		t.Fatal(err)
	}
	if err := ValidateKubeconfig(": : :", ""); err == nil {
		t.Fatal("garbage must not parse")
	}
}

func TestClassify(t *testing.T) {
	gr := schema.GroupResource{Resource: "selfsubjectreviews"}
	tests := []struct {
		err  error
		want Failure
	}{
		{apierrors.NewUnauthorized("nope"), FailureUnauthorized},
		{apierrors.NewForbidden(gr, "", errors.New("no")), FailureForbidden},
		{&url.Error{Op: "Get", URL: "https://h", Err: x509.UnknownAuthorityError{}}, FailureTLS},
		{&url.Error{Op: "Get", URL: "https://h", Err: x509.HostnameError{Host: "h"}}, FailureTLS},
		{&url.Error{Op: "Get", URL: "https://h", Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}, FailureUnreachable},
		{fmt.Errorf("wrapped: %w", &net.DNSError{Name: "h", IsNotFound: true}), FailureUnreachable},
		{errors.New("something else"), FailureOther},
	}
	for _, tt := range tests {
		var ce *CheckError
		if !errors.As(Classify(tt.err, "https://h"), &ce) || ce.Failure != tt.want {
			t.Errorf("Classify(%v) = %+v, want failure %d", tt.err, ce, tt.want)
		}
	}
	if Classify(nil, "h") != nil {
		t.Error("Classify(nil) must be nil")
	}
}

func TestIsUnauthorized(t *testing.T) {
	unauthorized := Classify(apierrors.NewUnauthorized("no"), "https://h")
	forbidden := Classify(apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "p", errors.New("no")), "https://h")
	if !isUnauthorized(unauthorized) || !isUnauthorized(fmt.Errorf("wrapped: %w", unauthorized)) {
		t.Errorf("a 401 must be retried after provisioning: %v", unauthorized)
	}
	if isUnauthorized(forbidden) || isUnauthorized(errors.New("plain")) || isUnauthorized(nil) {
		t.Error("only a 401 may be retried")
	}
}
