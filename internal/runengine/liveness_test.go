// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/capacity"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
)

// A run's claims last claimTTL, not the run's timeout, and are renewed
// while it runs: a run that outlives many ttls keeps its slot, and gives it
// back at its end.
func TestRunRenewsShortClaims(t *testing.T) {
	f := newFake(t)
	// Long enough that a renewal, due every third of it, still comes in
	// time when the parallel suite keeps both CPUs busy (300 ms did not;
	// capacity's TestLedgerKeep saw a 600 ms ttl lapse in CI).
	f.e.claimTTL = 3 * time.Second
	runs, forks := f.ledger(capacity.Runs, 1), f.ledger(capacity.Forks, 5)
	var expiries []time.Duration
	var waitErr error
	f.e.run = func(ctx context.Context, _ runner.Spec) runner.Result {
		start := time.Now()
		for _, l := range []capacity.Ledger{runs, forks} {
			cm, err := l.Kube.CoreV1().ConfigMaps(l.Namespace).Get(ctx, l.ConfigMapName(), metav1.GetOptions{})
			if err != nil {
				t.Error(err)
				continue
			}
			expiries = append(expiries, expiresIn(t, cm.Data["r1-create"], start))
		}
		time.Sleep(2 * f.e.claimTTL) // unrenewed, the claims would have expired
		// Another run still finds the slot taken.
		wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		_, waitErr = runs.Acquire(wctx, "other", 1, time.Minute)
		return runner.Result{Status: runner.StatusSuccessful}
	}
	req := request(limitedGroup(5))
	req.Timeout = time.Hour
	out, err := f.e.Run(t.Context(), req)
	if err != nil || out.Status != runner.StatusSuccessful || len(out.Warnings) != 0 {
		t.Fatalf("outcome %+v, %v", out, err)
	}
	for _, d := range expiries {
		if d > f.e.claimTTL {
			t.Errorf("a claim expires in %s, want at most the claim ttl %s", d, f.e.claimTTL)
		}
	}
	if len(expiries) != 2 {
		t.Errorf("expiries %v, want one per ledger", expiries)
	}
	if waitErr == nil {
		t.Error("another run got the slot of a live run whose claim outlived its ttl: it was not renewed")
	}
	if c := append(claims(t, runs), claims(t, forks)...); !slices.Equal(c, []string(nil)) {
		t.Errorf("claims left after the run: %v", c)
	}
}

func expiresIn(t *testing.T, entry string, from time.Time) time.Duration {
	t.Helper()
	var e capacity.Entry
	if err := json.Unmarshal([]byte(entry), &e); err != nil {
		t.Fatalf("entry %q: %v", entry, err)
	}
	return e.Expires.Sub(from)
}
