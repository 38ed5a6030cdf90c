// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"sync"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalogkey"
)

// keyCache holds the catalog key once read, so that a run's claim of a
// warm pod costs no request for it.
type keyCache struct {
	mu  sync.Mutex
	key *catalogkey.Key
}

// catalogKey is the catalog's key, which signs the warm pods and held
// nodes' pods kubeplay makes and verifies those it claims. This is the one
// place the provider gets it.
func (d *providerData) catalogKey(ctx context.Context) (*catalogkey.Key, error) {
	c, err := d.clients()
	if err != nil {
		return nil, err
	}
	d.catalogKeys.mu.Lock()
	defer d.catalogKeys.mu.Unlock()
	if d.catalogKeys.key == nil {
		if d.catalogKeys.key, err = catalogkey.Load(ctx, c.Kube, d.catalogNamespace, true); err != nil {
			return nil, err
		}
	}
	return d.catalogKeys.key, nil
}
