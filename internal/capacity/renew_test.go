// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package capacity

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

// ledgerWith returns a forks ledger of limit whose data is entries as given.
func ledgerWith(t *testing.T, limit int64, data map[string]string) (Ledger, *fake.Clientset) {
	t.Helper()
	ctx := context.Background()
	kube, _ := rvClientset() // updates conflict on a stale resourceVersion, as the API server's do
	led := Ledger{Kube: kube, Namespace: "runs", Group: "g"}
	if err := led.Ensure(ctx, limit); err != nil {
		t.Fatal(err)
	}
	cms := kube.CoreV1().ConfigMaps("runs")
	cm, err := cms.Get(ctx, LedgerName("g"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data = data
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return led, kube
}

func entries(t *testing.T, led Ledger) map[string]Entry {
	t.Helper()
	e, err := led.read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// mustWait: acquiring one fork does not succeed within a short wait.
func mustWait(t *testing.T, led Ledger, run string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if g, err := led.Acquire(ctx, run, 1, time.Minute); err == nil {
		t.Fatalf("%s got a fork (%+v) from a full ledger", run, g)
	}
}

// Entries that claim no forks, fewer than none, or no expiry hold nothing
// (issue #11: a claim of -5 forks let six runs through a limit of one), and
// the next write drops them.
func TestLedgerInvalidEntriesHoldNothing(t *testing.T) {
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	led, _ := ledgerWith(t, 1, map[string]string{
		"negative": `{"forks":-5,"expires":"` + future + `"}`,
		"zero":     `{"forks":0,"expires":"` + future + `"}`,
		"forever":  `{"forks":1}`,
		"overflow": `{"forks":1e30,"expires":"` + future + `"}`,
		"garbage":  `[]`,
	})
	g, err := led.Acquire(context.Background(), "r1", 1, time.Minute)
	if err != nil || g.Waited {
		t.Fatalf("grant %+v, %v; want the one fork at once", g, err)
	}
	if e := entries(t, led); len(e) != 1 || e["r1"].Forks != 1 {
		t.Errorf("entries after the grant: %+v, want r1 alone", e)
	}
	mustWait(t, led, "r2")
}

// Claims of more than the limit hold the whole ledger, and sums of huge
// claims do not overflow into room.
func TestLedgerHugeEntriesFillIt(t *testing.T) {
	future := time.Now().Add(time.Hour)
	for name, claims := range map[string][]int64{
		"over the limit":    {5},
		"max int64":         {math.MaxInt64},
		"overflowing sum":   {math.MaxInt64/2 + 1, math.MaxInt64/2 + 1, math.MaxInt64/2 + 1},
		"exactly the limit": {1, 2},
	} {
		t.Run(name, func(t *testing.T) {
			data := map[string]string{}
			for i, n := range claims {
				b, _ := json.Marshal(Entry{Forks: n, Expires: future})
				data[string(rune('a'+i))] = string(b)
			}
			led, _ := ledgerWith(t, 3, data)
			mustWait(t, led, "r")
		})
	}
	if n := used(map[string]Entry{"a": {Forks: 1, Expires: future}, "b": {Forks: 1, Expires: future}}, 3); n != 2 {
		t.Errorf("used = %d, want 2", n)
	}
}

func TestLedgerRenew(t *testing.T) {
	ctx := context.Background()
	past := time.Now().Add(-time.Minute)
	b, _ := json.Marshal(Entry{Forks: 1, Expires: past})
	led, _ := ledgerWith(t, 3, map[string]string{"dead": string(b)})
	if _, err := led.Acquire(ctx, "r1", 1, time.Second); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	lost, err := led.Renew(ctx, []string{"r1", "gone"}, time.Hour)
	if err != nil || len(lost) != 1 || lost[0] != "gone" {
		t.Fatalf("lost %v, %v; want [gone]", lost, err)
	}
	e := entries(t, led)
	if r1 := e["r1"]; r1.Forks != 1 || r1.Expires.Before(before.Add(59*time.Minute)) {
		t.Errorf("r1 after the renewal: %+v", r1)
	}
	if _, ok := e["gone"]; ok || len(e) != 1 {
		t.Errorf("entries %+v: a renewal must not take a claim that is gone", e)
	}
	other := Ledger{Kube: fake.NewClientset(), Namespace: "runs", Group: "g"}
	if _, err := other.Renew(ctx, []string{"r1"}, time.Hour); !errors.Is(err, ErrNoLedger) {
		t.Errorf("renewing without a ledger: %v", err)
	}
}

// A kept claim outlives its ttl; once it is no longer kept it expires, and
// a run waiting for it wakes then, without a change of the ledger.
func TestLedgerKeep(t *testing.T) {
	ctx := context.Background()
	led, _ := ledgerWith(t, 1, nil)
	// Renewals come every ttl/3; a ttl of 3 s tolerates the 2 s stalls a
	// 2-core machine running the whole suite gave a 600 ms one (CI).
	const ttl = 3 * time.Second
	if _, err := led.Acquire(ctx, "live", 1, ttl); err != nil {
		t.Fatal(err)
	}
	var errs atomic.Int32
	stop := led.Keep("live", ttl, func(error) { errs.Add(1) })
	time.Sleep(ttl + ttl/2) // unrenewed, the claim would have expired
	mustWait(t, led, "next")
	stop()
	stop() // twice is harmless
	left := time.Until(entries(t, led)["live"].Expires)
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	g, err := led.Acquire(wctx, "next", 1, time.Minute)
	waited := time.Since(start)
	if err != nil || !g.Waited || len(g.Reaped) != 1 {
		t.Fatalf("grant %+v, %v; want a wait, then the expired claim reaped", g, err)
	}
	if waited > left+time.Second {
		t.Errorf("waited %s for a claim that expired in %s: the wait does not end at the expiry", waited, left)
	}
	if errs.Load() != 0 {
		t.Errorf("%d renewal errors", errs.Load())
	}
}

// A kept claim that another process reaped is lost, reported once, and no
// longer renewed; a renewal that fails, tried again, is reported.
func TestLedgerKeepReportsLossAndFailure(t *testing.T) {
	saved := ledgerBackoff
	ledgerBackoff = wait.Backoff{Steps: 5, Duration: time.Millisecond}
	t.Cleanup(func() { ledgerBackoff = saved })
	led, kube := ledgerWith(t, 2, nil)
	var mu sync.Mutex
	var got []error
	onErr := func(err error) { mu.Lock(); got = append(got, err); mu.Unlock() }
	stop := led.Keep("never-taken", 150*time.Millisecond, onErr)
	defer stop()
	time.Sleep(400 * time.Millisecond)
	mu.Lock()
	if len(got) != 1 || !errors.Is(got[0], ErrClaimLost) {
		t.Errorf("errors %v, want one ErrClaimLost", got)
	}
	got = nil
	mu.Unlock()

	if _, err := led.Acquire(context.Background(), "r1", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	kube.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("etcd is away")
	})
	stop1 := led.Keep("r1", 150*time.Millisecond, onErr)
	defer stop1()
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(got) == 0 || errors.Is(got[0], ErrClaimLost) || !apierrors.IsServiceUnavailable(got[0]) {
		t.Errorf("errors %v, want the failed renewal", got)
	}
}

// The limit comes from the group's spec (Ledger.Limit), not from the
// ledger's annotation, which whoever may write the ConfigMap can raise.
func TestLedgerLimitFromSpec(t *testing.T) {
	led, kube := ledgerWith(t, 1, nil)
	cms := kube.CoreV1().ConfigMaps("runs")
	cm, err := cms.Get(context.Background(), LedgerName("g"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Annotations[AnnotationMaxForks] = "1000"
	if _, err := cms.Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	led.Limit = 1
	if _, err := led.Acquire(context.Background(), "r1", 2, time.Minute); err == nil || !strings.Contains(err.Error(), "allows at most 1") {
		t.Errorf("two forks under a spec limit of one: %v", err)
	}
	if _, err := led.Acquire(context.Background(), "r1", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	mustWait(t, led, "r2")
	// Without the spec's limit, a limit below one in the annotation is no limit.
	led.Limit = 0
	cm, _ = cms.Get(context.Background(), LedgerName("g"), metav1.GetOptions{})
	cm.Annotations[AnnotationMaxForks] = "-1"
	if _, err := cms.Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := led.Acquire(context.Background(), "r3", 1, time.Minute); err == nil || !strings.Contains(err.Error(), "no valid") {
		t.Errorf("a ledger limit of -1: %v", err)
	}
}

// A quota or ConfigMap of kubeplay's names that kubeplay did not make is
// not adopted, used or deleted.
func TestForeignQuotaAndLedgerLeftAlone(t *testing.T) {
	ctx := context.Background()
	theirs := metav1.ObjectMeta{Namespace: "runs", Labels: map[string]string{"team": "theirs"}}
	qm, lm := theirs, theirs
	qm.Name, lm.Name = QuotaName("g"), LedgerName("g")
	kube := fake.NewClientset(&corev1.ResourceQuota{ObjectMeta: qm}, &corev1.ConfigMap{ObjectMeta: lm,
		Data: map[string]string{"x": "theirs"}})
	var no *managed.NotOwnedError
	if err := ApplyQuota(ctx, kube, "g", "runs", Limits{MaxCores: "1"}, managed.Owner{}, false); !errors.As(err, &no) || no.Kind != "ResourceQuota" {
		t.Errorf("ApplyQuota over a foreign quota: %v", err)
	}
	led := Ledger{Kube: kube, Namespace: "runs", Group: "g", Limit: 5}
	if err := led.Ensure(ctx, 5); !errors.As(err, &no) || no.Name != LedgerName("g") {
		t.Errorf("Ensure over a foreign ConfigMap: %v", err)
	}
	if _, err := led.Acquire(ctx, "r1", 1, time.Minute); !errors.As(err, &no) {
		t.Errorf("Acquire from a foreign ConfigMap: %v", err)
	}
	if err := DeleteQuota(ctx, kube, "g", "runs", managed.Owner{}); err != nil {
		t.Errorf("DeleteQuota: %v", err)
	}
	if err := led.Delete(ctx); err != nil {
		t.Errorf("Delete: %v", err)
	}
	if _, err := kube.CoreV1().ResourceQuotas("runs").Get(ctx, QuotaName("g"), metav1.GetOptions{}); err != nil {
		t.Errorf("the foreign quota was deleted: %v", err)
	}
	if cm, err := kube.CoreV1().ConfigMaps("runs").Get(ctx, LedgerName("g"), metav1.GetOptions{}); err != nil || cm.Data["x"] != "theirs" {
		t.Errorf("the foreign ConfigMap was deleted or changed: %+v, %v", cm, err)
	}
}
