// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
)

// SliceID is the run id of slice k of run id: the slices' pods, claims
// and history records are told apart by it.
func SliceID(id string, k int) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s/slice/%d", id, k))
	return hex.EncodeToString(sum[:8])
}

// Slice is one slice's end: its Outcome once it started, or Err when it
// did not (Place's error).
type Slice struct {
	Index  int // from 1
	ID     string
	Placed int // the candidate it was placed in; -1 when none
	Outcome
	Err error
}

// Result is the slice's result: one that did not start ended in error.
func (s Slice) Result() runner.Result {
	if s.Err == nil {
		return s.Outcome.Result
	}
	reason := runner.ReasonOf(s.Err)
	var ce *CapacityError
	if errors.As(s.Err, &ce) {
		reason = runner.ReasonCapacityTimeout
	}
	now := time.Now().UTC()
	return runner.Result{Status: runner.StatusError, ExitCode: -1, Reason: reason, Message: s.Err.Error(), Err: s.Err,
		StartedAt: now, FinishedAt: now}
}

// hostsSeen is the host list's digest the first slice to end saw: the
// slices that start after it refuse a different one (ExpectHostsSHA256).
type hostsSeen struct {
	mu     sync.Mutex
	digest string
}

func (h *hostsSeen) get() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.digest
}

func (h *hostsSeen) saw(r runner.Result) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.digest == "" && r.HostList {
		h.digest = r.HostsSHA256
	}
}

// PlaceSlices runs req's bundle in n slices at once, each placed among
// cands on its own (Place) with an id of its own (SliceID) and its share of
// the output limit; each output line and event is prefixed with its slice.
// It gives each slice's end, in slice order.
func PlaceSlices(ctx context.Context, n int, req Request, cands []Candidate) []Slice {
	seen := &hostsSeen{}
	out := make([]Slice, n)
	var wg sync.WaitGroup
	for k := 1; k <= n; k++ {
		sreq := req
		sreq.ID = SliceID(req.ID, k)
		sreq.Bundle.Slice, sreq.Bundle.Slices, sreq.Bundle.ExpectHostsSHA256 = k, n, seen.get
		sreq.OutputLimit = runner.SliceOutputLimit(req.OutputLimit, n)
		prefix := fmt.Sprintf("[slice %d/%d] ", k, n)
		if req.OnLine != nil {
			sreq.OnLine = func(l string) { req.OnLine(prefix + l) }
		}
		if req.OnEvent != nil {
			sreq.OnEvent = func(e string) { req.OnEvent(prefix + e) }
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, placed, err := Place(ctx, sreq, cands)
			seen.saw(o.Result)
			out[k-1] = Slice{Index: k, ID: sreq.ID, Placed: placed, Outcome: o, Err: err}
		}()
	}
	wg.Wait()
	return out
}

// MergeSlices is the run's outcome from its slices' (runner.MergeSlices):
// the pod, targets and namespace of the first that started, and every
// slice's warnings.
func MergeSlices(ss []Slice) Outcome {
	var merged Outcome
	results := make([]runner.Result, len(ss))
	for i, s := range ss {
		results[i] = s.Result()
		if merged.Rendered == "" && s.Err == nil {
			merged.Rendered, merged.Targets, merged.Namespace = s.Rendered, s.Targets, s.Namespace
		}
		merged.Warnings = append(merged.Warnings, s.Warnings...)
	}
	merged.Result = runner.MergeSlices(results)
	return merged
}
