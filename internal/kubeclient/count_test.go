package kubeclient

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

func TestParseRequest(t *testing.T) {
	for _, c := range []struct {
		method, path string
		watch        bool
		want         string
	}{
		{"GET", "/api/v1/namespaces/ns/pods/p", false, "GET pods ns"},
		{"GET", "/api/v1/namespaces/ns/pods", false, "LIST pods ns"},
		{"GET", "/api/v1/namespaces/ns/pods", true, "WATCH pods ns"},
		{"POST", "/api/v1/namespaces/ns/pods/p/exec", false, "POST pods/exec ns"},
		{"GET", "/api/v1/namespaces/ns/pods/p/log", false, "GET pods/log ns"},
		{"PUT", "/api/v1/namespaces/ns/configmaps/c", false, "PUT configmaps ns"},
		{"DELETE", "/api/v1/namespaces/ns/pods", false, "DELETECOLLECTION pods ns"},
		{"GET", "/api/v1/namespaces/ns", false, "GET namespaces"},
		{"GET", "/api/v1/namespaces", false, "LIST namespaces"},
		{"POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", false, "POST selfsubjectaccessreviews"},
		{"GET", "/apis/apps/v1/namespaces/ns/deployments/d/status", false, "GET deployments/status ns"},
		{"GET", "/apis", false, "GET discovery"},
		{"GET", "/api/v1", false, "GET discovery"},
		{"GET", "/version", false, "GET discovery"},
	} {
		if got := ParseRequest(c.method, c.path, c.watch).String(); got != c.want {
			t.Errorf("%s %s watch=%v: %q, want %q", c.method, c.path, c.watch, got, c.want)
		}
	}
}

// A tuned client appends each request to the file EnvRequestLog names,
// once even when its configuration is tuned twice, without query values.
func TestRequestLog(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p"}}`))
	}))
	defer srv.Close()
	logFile := filepath.Join(t.TempDir(), "requests")
	t.Setenv(EnvRequestLog, logFile)
	cfg := &rest.Config{Host: srv.URL}
	Tune(cfg, "test")
	cp := rest.CopyConfig(cfg)
	Tune(cp, "test")
	c, err := NewClients(cp)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kube.CoreV1().Pods("ns").Get(t.Context(), "p", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(b)), strconv.Itoa(os.Getpid())+" GET pods ns"; got != want {
		t.Fatalf("request log %q, want one line %q", got, want)
	}
}
