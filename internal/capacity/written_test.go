// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package capacity

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// rvClientset is a fake clientset whose ConfigMap updates fail with a
// conflict on a stale resourceVersion, as the API server's do, and that
// records the verbs of the ledger's requests.
func rvClientset() (*fake.Clientset, *[]string) {
	kube := fake.NewClientset()
	var verbs []string
	rv := 0
	kube.PrependReactor("*", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		verbs = append(verbs, a.GetVerb())
		if a.GetVerb() != "create" && a.GetVerb() != "update" {
			return false, nil, nil
		}
		o, ok := a.(interface{ GetObject() runtime.Object })
		if !ok {
			return false, nil, nil
		}
		in, ok := o.GetObject().(*corev1.ConfigMap)
		if !ok {
			return false, nil, nil
		}
		cm := in.DeepCopy()
		if a.GetVerb() == "update" {
			cur, err := kube.Tracker().Get(a.GetResource(), a.GetNamespace(), cm.Name)
			if err != nil {
				return true, nil, err
			}
			if c, ok := cur.(*corev1.ConfigMap); !ok || c.ResourceVersion != cm.ResourceVersion {
				return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), cm.Name, errors.New("stale"))
			}
		}
		rv++
		cm.ResourceVersion = strconv.Itoa(rv)
		var err error
		if a.GetVerb() == "create" {
			err = kube.Tracker().Create(a.GetResource(), cm, a.GetNamespace())
		} else {
			err = kube.Tracker().Update(a.GetResource(), cm, a.GetNamespace())
		}
		return true, cm, err
	})
	return kube, &verbs
}

// A release after an uncontended acquire writes the ConfigMap the acquire
// wrote: one request. When another process wrote since, the write
// conflicts and the release reads again; another's claim is kept.
func TestLedgerReleaseStartsFromWritten(t *testing.T) {
	ctx := context.Background()
	kube, verbs := rvClientset()
	led := Ledger{Kube: kube, Namespace: "runs", Group: "written"}
	if err := led.Ensure(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := led.Acquire(ctx, "a", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	*verbs = nil
	if err := led.Release(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(*verbs, []string{"update"}) {
		t.Errorf("an uncontended release made %v, want one update", *verbs)
	}

	if _, err := led.Acquire(ctx, "a", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	// Another process claims.
	other := Ledger{Kube: kube, Namespace: "runs", Group: "written"}
	cm, _ := kube.CoreV1().ConfigMaps("runs").Get(ctx, led.ConfigMapName(), metav1.GetOptions{})
	cm.Data["b"] = `{"forks":1,"expires":"2999-01-01T00:00:00Z"}`
	if _, err := kube.CoreV1().ConfigMaps("runs").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	*verbs = nil
	if err := led.Release(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(*verbs, []string{"update", "get", "update"}) {
		t.Errorf("a release after another's write made %v, want a conflict, a read and an update", *verbs)
	}
	claims, err := other.Claims(ctx)
	if err != nil || len(claims) != 1 || claims["b"].Forks != 1 {
		t.Errorf("claims after the release: %v, %v; want b's alone", claims, err)
	}
}

// A remembered ConfigMap that lacks a claim (another goroutine's older
// answer) does not make a release or renewal skip it: that is decided on a
// fresh read, or the claim would stay until it expired.
func TestLedgerStaleWrittenNoSkip(t *testing.T) {
	ctx := context.Background()
	kube, _ := rvClientset()
	led := Ledger{Kube: kube, Namespace: "runs", Group: "stale"}
	if err := led.Ensure(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := led.Acquire(ctx, "a", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	stale := led.written()
	if _, err := led.Acquire(ctx, "c", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	led.remember(stale) // without c
	if lost, err := led.Renew(ctx, []string{"c"}, time.Minute); err != nil || len(lost) != 0 {
		t.Errorf("renewing c from a stale copy: lost %v, %v", lost, err)
	}
	led.remember(stale)
	if err := led.Release(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	claims, err := led.Claims(ctx)
	if _, ok := claims["c"]; ok || err != nil || len(claims) != 1 {
		t.Errorf("claims after releasing c from a stale copy: %v, %v; want a's alone", claims, err)
	}
}

// The acquires of one process's runs, one after another, each start from
// the ledger the last wrote: one update each. A stale copy costs a failed
// update and a read, and never a wait: a ledger that another process
// filled since is read before the run waits.
func TestLedgerAcquireStartsFromWritten(t *testing.T) {
	ctx := context.Background()
	kube, verbs := rvClientset()
	led := Ledger{Kube: kube, Namespace: "runs", Group: "acquire"}
	if err := led.Ensure(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := led.Acquire(ctx, "a", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	*verbs = nil
	if _, err := led.Acquire(ctx, "b", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(*verbs, []string{"update"}) {
		t.Errorf("a second acquire made %v, want one update", *verbs)
	}
	if err := led.Release(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	// The copy this process remembers has room (a is released); another
	// process has taken it since.
	cm, _ := kube.CoreV1().ConfigMaps("runs").Get(ctx, led.ConfigMapName(), metav1.GetOptions{})
	cm.Data["other"] = `{"forks":1,"expires":"2999-01-01T00:00:00Z"}`
	if _, err := kube.CoreV1().ConfigMaps("runs").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waited := false
	led.OnWait = func() { waited = true }
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	*verbs = nil
	if _, err := led.Acquire(wctx, "c", 1, time.Minute); err == nil {
		t.Fatal("c acquired a slot of a full ledger")
	}
	if !waited || !slices.Equal(*verbs, []string{"update", "get"}) {
		t.Errorf("acquiring from a stale copy made %v (waited %v): want a failed update, a read, then the wait", *verbs, waited)
	}
	claims, _ := led.Claims(ctx)
	if _, ok := claims["c"]; ok || len(claims) != 2 {
		t.Errorf("claims %v, want b's and the other's", claims)
	}
}

// TestLedgerWritesThroughCutConnections: the soak saw a release fail on a
// connection cut mid-write ("Releasing Capacity Failed ... EOF"), leaving the
// claim until the run's deadline, and an acquire fail the same way. A
// claim, release or renewal whose write broke is tried again from a fresh
// read, whether the write was lost or carried out; a refusal is final.
func TestLedgerWritesThroughCutConnections(t *testing.T) {
	saved := ledgerBackoff
	ledgerBackoff = wait.Backoff{Steps: 5, Duration: time.Millisecond}
	t.Cleanup(func() { ledgerBackoff = saved })
	ctx := context.Background()
	kube, _ := rvClientset()
	led := Ledger{Kube: kube, Namespace: "runs", Group: "cut"}
	if err := led.Ensure(ctx, 3); err != nil {
		t.Fatal(err)
	}
	// Each update takes the next of plan: "lost" (cut before the server
	// had it), "done" (carried out, then cut) or "forbidden".
	var plan []string
	kube.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if len(plan) == 0 {
			return false, nil, nil
		}
		how := plan[0]
		plan = plan[1:]
		ua, ok := a.(k8stesting.UpdateAction)
		if !ok {
			return true, nil, fmt.Errorf("got a %T", a)
		}
		switch how {
		case "forbidden":
			return true, nil, apierrors.NewForbidden(a.GetResource().GroupResource(), "", errors.New("no"))
		case "done":
			cm, ok := ua.GetObject().(*corev1.ConfigMap)
			if !ok {
				return true, nil, fmt.Errorf("updated a %T", ua.GetObject())
			}
			cm = cm.DeepCopy()
			cm.ResourceVersion = "cut-" + strconv.Itoa(len(plan)) + "-" + cm.ResourceVersion
			if err := kube.Tracker().Update(a.GetResource(), cm, a.GetNamespace()); err != nil {
				return true, nil, err
			}
		}
		return true, nil, io.ErrUnexpectedEOF
	})
	claims := func() []string {
		c, err := led.Claims(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Sorted(maps.Keys(c))
	}
	plan = []string{"lost"}
	if _, err := led.Acquire(ctx, "a", 1, time.Minute); err != nil || !slices.Equal(claims(), []string{"a"}) {
		t.Fatalf("acquire through a lost write: %v, claims %v", err, claims())
	}
	plan = []string{"done"}
	if _, err := led.Acquire(ctx, "b", 1, time.Minute); err != nil || !slices.Equal(claims(), []string{"a", "b"}) {
		t.Fatalf("acquire through a write carried out: %v, claims %v", err, claims())
	}
	plan = []string{"done"}
	if err := led.Release(ctx, "a"); err != nil || !slices.Equal(claims(), []string{"b"}) {
		t.Fatalf("release through a write carried out: %v, claims %v", err, claims())
	}
	plan = []string{"lost", "done"}
	if lost, err := led.Renew(ctx, []string{"b"}, time.Hour); err != nil || len(lost) != 0 {
		t.Fatalf("renewal through cut writes: lost %v, %v", lost, err)
	}
	plan = []string{"lost", "lost", "lost", "lost", "lost"}
	if err := led.Release(ctx, "b"); err == nil || !slices.Equal(claims(), []string{"b"}) {
		t.Errorf("a release whose five writes all broke: %v, claims %v; want the error, b kept", err, claims())
	}
	plan = []string{"forbidden", "done"}
	if err := led.Release(ctx, "b"); !apierrors.IsForbidden(err) || len(plan) != 1 {
		t.Errorf("a forbidden release: %v, %d planned writes left; want it final after one write", err, len(plan))
	}
}
