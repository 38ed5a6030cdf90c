// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package clusterctl

import (
	"bytes"
	"context"
	"encoding/pem"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
)

// filesHolding lists the files under dir that contain secret.
func filesHolding(t *testing.T, dir string, secret []byte) []string {
	t.Helper()
	var found []string
	// Errors skip the entry: a file removed while walking holds nothing.
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, rerr := os.ReadFile(p); rerr == nil && bytes.Contains(b, secret) {
				found = append(found, p)
			}
		}
		return nil
	})
	return found
}

// TestOperationWritesNoToken: a clusterctl operation hands the
// credential's token to clusterctl without writing it to a file, so none
// can outlive the operation when Terraform or the provider is killed in
// the middle of it. The API server here answers every request with an
// error after looking, while the operation runs, for a file under the
// temporary directory that holds the token; the operation's context is
// canceled at the first request. The token must reach the server, and no
// file may hold it, during the operation or after; Idle, which the exit
// path waits for, is open only while the operation runs.
func TestOperationWritesNoToken(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	token := []byte("kubeplay-clusterctl-test-token-4e1d")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu        sync.Mutex
		sawToken  bool
		onDisk    []string
		firstSeen = make(chan struct{})
		once      sync.Once
	)
	// TLS: clientcmd sends a kubeconfig's credentials only over TLS.
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		found := filesHolding(t, tmp, token)
		mu.Lock()
		sawToken = sawToken || r.Header.Get("Authorization") == "Bearer "+string(token)
		onDisk = append(onDisk, found...)
		mu.Unlock()
		if sawToken {
			once.Do(func() { close(firstSeen) })
		}
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	c, err := kubeclient.NewClients(&rest.Config{Host: srv.URL, BearerToken: string(token),
		TLSClientConfig: rest.TLSClientConfig{CAData: ca}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- Move(ctx, c, c, "default") }()
	select {
	case <-firstSeen:
		select {
		case <-Idle():
			t.Error("Idle while an operation runs: a provider whose Terraform died would not wait for it")
		default:
		}
		cancel()
	case err := <-done:
		t.Fatalf("Move ended before any request reached the server: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no request reached the server in 30 s")
	}
	select {
	case err := <-done:
		if err == nil {
			t.Error("Move succeeded against a server that answers only errors")
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Move did not end within 60 s of its context's cancel")
	}
	select {
	case <-Idle():
	case <-time.After(5 * time.Second):
		t.Error("not Idle after the operation ended")
	}
	mu.Lock()
	defer mu.Unlock()
	if !sawToken {
		t.Error("the server never received the credential's token")
	}
	if len(onDisk) > 0 {
		t.Errorf("while the operation ran, files held the token (a kill would leave them): %v", onDisk)
	}
	if left := filesHolding(t, tmp, token); len(left) > 0 {
		t.Errorf("after the operation, files hold the token: %v", left)
	}
}
