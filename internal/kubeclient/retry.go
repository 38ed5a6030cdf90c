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
	"k8s.io/client-go/util/retry"
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

// idempotentBackoff spans about 15 s: an API server restart, or a stall of
// a loaded machine long enough to lose an HTTP/2 ping, is over by then.
var idempotentBackoff = wait.Backoff{Steps: 5, Duration: time.Second, Factor: 2, Jitter: 0.1}

// RetryIdempotent calls fn again while it fails with a Transient error,
// five times at most, and not once ctx is done. Only for requests whose
// repetition changes nothing, such as a server-side apply: a create or an
// update that the server may have carried out before the connection broke
// would be sent twice.
func RetryIdempotent(ctx context.Context, fn func() error) error {
	return retry.OnError(idempotentBackoff, func(err error) bool { return ctx.Err() == nil && Transient(err) }, fn)
}
