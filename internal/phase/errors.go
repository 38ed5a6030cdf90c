// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package phase

import (
	"errors"
	"fmt"
	"strings"
)

// The engine's errors name objects and documents by their index in the
// bundle; the caller maps them to its own inputs and remedies.

// ParseError is a document that cannot be read: Doc is the index of the
// bundle element, Part the YAML document within it, from 1.
type ParseError struct {
	Doc, Part int
	Err       error
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("element %d, YAML document %d: %v", e.Doc, e.Part, e.Err)
}

func (e *ParseError) Unwrap() error { return e.Err }

// DuplicateError is an object written twice, in bundle elements First and Doc.
type DuplicateError struct {
	Ref        Ref
	Doc, First int
}

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("element %d: %s is also in element %d; each object may appear once in a phase", e.Doc, e.Ref, e.First)
}

// SecretError is a Secret in a bundle element whose content may show in
// plan output, element Doc, YAML document Part (from 1).
type SecretError struct {
	Doc, Part int
	Ref       Ref
}

func (e *SecretError) Error() string {
	return fmt.Sprintf("element %d, YAML document %d: %s is a Secret, and its data would show in plan output", e.Doc, e.Part, e.Ref)
}

// DocError is a failure of one document.
type DocError struct {
	Obj Object
	Err error
	// Unchecked marks a dry run that could not judge the document: its
	// kind, namespace or the cluster itself is not there yet.
	Unchecked bool
}

func (e *DocError) Error() string {
	return fmt.Sprintf("%s (element %d): %v", e.Obj.Ref, e.Obj.Doc, e.Err)
}

func (e *DocError) Unwrap() error { return e.Err }

// DocErrors returns the *DocError of err, a single error or a join, in
// order; the other errors come back as rest.
func DocErrors(err error) (docs []*DocError, rest []error) {
	if err == nil {
		return nil, nil
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		var de *DocError
		if errors.As(e, &de) {
			docs = append(docs, de)
		} else {
			rest = append(rest, e)
		}
	}
	return docs, rest
}

// OwnedError is an existing object that Policy does not let the phase take
// over. Owner is the phase that owns it ("" when none does), or OwnerID,
// the owning ApplySet's id, when no phase's inventory carries that id.
type OwnedError struct {
	Policy  Policy
	Owner   string
	OwnerID string
}

func (e *OwnedError) Error() string {
	switch {
	case e.Owner != "":
		return fmt.Sprintf("the object belongs to phase %q; policy %q never takes over another inventory's object", e.Owner, e.Policy)
	case e.OwnerID != "":
		return fmt.Sprintf("the object belongs to ApplySet %s; policy %q never takes over another inventory's object", e.OwnerID, e.Policy)
	default:
		return fmt.Sprintf("the object exists and no phase owns it; policy %q does not take it over", e.Policy)
	}
}

// ConflictError is a server-side apply refused because another field
// manager owns some of the fields; a forced apply takes them over.
type ConflictError struct{ Err error }

func (e *ConflictError) Error() string {
	return e.Err.Error() + "; another field manager owns these fields"
}

func (e *ConflictError) Unwrap() error { return e.Err }

// ErrFailed marks a wait ended by an object whose kstatus status is Failed.
var ErrFailed = errors.New("kstatus Failed")

// Pending is an object a wait left behind, with its last status.
type Pending struct {
	Ref    Ref
	Status string
}

// WaitError is a wait that ended before every object was ready (or gone):
// Failed is set when an object failed (it is then the only one listed),
// otherwise the deadline passed with NotReady still pending.
type WaitError struct {
	// Want is what the wait waited for: "ready" or "deleted".
	Want     string
	NotReady []Pending
	Failed   bool
}

func (e *WaitError) Error() string {
	if e.Failed && len(e.NotReady) == 1 {
		return fmt.Sprintf("%s failed (%v): %s", e.NotReady[0].Ref, ErrFailed, e.NotReady[0].Status)
	}
	l := make([]string, len(e.NotReady))
	for i, p := range e.NotReady {
		l[i] = p.Ref.String() + ": " + p.Status
	}
	return fmt.Sprintf("timed out waiting for resources to be %s: %s", e.Want, strings.Join(l, "; "))
}

// Is makes errors.Is(err, ErrFailed) true for a failed object.
func (e *WaitError) Is(target error) bool { return target == ErrFailed && e.Failed }

// Refs returns the objects the wait left behind.
func (e *WaitError) Refs() []Ref {
	out := make([]Ref, len(e.NotReady))
	for i, p := range e.NotReady {
		out[i] = p.Ref
	}
	return out
}
