// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package kubeclient

import (
	"context"
	"errors"
	"io"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Transient reports errors after which the same request may well succeed:
// the connection was refused or broke (reset, EOF, a write into a closed
// one: "broken pipe", an HTTP/2 ping that got no answer: "client connection
// lost"), or the API server said it is
// overloaded, restarting or out of time. client-go retries these only for
// GET requests. A response cut short reaches here wrapped ("unexpected
// error when reading response body. Please retry."), which
// IsProbableEOF, comparing without errors.Is, does not see.
func Transient(err error) bool {
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		utilnet.IsHTTP2ConnectionLost(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err)
}

// TransientBackoff spans about 15 s: an API server restart, or a stall of
// a loaded machine long enough to lose an HTTP/2 ping, is over by then.
var TransientBackoff = wait.Backoff{Steps: 5, Duration: time.Second, Factor: 2, Jitter: 0.1}

// RetryIdempotent calls fn again while it fails with a Transient error,
// five times at most, and not once ctx is done. Only for requests whose
// repetition changes nothing, such as a server-side apply: a create or an
// update that the server may have carried out before the connection broke
// would be sent twice.
func RetryIdempotent(ctx context.Context, fn func() error) error {
	r := NewRetry(TransientBackoff)
	for {
		err := fn()
		if err == nil || !r.Again(ctx, err) {
			return err
		}
	}
}

// Retry paces a loop that sends its requests again after a Transient error;
// loops that decide afresh on each attempt (a write conditioned on the
// resourceVersion of a fresh read) use it where RetryIdempotent's one call
// does not fit.
type Retry struct{ b wait.Backoff }

// NewRetry returns a Retry at the first step of b.
func NewRetry(b wait.Backoff) *Retry { return &Retry{b: b} }

// Again waits out the next step after err and reports whether to try again:
// err is Transient, steps are left, and ctx did not end meanwhile.
func (r *Retry) Again(ctx context.Context, err error) bool {
	return r.AgainIf(ctx, Transient(err))
}

// AgainIf is Again for a loop that decides itself which errors to send
// again (a create resent only when nothing was made): it waits out the next
// step when retry is true, steps are left and ctx is not done.
func (r *Retry) AgainIf(ctx context.Context, retry bool) bool {
	if !retry || r.b.Steps <= 1 || ctx.Err() != nil {
		return false
	}
	t := time.NewTimer(r.b.Step())
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
