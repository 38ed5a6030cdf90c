package podexec_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/podexec"
)

func TestRunEmptyCommand(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1) }))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	code, err := podexec.Run(context.Background(), cfg, client, "ns1", "pod1", "main", nil, nil, io.Discard, nil)
	if code != -1 || err == nil || !strings.Contains(err.Error(), "ns1/pod1: empty command") {
		t.Fatalf("got %d, %v; want -1 and an error naming the pod", code, err)
	}
	if calls.Load() != 0 {
		t.Errorf("an empty command reached the API server (%d requests)", calls.Load())
	}
}

// TestRunContextEnds: a server that never answers; Run returns when its
// context ends, with an error that is the context's and names the pod.
func TestRunContextEnds(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	code, err := podexec.Run(ctx, cfg, client, "ns1", "pod1", "main", []string{"true"}, strings.NewReader("in"), io.Discard, io.Discard)
	if code != -1 || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "exec in pod ns1/pod1") {
		t.Fatalf("got %d, %v; want -1 and the context's error naming the pod", code, err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("Run took %s after its context ended", d)
	}
}
