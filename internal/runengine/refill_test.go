// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner/runnertest"
)

// Runs that claim warm pods while a refill of their pool is under way share
// one refill that lists the pool after their claims: two LISTs for six
// claims, and the pool is topped up for all of them.
func TestRefillsOfClaimsTogetherShareOne(t *testing.T) {
	kube := runnertest.NewClientset()
	var lists atomic.Int32
	// The first refill's LIST is held until the other claims have come:
	// a sleep let a loaded machine start that refill after them all (one
	// LIST for six, which proved nothing of the queue).
	listing, release := make(chan struct{}), make(chan struct{})
	kube.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if lists.Add(1) == 1 {
			close(listing)
			<-release
		}
		return false, nil, nil
	})
	e := New(&kubeclient.Clients{Config: &rest.Config{Host: "https://fake"}, Kube: kube}, Options{})
	tmpl, err := WarmTemplate(testGroup(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.Key = nodeKey
	ctx := context.Background()
	first := e.refill(ctx, tmpl, 1)
	select {
	case <-listing:
	case <-time.After(time.Minute):
		close(release)
		t.Fatal("the first refill did not list the pool within a minute")
	}
	var flags []*atomic.Bool
	for range 5 {
		flags = append(flags, e.refill(ctx, tmpl, 1))
	}
	close(release)
	deadline := time.Now().Add(time.Minute)
	for (!first.Load() || !flags[0].Load()) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if flags[0] == first {
		t.Error("a claim during the first refill's LIST joined that refill, which does not see its claim")
	}
	for i, f := range flags {
		if f != flags[0] {
			t.Errorf("claim %d got a refill of its own", i+2)
		}
	}
	if !first.Load() || !flags[0].Load() {
		t.Errorf("the refills did not top the pool up: %v, %v", first.Load(), flags[0].Load())
	}
	if n := lists.Load(); n != 2 {
		t.Errorf("six refills listed the pool %d times, want 2", n)
	}
}
