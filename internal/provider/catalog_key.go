// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalogkey"
)

// signingKey is the catalog's key (the provider's catalog_key, or the key
// Secret of the catalog namespace), which signs the warm pods and held
// nodes' pods kubeplay makes and verifies those it claims. The store's key
// source reads it once, so a claim of a warm pod costs no request for it.
func (d *providerData) signingKey(ctx context.Context) (*catalogkey.Key, error) {
	s, err := d.catalog()
	if err != nil {
		return nil, err
	}
	return s.Key(ctx)
}
