package kubeclient

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
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
		{"PUT", "/api/v1/namespaces/ns/finalize", false, "PUT namespaces/finalize"},
		{"GET", "/api/v1/namespaces/a\nb/pods", false, "LIST pods ?"},
		{"GET /x\n1 GET", "/api/v1/pods", false, "? pods"},
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

// FuzzParseRequest: any method and path become one line of the request log
// (two or three tokens, no space, control character or line break), and a
// request for a named object never logs its name.
func FuzzParseRequest(f *testing.F) {
	f.Add("GET", "ns", "pods", "p", "exec", "", false)
	f.Add("DELETE", "kube-system", "configmaps", "kubeplay-ledger-x", "", "/apis/apps/v1/namespaces/n/deployments", true)
	f.Add("PO ST", "n\ns", "pods", "secret-name", "log", "/api/v1/namespaces/a%0Ab/pods/x y/exec", false)
	f.Add("GET", "", "namespaces", "ns", "status", "//api//v1//", false)
	f.Fuzz(func(t *testing.T, method, ns, resource, name, sub, raw string, watch bool) {
		line := func(r Request) string {
			s := r.String()
			if fields := strings.Fields(s); len(fields) < 2 || len(fields) > 3 || strings.Join(fields, " ") != s {
				t.Fatalf("%q is not one line of two or three tokens", s)
			}
			for _, c := range s {
				if c != ' ' && c != '?' && token(string(c)) == "?" {
					t.Fatalf("%q has %q", s, c)
				}
			}
			return s
		}
		line(ParseRequest(method, raw, watch))
		// A well-formed request of a named object: the name stays out.
		seg := func(s string) bool { return s != "" && !strings.Contains(s, "/") && token(s) == s }
		if !seg(ns) || !seg(resource) || !seg(name) || name == ns || name == resource || name == sub {
			return
		}
		path := "/api/v1/namespaces/" + ns + "/" + resource + "/" + name
		if seg(sub) {
			path += "/" + sub
		}
		r := ParseRequest(method, path, watch)
		if s := line(r); slices.Contains(strings.Split(r.Resource, "/"), name) || r.Namespace == name {
			t.Fatalf("%s %s logged as %q: the name is in it", method, path, s)
		}
		if r.Namespace != ns {
			t.Fatalf("%s: namespace %q, want %q", path, r.Namespace, ns)
		}
	})
}
