// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/capacity"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
)

// Candidate is a container group a run may be placed in, with an engine
// of the group's cluster: candidates may be on different clusters.
type Candidate struct {
	Engine *Engine
	Group  Group
	Label  *podspec.Label
	// Priority orders the candidates, lower first (Nodepool's pool
	// priority); nil counts as 0.
	Priority *int64
	// Planned is the group's target as the plan showed it; nil keeps the
	// request's.
	Planned *Target
}

// request is req for c.
func (c Candidate) request(req Request) Request {
	req.Group, req.Label = c.Group, c.Label
	if c.Planned != nil {
		req.Planned = c.Planned
	}
	return req
}

// Order returns the indexes of cands in the order placement tries them:
// by priority, lower first; candidates of equal priority keep their order.
func Order(cands []Candidate) []int {
	order := make([]int, len(cands))
	for i := range order {
		order[i] = i
	}
	prio := func(i int) int64 {
		if p := cands[i].Priority; p != nil {
			return *p
		}
		return 0
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(prio(a), prio(b)) })
	return order
}

// PlacementError: no candidate group had room for the run within the
// longest of their pending timeouts.
type PlacementError struct {
	Groups []string
	Waited time.Duration
	Err    error
}

func (e *PlacementError) Error() string {
	return fmt.Sprintf("none of container groups %s had room for the run within %s, the longest of their pending "+
		"timeouts", strings.Join(quoted(e.Groups), ", "), e.Waited)
}

func (e *PlacementError) Unwrap() error { return e.Err }

func quoted(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf("%q", n)
	}
	return out
}

// Place runs req in the first candidate, in Order, whose capacity ledgers
// have room for it when it starts; when none has, it watches all of their
// ledgers and takes the first to free, up to the longest of the groups'
// pending timeouts. It returns the index in cands of the group it ran in
// (-1 when the run did not start) and Run's outcome. One candidate is Run.
func Place(ctx context.Context, req Request, cands []Candidate) (out Outcome, placed int, err error) {
	switch len(cands) {
	case 0:
		return out, -1, unavailable{fmt.Errorf("the run names no container group")}
	case 1:
		out, err = cands[0].Engine.Run(ctx, cands[0].request(req))
		if err != nil {
			return out, -1, err
		}
		return out, 0, nil
	}
	active.Enter()
	defer active.Leave()
	ctx, cancel := context.WithTimeout(ctx, req.Timeout)
	defer cancel()
	tl := runner.NewTimeline(runner.StepQueued, time.Now())
	pods, outs := make([]*corev1.Pod, len(cands)), make([]Outcome, len(cands))
	order := Order(cands)
	for _, i := range order {
		if pods[i], err = cands[i].Engine.prepare(ctx, cands[i].request(req), &outs[i]); err != nil {
			return outs[i], -1, err
		}
	}
	placed, claims, err := placeClaims(ctx, req, cands, order)
	if err != nil {
		return outs[order[0]], -1, err
	}
	e := cands[placed].Engine
	defer func() { out.Warnings = append(out.Warnings, e.release(ctx, claims, recordOf(req.ID, out.Result))...) }()
	out, err = e.runClaimed(ctx, cands[placed].request(req), pods[placed], outs[placed], tl)
	out.Targets = nil
	for i := range outs {
		out.Targets = append(out.Targets, outs[i].Targets...)
	}
	return out, placed, err
}

// placeClaims takes the claims of the first candidate in order with room,
// waiting on every candidate's ledgers while none has.
func placeClaims(ctx context.Context, req Request, cands []Candidate, order []int) (int, []ledgerClaim, error) {
	var pending time.Duration
	names := make([]string, 0, len(cands))
	for _, i := range order {
		pending = max(pending, cands[i].Group.pending())
		names = append(names, cands[i].Group.Name)
	}
	wait, cancel := context.WithTimeout(ctx, pending)
	defer cancel()
	timedOut := func(err error) error {
		if wait.Err() != nil && ctx.Err() == nil {
			return &PlacementError{Groups: names, Waited: pending, Err: err}
		}
		return err
	}
	for waited := false; ; waited = true {
		var seen []capacity.Seen
		for _, i := range order {
			claims, s, err := cands[i].Engine.tryClaim(wait, cands[i].request(req))
			if err != nil {
				return -1, nil, timedOut(err)
			}
			if s == nil {
				return i, claims, nil
			}
			seen = append(seen, *s)
		}
		if !waited && req.OnEvent != nil {
			req.OnEvent(fmt.Sprintf("waiting for capacity: none of container groups %s has room for the run",
				strings.Join(quoted(names), ", ")))
		}
		if err := capacity.WaitAny(wait, seen); err != nil {
			return -1, nil, timedOut(err)
		}
	}
}
