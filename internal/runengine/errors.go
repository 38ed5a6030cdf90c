// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"errors"
	"fmt"
	"time"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/podsecurity"
)

// ErrGroupUnavailable marks a run whose pod cannot be rendered from its
// container group and node label.
var ErrGroupUnavailable = errors.New("the run's container group is unavailable")

// ErrRenderAtApply: the pod uses {run.id}, which is chosen at apply.
var ErrRenderAtApply = errors.New("the run's pod uses {run.id} and is rendered at apply")

// unavailable keeps err's message and makes it match ErrGroupUnavailable.
type unavailable struct{ err error }

func (e unavailable) Error() string   { return e.err.Error() }
func (e unavailable) Unwrap() []error { return []error{e.err, ErrGroupUnavailable} }

// PodSecurityError: the run's pod fails its group's pod security level.
// Label is empty when the group's own pod fails; else the node label whose
// composition made the pod fail. Err lists every failed check.
type PodSecurityError struct {
	Group, Label string
	Err          *podsecurity.ViolationError
}

func (e *PodSecurityError) Error() string {
	if e.Label == "" {
		return fmt.Sprintf("the pod of container group %q %v", e.Group, e.Err)
	}
	return fmt.Sprintf("the pod of container group %q with node label %q %v", e.Group, e.Label, e.Err)
}

func (e *PodSecurityError) Unwrap() error { return e.Err }

// CapacityError: a capacity ledger of the group gave the run no claim.
type CapacityError struct {
	// Kind is capacity.Runs or capacity.Forks.
	Kind  string
	Group string
	// N is what the run asked for; Limit is the group's limit.
	N, Limit int64
	// Waited is the pending timeout the run waited in vain; zero when the
	// claim failed for another reason (Err).
	Waited time.Duration
	Err    error
}

func (e *CapacityError) Error() string {
	if e.Waited > 0 {
		return fmt.Sprintf("container group %q had no room for %d more %s within its pending timeout of %s", e.Group, e.N, e.Kind, e.Waited)
	}
	return fmt.Sprintf("claiming %d %s in container group %q: %v", e.N, e.Kind, e.Group, e.Err)
}

func (e *CapacityError) Unwrap() error { return e.Err }

// ReleaseError: giving a claim back failed; it expires at the run's deadline.
type ReleaseError struct {
	Kind, Group string
	Err         error
}

func (e *ReleaseError) Error() string {
	return fmt.Sprintf("releasing the run's %s in container group %q: %v", e.Kind, e.Group, e.Err)
}

func (e *ReleaseError) Unwrap() error { return e.Err }

// NamespaceError: the run namespace of a namespace label could not be
// created (Deleting false) or deleted.
type NamespaceError struct {
	Deleting  bool
	Label     string
	Group     string
	Namespace string
	Err       error
}

func (e *NamespaceError) Error() string {
	if e.Deleting {
		return fmt.Sprintf("deleting run namespace %s: %v", e.Namespace, e.Err)
	}
	return fmt.Sprintf("creating run namespace %s of node label %q: %v", e.Namespace, e.Label, e.Err)
}

func (e *NamespaceError) Unwrap() error { return e.Err }

// Refusal says why the cluster refused a dry run of the run's pod.
type Refusal int

// The refusals RefusedError tells apart.
const (
	RefusedOther Refusal = iota
	// RefusedQuota: the group's ResourceQuota is full now.
	RefusedQuota
	// RefusedNotFound: the namespace (or something else named) is missing.
	RefusedNotFound
	// RefusedUnauthorized: the API server rejected the credential (401).
	RefusedUnauthorized
	// RefusedTLS: the API server's certificate did not verify.
	RefusedTLS
	// RefusedUnreachable: no connection to the API server.
	RefusedUnreachable
)

// RefusedError is a server-side dry run of the run's pod that failed.
type RefusedError struct {
	Reason Refusal
	// Namespace is the pod's; Host the API server's.
	Namespace, Host string
	// Cause is the connection failure for RefusedTLS and RefusedUnreachable.
	Cause error
	Err   error
}

func (e *RefusedError) Error() string { return e.Err.Error() }
func (e *RefusedError) Unwrap() error { return e.Err }
