// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/credential"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
)

// providerData is what Configure hands to every resource and data source:
// the provider's connection and the pool that shares clients per cluster.
type providerData struct {
	pool             *kubeclient.Pool
	restConfig       *rest.Config
	configUnknown    bool
	catalogNamespace string
	version          string

	storeMu sync.Mutex
	store   *catalog.Store

	// What this plan walk plans for groups, labels and credentials; see plannedSet.
	plannedGroups       plannedSet[catalog.Group]
	plannedLabels       plannedSet[podspec.Label]
	changingCredentials plannedSet[struct{}]

	// Once per walk: a dry run per distinct run pod, an orphan sweep per group.
	dryRuns, sweeps onceSet
}

// onceSet runs a function once per key and gives every caller its result:
// 100 runs of one group in an apply need one dry run and one orphan sweep.
type onceSet struct {
	mu sync.Mutex
	m  map[string]*onceEntry
}

type onceEntry struct {
	once sync.Once
	err  error
}

func (s *onceSet) do(key string, f func() error) error {
	s.mu.Lock()
	if s.m == nil {
		s.m = map[string]*onceEntry{}
	}
	e, ok := s.m[key]
	if !ok {
		e = &onceEntry{}
		s.m[key] = e
	}
	s.mu.Unlock()
	e.once.Do(func() { e.err = f() })
	return e.err
}

// plannedSet records, during one plan walk, definitions as the plan leaves
// them. Terraform plans a run after the group and label it references and
// applies them before it, so a run renders its pod from these rather than
// from what the catalog holds now; otherwise a group changed in the same
// apply as a new run would make the run's final plan differ from its first.
// Configure makes a new providerData, so nothing outlives a walk.
type plannedSet[T any] struct {
	mu sync.Mutex
	m  map[string]planned[T]
}

type planned[T any] struct {
	value    *T   // nil: known only at apply
	changing bool // created or updated by this apply
}

// put stores a copy of v made through JSON, as the catalog stores it, so
// that what a run renders at plan equals what it reads back at apply.
func (s *plannedSet[T]) put(name string, v *T, changing bool) {
	var cp *T
	if v != nil {
		b, err := json.Marshal(v)
		cp = new(T)
		if err != nil || json.Unmarshal(b, cp) != nil {
			cp = nil
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]planned[T]{}
	}
	s.m[name] = planned[T]{value: cp, changing: changing}
}

func (s *plannedSet[T]) get(name string) (planned[T], bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.m[name]
	return p, ok
}

const providerPoolKey = "provider"

// clients returns the provider's own clients.
func (d *providerData) clients() (*kubeclient.Clients, error) {
	if d.configUnknown {
		return nil, errors.New("the provider configuration depends on values that are known only after apply; " +
			"apply the resources it depends on first (terraform apply -target), or configure it with known values")
	}
	if d.restConfig == nil {
		return nil, errors.New("the provider has no Kubernetes connection")
	}
	return d.pool.Get(providerPoolKey, func() (*rest.Config, error) { return d.restConfig, nil })
}

// catalog returns the store of the provider's catalog namespace.
func (d *providerData) catalog() (*catalog.Store, error) {
	c, err := d.clients()
	if err != nil {
		return nil, err
	}
	d.storeMu.Lock()
	defer d.storeMu.Unlock()
	if d.store == nil {
		d.store = catalog.New(c.Kube, d.catalogNamespace)
	}
	return d.store, nil
}

// catalogReader returns the catalog, or nil after adding a diagnostic that
// says why not.
func (d *providerData) catalogReader(diags *diag.Diagnostics) *catalog.Store {
	s, err := d.catalog()
	if err != nil {
		addConnectionUnavailable(diags, err)
		return nil
	}
	return s
}

// catalogWriter is catalogReader with the catalog namespace in place.
func (d *providerData) catalogWriter(ctx context.Context, diags *diag.Diagnostics) *catalog.Store {
	s := d.catalogReader(diags)
	if s == nil {
		return nil
	}
	if err := s.EnsureNamespace(ctx); err != nil {
		diags.AddError("Catalog Namespace Unavailable", err.Error()+". The provider's identity needs to create or read "+
			"namespaces, or create the namespace first.")
		return nil
	}
	return s
}

// readGroup reads a group from the catalog; nil when it does not exist.
func readGroup(ctx context.Context, data *providerData, name string) (*catalog.Group, error) {
	s, err := data.catalog()
	if err != nil {
		return nil, err
	}
	e, err := s.GetGroup(ctx, name)
	if errors.Is(err, catalog.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &e.Value, nil
}

// readLabel reads a node label from the catalog; nil when it does not exist.
func readLabel(ctx context.Context, data *providerData, name string) (*podspec.Label, error) {
	s, err := data.catalog()
	if err != nil {
		return nil, err
	}
	e, err := s.GetLabel(ctx, name)
	if errors.Is(err, catalog.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &e.Value, nil
}

// providerDataFrom converts the value Configure stored, reporting a
// misconfigured provider the way the framework's scaffolding does.
func providerDataFrom(v any, diags *diag.Diagnostics) *providerData {
	if v == nil {
		return nil // not configured yet (validation)
	}
	d, ok := v.(*providerData)
	if !ok {
		diags.AddError("Unexpected Provider Data",
			fmt.Sprintf("Expected *providerData, got %T. This is a bug in the provider; please report it.", v))
		return nil
	}
	return d
}

// credentialClients returns the clients of the cluster a kubeplay_credential
// names, or the provider's own when name is empty. Clients are cached per
// credential and content, so an edited credential gets new clients.
func (d *providerData) credentialClients(ctx context.Context, name string) (*kubeclient.Clients, error) {
	c, err := d.clients()
	if err != nil || name == "" {
		return c, err
	}
	s, err := d.catalog()
	if err != nil {
		return nil, err
	}
	e, err := s.GetCredential(ctx, name)
	if errors.Is(err, catalog.ErrNotFound) {
		return nil, fmt.Errorf("%w; create it with a kubeplay_credential resource or check the name", err)
	}
	if err != nil {
		return nil, err
	}
	spec := e.Value.Spec
	if spec.Kind == credential.KindClusterAPI {
		return d.clusterAPIClients(ctx, spec)
	}
	return d.specClients(spec, e.Digest, c)
}

// specClients returns the pooled clients of a credential whose stored data
// has the given digest; base is the provider's own clients.
func (d *providerData) specClients(spec credential.Spec, digest string, base *kubeclient.Clients) (*kubeclient.Clients, error) {
	if spec.Kind == credential.KindProvider {
		return base, nil
	}
	return d.pool.Get("credential/"+spec.Name+"/"+digest, func() (*rest.Config, error) {
		cfg, err := spec.RESTConfig(base.Config)
		if err == nil {
			kubeclient.Tune(cfg, base.Config.UserAgent)
		}
		return cfg, err
	})
}

// credentialChainKey carries, in a context, the cluster_api credentials being
// resolved, so a parent cycle is an error instead of endless recursion.
type credentialChainKey struct{}

// clusterAPIClients returns the clients of a cluster_api credential: its
// kubeconfig is read from the parent credential's cluster each time, so a
// rotated kubeconfig gets new clients.
func (d *providerData) clusterAPIClients(ctx context.Context, spec credential.Spec) (*kubeclient.Clients, error) {
	chain, _ := ctx.Value(credentialChainKey{}).([]string)
	if slices.Contains(chain, spec.Name) {
		return nil, fmt.Errorf("credential %q is its own ancestor (%s -> %s): cluster_api parents must not form a cycle",
			spec.Name, strings.Join(chain, " -> "), spec.Name)
	}
	ctx = context.WithValue(ctx, credentialChainKey{}, append(slices.Clone(chain), spec.Name))
	parent, err := d.credentialClients(ctx, spec.Parent)
	if err != nil {
		return nil, fmt.Errorf("credential %q: its parent: %w", spec.Name, err)
	}
	kc, err := credential.ClusterAPIKubeconfig(ctx, parent.Kube, spec)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(kc)
	return d.pool.Get("credential/"+spec.Name+"/cluster-api/"+hex.EncodeToString(sum[:]), func() (*rest.Config, error) {
		cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
		if err != nil {
			return nil, fmt.Errorf("credential %q: the kubeconfig in Secret %s/%s does not parse: %w",
				spec.Name, spec.ClusterNamespaceOrDefault(), spec.KubeconfigSecretName(), err)
		}
		kubeclient.Tune(cfg, parent.Config.UserAgent)
		return cfg, nil
	})
}
