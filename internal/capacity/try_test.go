// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package capacity

import (
	"context"
	"testing"
	"time"
)

// TestTryAcquireWaitAnyAcc: TryAcquire takes a free slot at once and
// refuses a full one without waiting; WaitAny over two full ledgers, each
// watched with its own client as groups of two clusters would be, wakes
// when the second frees, not before, and the slot is then taken.
func TestTryAcquireWaitAnyAcc(t *testing.T) {
	cfg := accConfig(t)
	ctx := t.Context()
	kube := ownClient(t, cfg)
	ns := testNamespace(t, kube)
	a := Ledger{Kube: kube, Namespace: ns, Group: "a", Kind: Runs, Limit: 1}
	b := Ledger{Kube: ownClient(t, cfg), Namespace: ns, Group: "b", Kind: Runs, Limit: 1}
	for _, l := range []Ledger{a, b} {
		if err := l.Ensure(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if ok, _, err := l.TryAcquire(ctx, "holder", 1, time.Hour); !ok || err != nil {
			t.Fatalf("a free slot of %s was not taken: %v, %v", l.Group, ok, err)
		}
	}
	var seen []Seen
	for _, l := range []Ledger{a, b} {
		start := time.Now()
		ok, s, err := l.TryAcquire(ctx, "placed", 1, time.Hour)
		if ok || err != nil || s.Version == "" {
			t.Fatalf("a full slot of %s: taken %v, seen %+v, %v", l.Group, ok, s, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("TryAcquire took %s on a full ledger: it waited", d)
		}
		seen = append(seen, s)
	}
	freed := make(chan time.Time, 1)
	go func() {
		time.Sleep(time.Second) // the waiter must be seen to wait
		freed <- time.Now()
		if err := b.Release(context.WithoutCancel(ctx), "holder"); err != nil {
			t.Error(err)
		}
	}()
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := WaitAny(wctx, seen); err != nil {
		t.Fatal(err)
	}
	woke := time.Now()
	if at := <-freed; woke.Before(at) {
		t.Errorf("WaitAny woke %s before the slot freed", at.Sub(woke))
	}
	if ok, _, err := a.TryAcquire(ctx, "placed", 1, time.Hour); ok || err != nil {
		t.Errorf("the still-full ledger a: taken %v, %v", ok, err)
	}
	if ok, _, err := b.TryAcquire(ctx, "placed", 1, time.Hour); !ok || err != nil {
		t.Errorf("the freed ledger b: taken %v, %v", ok, err)
	}
}
