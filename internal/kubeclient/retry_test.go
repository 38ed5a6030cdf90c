// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package kubeclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
)

func TestRetryIdempotent(t *testing.T) {
	saved := TransientBackoff
	TransientBackoff.Duration = time.Millisecond
	t.Cleanup(func() { TransientBackoff = saved })
	lost := fmt.Errorf(`Patch "https://10.250.0.2:16443/api/v1/namespaces/x/configmaps/y": %w`, errors.New("http2: client connection lost"))
	cutShort := fmt.Errorf("unexpected error when reading response body. Please retry. Original error: %w", io.ErrUnexpectedEOF)
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "y", errors.New("no"))
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name      string
		ctx       context.Context
		errs      []error
		wantCalls int
		wantErr   error
	}{
		{"connection lost twice, then applied", context.Background(), []error{lost, lost, nil}, 3, nil},
		// A connection cut while the response came, as client-go reports it
		// (a proxy that cut the provider's connections, in CI).
		{"response cut short, then applied", context.Background(), []error{cutShort, nil}, 2, nil},
		// A request written into a connection the server had closed (the
		// soak: a run pod's create as the API server restarted).
		{"broken pipe, then applied", context.Background(), []error{&url.Error{Op: "Post", URL: "https://127.0.0.1:45311/api/v1/namespaces/n/pods",
			Err: &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}}, nil}, 2, nil},
		{"server overloaded, then applied", context.Background(), []error{apierrors.NewTooManyRequests("busy", 1), nil}, 2, nil},
		{"forbidden is final", context.Background(), []error{forbidden, nil}, 1, forbidden},
		{"five tries at most", context.Background(), []error{lost, lost, lost, lost, lost, nil}, 5, lost},
		{"not once the context is done", canceled, []error{lost, nil}, 1, lost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := RetryIdempotent(tc.ctx, func() error {
				calls++
				return tc.errs[calls-1]
			})
			if calls != tc.wantCalls || !errors.Is(err, tc.wantErr) && err != tc.wantErr {
				t.Errorf("%d calls, error %v; want %d calls, error %v", calls, err, tc.wantCalls, tc.wantErr)
			}
		})
	}
}

// TestRetryAgainEndsWithItsContext: a Retry waiting out a step returns as
// soon as its context ends, not after the step.
func TestRetryAgainEndsWithItsContext(t *testing.T) {
	r := NewRetry(wait.Backoff{Steps: 5, Duration: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	if r.Again(ctx, io.EOF) {
		t.Error("Again reported a retry after its context ended")
	}
	// Far below the step of a minute, and far above the context's 20 ms.
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("Again returned %s after its context ended, want at once", took)
	}
}

// TestRetryAgainIf: the caller's decision replaces Transient, and the steps
// still bound the attempts.
func TestRetryAgainIf(t *testing.T) {
	r := NewRetry(wait.Backoff{Steps: 3, Duration: time.Millisecond})
	if r.AgainIf(context.Background(), false) {
		t.Error("AgainIf(false) reported a retry")
	}
	tries := 1
	for r.AgainIf(context.Background(), true) {
		tries++
	}
	if tries != 3 {
		t.Errorf("%d attempts, want the backoff's 3 steps", tries)
	}
}
