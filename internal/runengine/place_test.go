// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/capacity"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
)

// placeGroups makes groups a and b, one run slot each, on f's cluster, and
// returns their candidates and run-slot ledgers.
func placeGroups(t *testing.T, f *fakeCluster) ([]Candidate, []capacity.Ledger) {
	t.Helper()
	var cands []Candidate
	var leds []capacity.Ledger
	for _, name := range []string{"a", "b"} {
		g := testGroup()
		runs := int64(1)
		g.Name, g.MaxConcurrentRuns, g.PendingTimeout = name, &runs, 5*time.Second
		l := capacity.Ledger{Kube: f.kube, Namespace: g.Namespace, Group: name, Kind: capacity.Runs, Limit: 1}
		if err := l.Ensure(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		cands, leds = append(cands, Candidate{Engine: f.e, Group: g}), append(leds, l)
	}
	return cands, leds
}

// runsIn records the group of each run pod.
func runsIn(f *fakeCluster) *[]string {
	var groups []string
	f.e.run = func(_ context.Context, s runner.Spec) runner.Result {
		groups = append(groups, s.Pod.Labels[managed.LabelContainerGroup])
		return runner.Result{Status: runner.StatusSuccessful}
	}
	return &groups
}

func hold(t *testing.T, l capacity.Ledger, ttl time.Duration) {
	t.Helper()
	if ok, _, err := l.TryAcquire(t.Context(), "holder", 1, ttl); !ok || err != nil {
		t.Fatalf("holding %s: %v, %v", l.Group, ok, err)
	}
}

// A run whose first group is full runs in its second at once, and gives
// its claim back.
func TestPlaceFirstFull(t *testing.T) {
	f := newFake(t)
	cands, leds := placeGroups(t, f)
	hold(t, leds[0], time.Hour)
	ran := runsIn(f)
	var events []string
	req := request(cands[0].Group)
	req.OnEvent = func(e string) { events = append(events, e) }
	out, placed, err := Place(t.Context(), req, cands)
	if err != nil || placed != 1 || out.Status != runner.StatusSuccessful {
		t.Fatalf("placed %d, %+v, %v", placed, out, err)
	}
	if !slices.Equal(*ran, []string{"b"}) {
		t.Errorf("ran in %v, want b", *ran)
	}
	if slices.ContainsFunc(events, func(e string) bool { return strings.Contains(e, "waiting") }) {
		t.Errorf("the run waited with group b free: %v", events)
	}
	if c := claims(t, leds[0]); !slices.Equal(c, []string{"holder"}) {
		t.Errorf("group a's claims %v, want the holder's only", c)
	}
	if c := claims(t, leds[1]); len(c) != 0 {
		t.Errorf("group b's claims after the run: %v", c)
	}
}

// Priority orders the groups: lower first, ties in list order.
func TestPlacePriority(t *testing.T) {
	f := newFake(t)
	cands, _ := placeGroups(t, f)
	ran := runsIn(f)
	low := int64(-1)
	cands[1].Priority = &low
	if _, placed, err := Place(t.Context(), request(cands[0].Group), cands); err != nil || placed != 1 {
		t.Fatalf("placed %d, %v; want b, of the lower priority", placed, err)
	}
	cands[1].Priority = nil
	if _, placed, err := Place(t.Context(), request(cands[0].Group), cands); err != nil || placed != 0 {
		t.Fatalf("placed %d, %v; want a, first of equal priorities", placed, err)
	}
	if !slices.Equal(*ran, []string{"b", "a"}) {
		t.Errorf("ran in %v", *ran)
	}
	if got := Order([]Candidate{{Priority: &low}, {}, {Priority: &low}}); !slices.Equal(got, []int{0, 2, 1}) {
		t.Errorf("Order = %v", got)
	}
}

// With every group full the run waits, and runs in the group that frees
// (here b, whose holder's claim expires); none free within the longest
// pending timeout is a PlacementError naming them all.
func TestPlaceAllFull(t *testing.T) {
	f := newFake(t)
	cands, leds := placeGroups(t, f)
	hold(t, leds[0], time.Hour)
	// b frees when its hold expires. The time counts from before the hold, not from Place's
	// start, which a loaded machine may reach a good part of the hold later; 2 s leaves Place
	// time to start before it.
	const ttl = 2 * time.Second
	start := time.Now()
	hold(t, leds[1], ttl)
	ran := runsIn(f)
	var waits int
	req := request(cands[0].Group)
	req.OnEvent = func(e string) {
		if strings.Contains(e, `none of container groups "a", "b" has room`) {
			waits++
		}
	}
	_, placed, err := Place(t.Context(), req, cands)
	if err != nil || placed != 1 || !slices.Equal(*ran, []string{"b"}) {
		t.Fatalf("placed %d in %v, %v; want b", placed, *ran, err)
	}
	if d := time.Since(start); waits != 1 || d < ttl {
		t.Errorf("%d waiting events, ran after %s: the run did not wait once for b to free", waits, d)
	}
	hold(t, leds[1], time.Hour)
	for i := range cands {
		cands[i].Group.PendingTimeout = 300 * time.Millisecond
	}
	_, placed, err = Place(t.Context(), req, cands)
	var pe *PlacementError
	if placed != -1 || !errors.As(err, &pe) || !slices.Equal(pe.Groups, []string{"a", "b"}) {
		t.Fatalf("placed %d, %v; want a PlacementError", placed, err)
	}
}
