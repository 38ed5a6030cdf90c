package podexec_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/podexec"
)

// TestRunFallsBackToSPDY checks, against a fake apiserver that refuses every
// upgrade, that Run first asks for a WebSocket, then retries with SPDY, and
// reports the failure as an error naming the pod.
func TestRunFallsBackToSPDY(t *testing.T) {
	var (
		mu   sync.Mutex
		seen []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.Header.Get("Upgrade"))
		mu.Unlock()
		http.Error(w, "no upgrades here", http.StatusBadRequest)
	}))
	defer srv.Close()

	cfg := &rest.Config{Host: srv.URL}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	code, err := podexec.Run(ctx, cfg, client, "ns1", "pod1", "main", []string{"true"}, nil, io.Discard, nil)
	if err == nil || code != -1 || !strings.Contains(err.Error(), "ns1/pod1") {
		t.Fatalf("got code %d, err %v; want -1 and an error naming ns1/pod1", code, err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"GET websocket", "POST SPDY/3.1"}
	if strings.Join(seen, ", ") != strings.Join(want, ", ") {
		t.Errorf("requests %q, want %q", seen, want)
	}
}
