// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package warmpool_test

import (
	"context"

	"k8s.io/client-go/kubernetes"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalogkey"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/warmpool"
)

var testKey = func() *catalogkey.Key {
	k, err := catalogkey.New([]byte("kubeplay-warmpool-test-key-of-32-bytes"))
	if err != nil {
		panic(err)
	}
	return k
}()

// keyed is t with the test key, whose refusals go to refused (when set).
func keyed(t warmpool.Template, refused func(*warmpool.RefusedError)) warmpool.Template {
	t.Key, t.OnRefused = testKey, refused
	return t
}

// count counts group g's warm pods in ns.
func count(ctx context.Context, kube kubernetes.Interface, ns string) (warmpool.Counts, error) {
	return warmpool.Count(ctx, kube, testKey, ns, "g")
}

// drain drains group g's warm pods in ns.
func drain(ctx context.Context, kube kubernetes.Interface, ns string) error {
	return warmpool.Drain(ctx, kube, testKey, ns, "g", nil)
}
