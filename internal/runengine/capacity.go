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
	g := req.Group
	key := req.ID + "-" + req.Operation
	var held []ledgerClaim
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
		led := capacity.Ledger{Kube: e.clients.Kube, Namespace: g.Namespace, Group: g.Name, Kind: c.kind, Limit: *c.limit}
		if req.OnEvent != nil {
			what := fmt.Sprintf("a run slot (max_concurrent_runs %d)", *c.limit)
			if c.kind == capacity.Forks {
				what = fmt.Sprintf("%d forks (max_forks %d)", c.n, *c.limit)
			}
			led.OnWait = func() {
				req.OnEvent(fmt.Sprintf("waiting for capacity: container group %q has no room for %s", g.Name, what))
			}
		}
		if err := e.acquire(ctx, led, key, c.n, *c.limit, g.pending(), e.claimTTL); err != nil {
			return held, err
		}
		held = append(held, ledgerClaim{ledger: led, key: key, stop: led.Keep(key, e.claimTTL, func(err error) {
			e.log(slog.LevelWarn, "renewing a capacity claim failed", map[string]any{"kind": led.Kind, "run": key, "error": err.Error()})
		})})
	}
	return held, nil
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
func (e *Engine) release(ctx context.Context, claims []ledgerClaim) []error {
	var errs []error
	for _, c := range slices.Backward(claims) {
		c.stop()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		if err := c.ledger.Release(rctx, c.key); err != nil {
			errs = append(errs, &ReleaseError{Kind: c.ledger.Kind, Group: c.ledger.Group, Err: err})
		}
		cancel()
	}
	return errs
}
