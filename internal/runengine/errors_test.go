// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var podsResource = schema.GroupResource{Resource: "pods"}

func TestClassify(t *testing.T) {
	dial := &url.Error{Op: "Post", URL: "https://h", Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}}
	tlsErr := &url.Error{Op: "Post", URL: "https://h", Err: x509.UnknownAuthorityError{}}
	for _, c := range []struct {
		name  string
		err   error
		want  Refusal
		cause bool
	}{
		{"quota", apierrors.NewForbidden(podsResource, "p", errors.New("exceeded quota: kubeplay-g")), RefusedQuota, false},
		{"forbidden", apierrors.NewForbidden(podsResource, "p", errors.New("not allowed")), RefusedOther, false},
		{"not found", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "runs"), RefusedNotFound, false},
		{"wrapped not found", fmt.Errorf("creating: %w", apierrors.NewNotFound(podsResource, "p")), RefusedNotFound, false},
		{"unauthorized", apierrors.NewUnauthorized("bad token"), RefusedUnauthorized, false},
		{"tls", tlsErr, RefusedTLS, true},
		{"unreachable", dial, RefusedUnreachable, true},
		{"invalid", apierrors.NewBadRequest("bad pod"), RefusedOther, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Classify(c.err, "runs", "https://h")
			if r.Reason != c.want {
				t.Errorf("reason %d, want %d", r.Reason, c.want)
			}
			if (r.Cause != nil) != c.cause {
				t.Errorf("cause %v", r.Cause)
			}
			if r.Namespace != "runs" || r.Host != "https://h" || !errors.Is(r, c.err) || r.Error() != c.err.Error() {
				t.Errorf("refusal %+v does not carry its error", r)
			}
		})
	}
}

func TestErrorMessages(t *testing.T) {
	inner := errors.New("boom")
	for _, c := range []struct {
		err  error
		want string
	}{
		{&CapacityError{Kind: "forks", Group: "g", N: 3, Limit: 5, Waited: time.Minute, Err: inner},
			`container group "g" had no room for 3 more forks within its pending timeout of 1m0s`},
		{&CapacityError{Kind: "runs", Group: "g", N: 1, Err: inner}, `claiming 1 runs in container group "g": boom`},
		{&ReleaseError{Kind: "runs", Group: "g", Err: inner}, `releasing the run's runs in container group "g": boom`},
		{&NamespaceError{Label: "l", Namespace: "l-1", Err: inner}, `creating run namespace l-1 of node label "l": boom`},
		{&NamespaceError{Deleting: true, Namespace: "l-1", Err: inner}, `deleting run namespace l-1: boom`},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
		if !errors.Is(c.err, inner) {
			t.Errorf("%T does not unwrap", c.err)
		}
	}
	u := unavailable{errors.New("container group \"g\": x")}
	if !errors.Is(u, ErrGroupUnavailable) || strings.Contains(u.Error(), ErrGroupUnavailable.Error()) {
		t.Errorf("unavailable: %v", u)
	}
}

func TestNewID(t *testing.T) {
	a, b := NewID(), NewID()
	if len(a) != 16 || a == b {
		t.Errorf("ids %q %q", a, b)
	}
}
