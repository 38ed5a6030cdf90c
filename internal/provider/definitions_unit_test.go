// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
)

// readDefinition reads a definition once per walk, runs that ask together
// included, gives each caller a copy of its own, and reads again after the
// walk writes a definition.
func TestReadDefinitionOncePerWalk(t *testing.T) {
	d := &providerData{pool: kubeclient.NewPool(), restConfig: &rest.Config{Host: "https://127.0.0.1:1"}, catalogNamespace: "c"}
	var reads atomic.Int32
	get := func(_ *catalog.Store, _ context.Context, name string) (catalog.Entry[catalog.Group], error) {
		reads.Add(1)
		time.Sleep(10 * time.Millisecond)
		if name == "missing" {
			return catalog.Entry[catalog.Group]{}, catalog.ErrNotFound
		}
		return catalog.Entry[catalog.Group]{Value: catalog.Group{Name: name, Namespace: "ns", Labels: map[string]string{"a": "1"}}}, nil
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if g, err := readDefinition(ctx, d, get, "g"); err != nil || g.Namespace != "ns" {
				t.Errorf("readDefinition = %+v, %v", g, err)
			}
		})
	}
	wg.Wait()
	if n := reads.Load(); n != 1 {
		t.Errorf("8 runs read the group %d times, want once", n)
	}
	g, _ := readDefinition(ctx, d, get, "g")
	g.Labels["a"] = "5"
	if again, _ := readDefinition(ctx, d, get, "g"); again.Labels["a"] != "1" || reads.Load() != 1 {
		t.Errorf("a caller's change reached the next caller (%v), or it read again (%d)", again.Labels, reads.Load())
	}
	// A definition that does not exist is read again: it may be created.
	for range 2 {
		if g, err := readDefinition(ctx, d, get, "missing"); g != nil || err != nil {
			t.Errorf("a missing group: %+v, %v", g, err)
		}
	}
	if n := reads.Load(); n != 3 {
		t.Errorf("%d reads, want the missing group read each time", n)
	}
	reads.Store(1)
	d.writingDefinitions()()
	if _, _ = readDefinition(ctx, d, get, "g"); reads.Load() != 2 {
		t.Errorf("after a catalog write: %d reads, want the group read again", reads.Load())
	}
}
