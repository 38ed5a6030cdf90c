package credential

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestVerifyRefusesOldClusters: a server older than OldestKubernetes is
// refused after /version, before any review is asked for; the oldest
// supported, newer ones and versions with vendor suffixes go on to the
// SelfSubjectReview.
func TestVerifyRefusesOldClusters(t *testing.T) {
	for _, tc := range []struct {
		version string
		refused bool
	}{
		{"v1.27.16", true},
		{"v1.29.15-eks-0123456", true},
		{"v1.30.0", false},
		{"v1.30.14", false},
		{"v1.32.4+k3s1", false},
		{"v1.37.2", false},
		{"v1.40.0", false},
		{"not-a-version", false},
	} {
		t.Run(tc.version, func(t *testing.T) {
			var reviews atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/version" {
					fmt.Fprintf(w, `{"major":"1","minor":"x","gitVersion":%q}`, tc.version)
					return
				}
				// Anything else (the SelfSubjectReview) is refused, so that
				// the test sees how far Verify went.
				reviews.Add(1)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusForbidden)
				fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}`)
			}))
			defer srv.Close()
			kube, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := Verify(context.Background(), kube, srv.URL, "default")
			var ce *CheckError
			if !errors.As(err, &ce) {
				t.Fatalf("Verify: %v, want a CheckError", err)
			}
			if rep.ServerVersion != tc.version {
				t.Errorf("ServerVersion %q, want %q", rep.ServerVersion, tc.version)
			}
			if tc.refused {
				if ce.Failure != FailureUnsupported || reviews.Load() != 0 {
					t.Fatalf("failure %v after %d reviews (%v), want FailureUnsupported before any", ce.Failure, reviews.Load(), err)
				}
				for _, want := range []string{tc.version, "older than " + OldestKubernetes, NewestKubernetes} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("%q does not say %q", err, want)
					}
				}
				return
			}
			if ce.Failure != FailureForbidden || reviews.Load() != 1 {
				t.Fatalf("failure %v after %d reviews (%v), want the review asked for and refused", ce.Failure, reviews.Load(), err)
			}
		})
	}
}
