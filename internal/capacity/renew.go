// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package capacity

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
)

// ClaimTTL is how long a claim lasts unless its run renews it. A live run
// renews every ClaimTTL/3, so that two lost renewals in a row do not lose
// it; a run whose process was killed frees its claim within ClaimTTL. The
// clocks of the processes that share a ledger must agree to well within it.
const ClaimTTL = 30 * time.Second

// ErrClaimLost: a claim expired before its run renewed it, and another
// process removed it; the run goes on without it.
var ErrClaimLost = errors.New("the claim expired before it was renewed, and was reaped")

// Renew extends the claims of runs to expire ttl from now, in one write.
// It only extends: a claim that is gone (released, or expired and reaped)
// is not taken again, and is returned in lost. Expired entries of other
// runs go in the same write.
func (l Ledger) Renew(ctx context.Context, runs []string, ttl time.Duration) (lost []string, err error) {
	err = l.modify(ctx, func(entries map[string]Entry) (bool, error) {
		lost = lost[:0]
		now := time.Now()
		changed := len(reap(entries, now)) > 0
		for _, run := range runs {
			e, ok := entries[run]
			if !ok {
				lost = append(lost, run)
				continue
			}
			e.Expires = now.Add(ttl)
			entries[run] = e
			changed = true
		}
		return changed, nil
	})
	return lost, err
}

// Keep renews run's claim every ttl/3 until stop is called, which returns
// once no renewal of the claim is under way: the caller then releases it.
// Claims that one process keeps on one ledger through one client are
// renewed together, one write for them all. onErr (nil to ignore) receives
// a failed renewal, and ErrClaimLost when the claim is gone, after which it
// is no longer renewed.
func (l Ledger) Keep(run string, ttl time.Duration, onErr func(error)) (stop func()) {
	k := keeperFor(l)
	k.mu.Lock()
	k.runs[run] = keptClaim{ttl: ttl, onErr: onErr}
	if !k.running {
		k.running = true
		go k.loop()
	}
	k.mu.Unlock()
	k.wake()
	var once sync.Once
	return func() {
		once.Do(func() {
			k.renewing.Lock() // wait for a renewal under way
			defer k.renewing.Unlock()
			k.mu.Lock()
			delete(k.runs, run)
			k.mu.Unlock()
			k.wake()
		})
	}
}

type keptClaim struct {
	ttl   time.Duration
	onErr func(error)
}

// keeper renews the kept claims of one ledger.
type keeper struct {
	led      Ledger
	renewing sync.Mutex // held while a renewal is written
	mu       sync.Mutex
	runs     map[string]keptClaim
	running  bool
	changed  chan struct{}
}

var (
	keepersMu sync.Mutex
	keepers   = map[keeperKey]*keeper{}
)

type keeperKey struct {
	kube            kubernetes.Interface
	namespace, name string
}

func keeperFor(l Ledger) *keeper {
	keepersMu.Lock()
	defer keepersMu.Unlock()
	key := keeperKey{l.Kube, l.Namespace, l.name()}
	if keepers[key] == nil {
		keepers[key] = &keeper{led: l, runs: map[string]keptClaim{}, changed: make(chan struct{}, 1)}
	}
	return keepers[key]
}

func (k *keeper) wake() {
	select {
	case k.changed <- struct{}{}:
	default:
	}
}

// period is a third of the shortest ttl kept; zero when nothing is.
func (k *keeper) period() time.Duration {
	k.mu.Lock()
	defer k.mu.Unlock()
	var p time.Duration
	for _, c := range k.runs {
		if p == 0 || c.ttl < p {
			p = c.ttl
		}
	}
	if len(k.runs) == 0 {
		k.running = false // under mu: a Keep that comes now starts a new loop
	}
	return p / 3
}

// loop renews every period until no claim is kept: a claim is renewed at
// most a period after it was taken, whatever comes and goes meanwhile.
func (k *keeper) loop() {
	last := time.Now()
	for {
		p := k.period()
		if p <= 0 {
			return
		}
		t := time.NewTimer(time.Until(last.Add(p)))
		select {
		case <-t.C:
			last = time.Now()
			k.renew(p)
		case <-k.changed:
			t.Stop() // a claim came or went: the period may differ
		}
	}
}

func (k *keeper) renew(timeout time.Duration) {
	k.renewing.Lock()
	defer k.renewing.Unlock()
	k.mu.Lock()
	claims := maps.Clone(k.runs)
	k.mu.Unlock()
	if len(claims) == 0 {
		return
	}
	runs := slices.Sorted(maps.Keys(claims))
	ttl := claims[runs[0]].ttl
	for _, c := range claims {
		ttl = min(ttl, c.ttl)
	}
	// Each run renews to the shortest ttl kept: harmless, as all renew
	// at the shortest period.
	ctx, cancel := context.WithTimeout(context.Background(), max(timeout, 5*time.Second))
	defer cancel()
	lost, err := k.led.Renew(ctx, runs, ttl)
	if errors.Is(err, ErrNoLedger) {
		lost, err = runs, nil // the group went, and its claims with it
	}
	if err != nil {
		err = fmt.Errorf("renewing %s in container group %q: %w", k.led.unit(), k.led.Group, err)
		for _, c := range claims {
			report(c.onErr, err)
		}
		return
	}
	k.mu.Lock()
	for _, run := range lost {
		delete(k.runs, run)
	}
	k.mu.Unlock()
	for _, run := range lost {
		report(claims[run].onErr, fmt.Errorf("%s of run %s in container group %q: %w", k.led.unit(), run, k.led.Group, ErrClaimLost))
	}
}

func report(f func(error), err error) {
	if f != nil {
		f(err)
	}
}
