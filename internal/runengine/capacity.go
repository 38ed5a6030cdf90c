// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/capacity"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

// ledgerClaim is a claim a run holds, to give back when it ends.
type ledgerClaim struct {
	ledger capacity.Ledger
	key    string
	// stop ends the claim's renewal.
	stop func()
}

// claim takes a run slot (max_concurrent_runs) and the run's forks
// (max_forks) from the group's ledgers, each waiting, watching, up to the
// group's pending timeout. The claims last capacity.ClaimTTL and are
// renewed while the run lives, so that those of a killed process free
// within that time, not at the run's deadline. It returns the claims it
// holds, also on error, for release.
func (e *Engine) claim(ctx context.Context, req Request) ([]ledgerClaim, error) {
	var held []ledgerClaim
	for _, n := range e.needs(req) {
		if err := e.acquire(ctx, n.ledger, n.key, n.n, n.limit, req.Group.pending(), e.claimTTL); err != nil {
			return held, err
		}
		held = append(held, e.keep(n))
	}
	return held, nil
}

// need is what a run claims of one ledger of its group.
type need struct {
	ledger   capacity.Ledger
	key      string
	n, limit int64
}

// needs lists the ledgers req claims from: a run slot
// (max_concurrent_runs) and its forks (max_forks), when the group has them.
func (e *Engine) needs(req Request) []need {
	g := req.Group
	var out []need
	for _, c := range []struct {
		kind  string
		limit *int64
		n     int64
	}{
		{capacity.Runs, g.MaxConcurrentRuns, 1},
		{capacity.Forks, g.MaxForks, req.Forks},
	} {
		if c.limit == nil {
			continue
		}
		led := capacity.Ledger{Kube: e.clients.Kube, Namespace: g.Namespace, Group: g.Name, Kind: c.kind, Limit: *c.limit, Owner: managed.Owner{ID: g.OwnerID}}
		if req.OnEvent != nil {
			what := fmt.Sprintf("a run slot (max_concurrent_runs %d)", *c.limit)
			if c.kind == capacity.Forks {
				what = fmt.Sprintf("%d forks (max_forks %d)", c.n, *c.limit)
			}
			led.OnWait = func() {
				req.OnEvent(fmt.Sprintf("waiting for capacity: container group %q has no room for %s", g.Name, what))
			}
		}
		out = append(out, need{ledger: led, key: req.ID + "-" + req.Operation, n: c.n, limit: *c.limit})
	}
	return out
}

// keep starts renewing a claim taken of n.
func (e *Engine) keep(n need) ledgerClaim {
	return ledgerClaim{ledger: n.ledger, key: n.key, stop: n.ledger.Keep(n.key, e.claimTTL, func(err error) {
		e.log(slog.LevelWarn, "renewing a capacity claim failed", map[string]any{"kind": n.ledger.Kind, "run": n.key, "error": err.Error()})
	})}
}

// tryClaim is claim without waiting: the claims when every ledger of the
// group has room now; else none (those taken are given back) and what the
// ledger without room looked like, to wait on.
func (e *Engine) tryClaim(ctx context.Context, req Request) ([]ledgerClaim, *capacity.Seen, error) {
	var held []ledgerClaim
	for _, n := range e.needs(req) {
		ok, seen, err := n.ledger.TryAcquire(ctx, n.key, n.n, e.claimTTL)
		if err != nil || !ok {
			for _, w := range e.release(ctx, held, "") {
				e.log(slog.LevelWarn, "giving back a partial claim failed", map[string]any{"error": w.Error()})
			}
		}
		if err != nil {
			return nil, nil, &CapacityError{Kind: n.ledger.Kind, Group: n.ledger.Group, N: n.n, Limit: n.limit, Err: err}
		}
		if !ok {
			return nil, &seen, nil
		}
		held = append(held, e.keep(n))
	}
	return held, nil, nil
}

func (e *Engine) acquire(ctx context.Context, led capacity.Ledger, key string, n, limit int64, pending, ttl time.Duration) error {
	wait, cancel := context.WithTimeout(ctx, pending)
	defer cancel()
	grant, err := led.Acquire(wait, key, n, ttl)
	if err != nil {
		ce := &CapacityError{Kind: led.Kind, Group: led.Group, N: n, Limit: limit, Err: err}
		if wait.Err() != nil && ctx.Err() == nil {
			ce.Waited = pending
		}
		return ce
	}
	e.log(slog.LevelDebug, "capacity claimed", map[string]any{"kind": led.Kind, "n": n, "waited": grant.Waited, "conflicts": grant.Conflicts})
	return nil
}

// release gives the claims back, last first, with a context of its own so
// that a canceled or timed-out run still releases them.
func (e *Engine) release(ctx context.Context, claims []ledgerClaim, record string) []error {
	var errs []error
	// The record goes with one release: the runs ledger's, else the first.
	with := slices.IndexFunc(claims, func(c ledgerClaim) bool { return c.ledger.Kind == capacity.Runs })
	if with < 0 {
		with = 0
	}
	for i, c := range slices.Backward(claims) {
		c.stop()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		rec := ""
		if i == with {
			rec = record
		}
		if err := c.ledger.ReleaseRecording(rctx, c.key, rec); err != nil {
			errs = append(errs, &ReleaseError{Kind: c.ledger.Kind, Group: c.ledger.Group, Err: err})
		} else {
			e.log(slog.LevelDebug, "capacity released", map[string]any{"kind": c.ledger.Kind})
		}
		cancel()
	}
	return errs
}
