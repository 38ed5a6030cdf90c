// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runner

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner/runnertest"
)

// TestFinishDeletesOnlyThePodItRan: the run's pod went and another pod of
// its name took its place; the run's clean-up deletes with a UID
// precondition, which the API server refuses for the other pod. The fake
// clientset knows no preconditions, so a reactor does what the API server
// does with one.
func TestFinishDeletesOnlyThePodItRan(t *testing.T) {
	for _, async := range []bool{false, true} {
		other := testPod("p")
		other.UID = "uid-of-another"
		kube := runnertest.NewClientset(other)
		var preconditions []types.UID
		kube.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			da, ok := a.(k8stesting.DeleteAction)
			if !ok {
				return true, nil, errors.New("not a delete")
			}
			if pre := da.GetDeleteOptions().Preconditions; pre != nil && pre.UID != nil {
				preconditions = append(preconditions, *pre.UID)
				if *pre.UID != other.UID {
					return true, nil, apierrors.NewConflict(podsResource, "p", errors.New("Precondition failed: UID in precondition: "+
						string(*pre.UID)+", UID in object meta: "+string(other.UID)))
				}
			}
			return false, nil, nil
		})
		ran := testPod("p")
		ran.UID = "uid-of-the-run"
		r := &Runner{Kube: kube}
		res := r.finish(context.Background(), Spec{DeleteAsync: async}, Result{Status: StatusSuccessful}, ran, nil)
		if res.Status != StatusSuccessful || res.Message != "" {
			t.Errorf("async %v: result %s: %s; a pod gone before the clean-up is no error", async, res.Status, res.Message)
		}
		if len(preconditions) == 0 || preconditions[0] != ran.UID {
			t.Errorf("async %v: the delete carried UID preconditions %q, want %q", async, preconditions, ran.UID)
		}
		if _, err := kube.CoreV1().Pods("runs").Get(context.Background(), "p", metav1.GetOptions{}); err != nil {
			t.Errorf("async %v: the run's clean-up deleted another pod of its name: %v", async, err)
		}
	}
}

// TestRequestDeleteRetriesCutResponse: a connection cut while the DELETE's
// response comes (a proxy's cut, in CI's suite) reaches client-go's caller
// as "unexpected error when reading response body". The delete may have
// happened: it is sent again, and the pod found gone is success. A real
// client-go talks HTTP to a server on 127.0.0.1 that cuts the first reply.
func TestRequestDeleteRetriesCutResponse(t *testing.T) {
	var deletes atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodDelete {
			http.Error(w, "unexpected "+r.Method, http.StatusMethodNotAllowed)
			return
		}
		if deletes.Add(1) == 1 {
			// Headers and part of the body, then the connection goes.
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "1000")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p"`)
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"pods \"p\" not found"}`)
	}))
	t.Cleanup(srv.Close)
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if err := requestDelete(t.Context(), kube, "ns", "p", "uid-p"); err != nil {
		t.Fatalf("requestDelete after a cut response: %v", err)
	}
	if n := deletes.Load(); n != 2 {
		t.Errorf("the server saw %d DELETEs, want 2 (one cut, one that found the pod gone)", n)
	}
}
