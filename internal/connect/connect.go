// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

// Package connect turns a credential into clients of its cluster: the
// provider's own connection, a catalog credential's, or a Cluster API
// cluster's kubeconfig read from its parent's cluster. Clients are pooled
// per credential and content, so an edited or rotated credential gets new
// clients and an unchanged one is reused by every resource.
package connect

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/client-go/rest"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/credential"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
)

// ErrCycle: cluster_api parents lead back to the credential itself.
var ErrCycle = errors.New("cluster_api parents form a cycle")

// Resolver finds the clients of credentials.
type Resolver struct {
	pool *kubeclient.Pool
	// base returns the provider's own clients; store the catalog.
	base  func() (*kubeclient.Clients, error)
	store func() (*catalog.Store, error)
	// execPins maps the catalog credentials whose kubeconfig's exec plugin
	// the configuration allows to run on this host to the SHA-256 of the
	// exec blocks it allows (credential.Spec.ExecSHA256).
	execPins map[string]string
}

// New returns a resolver that pools clients in pool. execPins are the
// credentials the configuration allows to run their kubeconfig's exec
// plugin, with the digest of the exec blocks allowed (the provider's
// exec_plugin_credentials); a credential read from the catalog runs one
// only when named here with its digest and when it declares it.
func New(pool *kubeclient.Pool, base func() (*kubeclient.Clients, error), store func() (*catalog.Store, error), execPins map[string]string) *Resolver {
	return &Resolver{pool: pool, base: base, store: store, execPins: maps.Clone(execPins)}
}

// ExecPin returns the digest the configuration pins for the exec plugin of
// the catalog credential called name; false when it does not allow one.
func (r *Resolver) ExecPin(name string) (string, bool) {
	pin, ok := r.execPins[name]
	return pin, ok
}

// chainKey carries, in a context, the cluster_api credentials being
// resolved, so a parent cycle is an error instead of endless recursion.
type chainKey struct{}

// Named returns the clients of the catalog credential called name, or the
// provider's own when name is empty.
func (r *Resolver) Named(ctx context.Context, name string) (*kubeclient.Clients, error) {
	base, err := r.base()
	if err != nil || name == "" {
		return base, err
	}
	s, err := r.store()
	if err != nil {
		return nil, err
	}
	// A credential whose Secret was edited outside kubeplay is refused:
	// its kubeconfig, host or token may be anyone's.
	e, err := s.TrustedCredential(ctx, name)
	if err != nil {
		return nil, err
	}
	// The Secret's allow-exec-plugin is anyone's who can write it, and so is
	// its signature for whoever holds the catalog key: the configuration's
	// own opt-in must name the credential and pin its exec blocks.
	pin, optIn := r.execPins[name]
	if optIn && e.Value.Spec.AllowExecPlugin {
		if err := e.Value.Spec.CheckExecPin(pin); err != nil {
			return nil, err
		}
	}
	return r.spec(ctx, e.Value.Spec, e.Digest, base, optIn)
}

// Spec returns the clients of a credential written in this configuration
// and not stored yet, keyed by the content it is about to be stored with.
// Its kubeconfig comes from the configuration, not from cluster data, so
// its own allow_exec_plugin is the configuration's opt-in.
func (r *Resolver) Spec(ctx context.Context, spec credential.Spec) (*kubeclient.Clients, error) {
	base, err := r.base()
	if err != nil {
		return nil, err
	}
	return r.spec(ctx, spec, spec.Digest(), base, true)
}

func (r *Resolver) spec(ctx context.Context, spec credential.Spec, digest string, base *kubeclient.Clients, execOptIn bool) (*kubeclient.Clients, error) {
	switch spec.Kind {
	case credential.KindProvider:
		return base, nil
	case credential.KindClusterAPI:
		return r.clusterAPI(ctx, spec)
	}
	key := "credential/" + spec.Name + "/" + digest
	if execOptIn && spec.AllowExecPlugin {
		// Clients built with an exec plugin allowed are never handed to a
		// use that did not allow it.
		key += "/exec-allowed"
	}
	return r.pool.Get(key, func() (*rest.Config, error) {
		cfg, err := spec.RESTConfig(base.Config, execOptIn)
		if err == nil {
			kubeclient.Tune(cfg, base.Config.UserAgent)
		}
		return cfg, err
	})
}

// clusterAPI reads the kubeconfig of a cluster_api credential from its
// parent's cluster each time, so a rotated kubeconfig gets new clients.
func (r *Resolver) clusterAPI(ctx context.Context, spec credential.Spec) (*kubeclient.Clients, error) {
	chain, _ := ctx.Value(chainKey{}).([]string)
	if slices.Contains(chain, spec.Name) {
		return nil, fmt.Errorf("credential %q is its own ancestor (%s -> %s): %w",
			spec.Name, strings.Join(chain, " -> "), spec.Name, ErrCycle)
	}
	ctx = context.WithValue(ctx, chainKey{}, append(slices.Clone(chain), spec.Name))
	parent, err := r.Named(ctx, spec.Parent)
	if err != nil {
		return nil, fmt.Errorf("credential %q: its parent: %w", spec.Name, err)
	}
	kc, err := credential.ClusterAPIKubeconfig(ctx, parent.Kube, spec)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(kc)
	return r.pool.Get("credential/"+spec.Name+"/cluster-api/"+hex.EncodeToString(sum[:]), func() (*rest.Config, error) {
		cfg, err := credential.ClusterAPIRESTConfig(spec, kc)
		if err != nil {
			return nil, err
		}
		kubeclient.Tune(cfg, parent.Config.UserAgent)
		return cfg, nil
	})
}
