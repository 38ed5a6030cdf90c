// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"k8s.io/client-go/rest"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalogkey"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/connect"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runengine"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/tfinvocation"
)

// providerData is what Configure hands to every resource and data source:
// the provider's connection and the pool that shares clients per cluster.
type providerData struct {
	pool             *kubeclient.Pool
	restConfig       *rest.Config
	configUnknown    bool
	catalogNamespace string
	// catalogKey is the configured catalog key; nil for the key Secret.
	catalogKey []byte
	// previousKeys are previous_catalog_keys: they only recognise
	// kubeplay's pods signed before a rotation.
	previousKeys [][]byte
	version      string

	storeMu sync.Mutex
	store   *catalog.Store

	// What this plan walk plans for groups, labels and credentials; see plannedSet.
	plannedGroups       plannedSet[catalog.Group]
	plannedLabels       plannedSet[podspec.Label]
	changingCredentials plannedSet[struct{}]

	// Once per walk: a dry run per distinct run pod, an orphan sweep per group.
	dryRuns, sweeps runengine.Once

	connect *connect.Resolver

	// definitions holds the definitions readDefinition read, checked, by
	// type and name: a run's re-plan and create in one apply read its group
	// once. A write of this process's forgets them (writingDefinitions);
	// another process's write is seen by the next walk, as before.
	definitions sync.Map
	// definitionReads holds a lock per definition while it is read.
	definitionReads sync.Map

	// refreshed holds the ids of the runs this walk read (refreshed): only
	// their plans may check for drift.
	refreshed sync.Map
	// applying: this walk created, updated or deleted a kubeplay resource,
	// so it is an apply's, whose plans only reproduce what the plan showed.
	applying atomic.Bool

	// invocation is the Terraform command that started the provider, and
	// checks the provider's switches for plan-time checks (run_check_mode.go).
	invocation tfinvocation.Invocation
	checks     checkSwitches
	// warnedOff, warnedUnknown: their warnings once per provider process.
	warnedOff, warnedUnknown atomic.Bool
}

// markApplying records that this walk applies a change; d may be nil.
func (d *providerData) markApplying() {
	if d != nil {
		d.applying.Store(true)
	}
}

// writingDefinitions marks the walk as an apply's and forgets the definitions
// read (readDefinition) before a catalog write and, when the caller defers
// the function it returns, after it: a run applied after its group reads the
// group as written.
func (d *providerData) writingDefinitions() func() {
	if d == nil {
		return func() {}
	}
	d.markApplying()
	d.definitions.Clear()
	return d.definitions.Clear
}

// markRefreshed records that this walk refreshed run id.
func (d *providerData) markRefreshed(id string) { d.refreshed.Store(id, true) }

// wasRefreshed reports whether this walk refreshed run id: false in a plan
// with -refresh=false, and in the apply's plan of a change.
func (d *providerData) wasRefreshed(id string) bool {
	_, ok := d.refreshed.Load(id)
	return ok
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
	// partial: value holds what shapes run pods, but other fields, such as
	// a group's credential, are known only at apply.
	partial bool
}

// put stores a copy of v made through JSON, as the catalog stores it, so
// that what a run renders at plan equals what it reads back at apply.
func (s *plannedSet[T]) put(name string, v *T, changing bool) {
	s.store(name, v, planned[T]{changing: changing})
}

// putPartial is put for a value that is known only in part (planned.partial).
func (s *plannedSet[T]) putPartial(name string, v *T, changing bool) {
	s.store(name, v, planned[T]{changing: changing, partial: true})
}

func (s *plannedSet[T]) store(name string, v *T, p planned[T]) {
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
	p.value = cp
	s.m[name] = p
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
		keys, err := catalogkey.NewSource(c.Kube, d.catalogNamespace, d.catalogKey)
		if err == nil {
			keys, err = keys.WithPrevious(d.previousKeys)
		}
		if err != nil {
			return nil, fmt.Errorf("the provider's catalog_key: %w", err)
		}
		d.store = catalog.New(c.Kube, d.catalogNamespace, keys)
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
		if errors.Is(err, catalogkey.ErrRefused) {
			diags.AddError("Catalog Key Refused", err.Error()+".")
			return nil
		}
		diags.AddError("Catalog Namespace Unavailable", err.Error()+". The provider's identity needs to create or read "+
			"namespaces, and to read and create the Secret "+catalogkey.SecretName+" there unless the provider sets "+
			"catalog_key; or create the namespace first.")
		return nil
	}
	return s
}

// readDefinition reads a definition from the catalog for a run, a warm pool
// or a held node; nil when it does not exist. get must be a Trusted getter,
// such as (*catalog.Store).TrustedGroup, which refuses a definition changed
// outside kubeplay with a *catalog.Error that the diagnostics explain.
func readDefinition[T any](ctx context.Context, data *providerData, get catalogGetter[T], name string) (*T, error) {
	key := fmt.Sprintf("%T\x00%s", *new(T), name)
	// Runs re-planned together read their group once: the others wait.
	mu, _ := data.definitionReads.LoadOrStore(key, &sync.Mutex{})
	if mu, ok := mu.(*sync.Mutex); ok {
		mu.Lock()
		defer mu.Unlock()
	}
	if v, ok := data.definitions.Load(key); ok {
		cp := new(T)
		if b, ok := v.([]byte); ok && json.Unmarshal(b, cp) == nil {
			return cp, nil
		}
	}
	s, err := data.catalog()
	if err != nil {
		return nil, err
	}
	e, err := get(s, ctx, name)
	if errors.Is(err, catalog.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	// Kept as JSON, as the catalog keeps it: each reader gets a copy of its own.
	if b, err := json.Marshal(e.Value); err == nil {
		data.definitions.Store(key, b)
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
// names, or the provider's own when name is empty.
func (d *providerData) credentialClients(ctx context.Context, name string) (*kubeclient.Clients, error) {
	c, err := d.connect.Named(ctx, name)
	if errors.Is(err, catalog.ErrNotFound) {
		return nil, fmt.Errorf("%w; create it with a kubeplay_credential resource or check the name", err)
	}
	if remedy := refusalRemedy(err); remedy != "" {
		return nil, fmt.Errorf("%w. %s", err, remedy)
	}
	return c, err
}
