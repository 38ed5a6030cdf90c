// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package phase

import (
	"context"
	"errors"
)

// MemberIndex finds the member a document's ref became: a namespaced
// document without a namespace went to "default", a cluster-scoped one
// with a namespace lost it.
type MemberIndex struct {
	byKey  map[string]Ref
	byName map[string][]Ref
}

// NewMemberIndex indexes members.
func NewMemberIndex(members []Ref) MemberIndex {
	idx := MemberIndex{byKey: map[string]Ref{}, byName: map[string][]Ref{}}
	for _, m := range members {
		idx.byKey[m.Key()] = m
		k := unnamespaced(m)
		idx.byName[k] = append(idx.byName[k], m)
	}
	return idx
}

func unnamespaced(r Ref) string { return r.GroupKind.String() + "/" + r.Name }

// Find returns the member r became, if any.
func (idx MemberIndex) Find(r Ref) (Ref, bool) {
	if m, ok := idx.byKey[r.Key()]; ok {
		return m, true
	}
	for _, m := range idx.byName[unnamespaced(r)] {
		if m.Namespace == "" || r.Namespace == "" && m.Namespace == "default" {
			return m, true
		}
	}
	return Ref{}, false
}

// MergeFields merges the field digests of an apply with those known before:
// each member keeps the digest just applied, else the previous one.
func (r Result) MergeFields(previous map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range r.Members {
		if v, ok := r.Fields[m.Key()]; ok {
			out[m.Key()] = v
		} else if v, ok := previous[m.Key()]; ok {
			out[m.Key()] = v
		}
	}
	return out
}

// Outcome is one object of the bundle after an apply that failed.
type Outcome struct {
	Object
	// NotReady marks an object the wait left not ready (or failed).
	NotReady bool
}

// Outcomes lists the objects of objs that are members after an apply that
// ended with err, in document order, marking those err's wait left behind.
func Outcomes(objs []Object, members []Ref, err error) []Outcome {
	idx := NewMemberIndex(members)
	notReady := map[string]bool{}
	var we *WaitError
	if errors.As(err, &we) {
		for _, r := range we.Refs() {
			notReady[r.Key()] = true
		}
	}
	var out []Outcome
	for _, o := range objs {
		if m, ok := idx.Find(o.Ref); ok {
			out = append(out, Outcome{Object: o, NotReady: notReady[m.Key()]})
		}
	}
	return out
}

// Changed returns the objects that are new or whose digest differs from
// known, a digest by DocKey: those a plan-time dry run has to check.
func Changed(objs []Object, known map[string]string) []Object {
	var out []Object
	for _, o := range objs {
		if d, ok := known[o.DocKey()]; !ok || d != o.Digest {
			out = append(out, o)
		}
	}
	return out
}

// Observation is what Observe found of a phase's members.
type Observation struct {
	idx    MemberIndex
	live   map[string]Live
	fields map[string]string
}

// Observe looks up members; fields are the digests the last apply left,
// by Key, against which it tells drift.
func (e *Engine) Observe(ctx context.Context, members []Ref, fields map[string]string) (*Observation, error) {
	live, err := e.Inspect(ctx, members)
	if err != nil {
		return nil, err
	}
	return &Observation{idx: NewMemberIndex(members), live: live, fields: fields}, nil
}

// Check tells whether the object a document wrote (r) still exists as a
// member, and whether another writer changed fields the phase applied.
func (o *Observation) Check(r Ref) (exists, drifted bool) {
	m, ok := o.idx.Find(r)
	if !ok || !o.live[m.Key()].Exists {
		return false, false
	}
	want := o.fields[m.Key()]
	return true, want != "" && o.live[m.Key()].Fields != want
}

// Exists tells whether member m still exists.
func (o *Observation) Exists(m Ref) bool { return o.live[m.Key()].Exists }
