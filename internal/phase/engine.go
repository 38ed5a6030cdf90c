// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package phase

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/fluxcd/cli-utils/pkg/object"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

// Policy says which existing objects a phase may take over, as airshipctl's
// inventory policies do.
type Policy string

// The inventory policies.
const (
	// PolicyStrict takes over no object that exists outside this phase.
	PolicyStrict Policy = "strict"
	// PolicyAdopt takes over objects no inventory owns.
	PolicyAdopt Policy = "adopt"
	// PolicyForceAdopt takes over any object, even another phase's.
	PolicyForceAdopt Policy = "force_adopt"
)

// Policies lists the policies in the order the docs give them.
var Policies = []string{string(PolicyStrict), string(PolicyAdopt), string(PolicyForceAdopt)}

// applyConcurrency is how many applies are in flight; the client's rate
// limiter, not this, bounds the request rate.
const applyConcurrency = 32

// Options are the KubernetesApply executor's settings.
type Options struct {
	Policy Policy
	Force  bool
	Prune  bool
	// Wait waits for every object to be ready. CRDs are waited for in any
	// case: their custom resources cannot be applied before.
	Wait       bool
	Conditions []Condition
}

// Engine applies, inspects and destroys one phase's objects in one cluster.
type Engine struct {
	dyn    dynamic.Interface
	meta   metadata.Interface
	mapper meta.ResettableRESTMapper
	Inv    *Inventory
}

// NewEngine returns the engine of phase in the cluster of c; its inventory
// lives in invNamespace there.
func NewEngine(c *kubeclient.Clients, phase, invNamespace string) (*Engine, error) {
	m, err := metadata.NewForConfig(c.Config)
	if err != nil {
		return nil, err
	}
	return newEngine(c.Dynamic, m, c.Mapper(), c.Kube, phase, invNamespace), nil
}

func newEngine(dyn dynamic.Interface, m metadata.Interface, mapper meta.ResettableRESTMapper, kube kubernetes.Interface, phase, invNamespace string) *Engine {
	return &Engine{dyn: dyn, meta: m, mapper: mapper, Inv: NewInventory(kube, phase, invNamespace)}
}

// Result is what an apply leaves: the members now recorded in the inventory
// (also after a failure) and the digest of the fields kubeplay owns in each
// applied object, by Key.
type Result struct {
	Members []Ref
	Fields  map[string]string
}

// resolve fills in the REST mapping of o, defaulting the namespace of a
// namespaced object to "default".
func (e *Engine) resolve(o *Object) (*meta.RESTMapping, error) {
	m, err := e.mapper.RESTMapping(o.GroupKind, o.Version)
	if err != nil {
		if meta.IsNoMatchError(err) {
			return nil, fmt.Errorf("the cluster has no kind %s in apiVersion %s; install its CustomResourceDefinition first, "+
				"or put it in this phase", o.GroupKind.Kind, o.APIVersion())
		}
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if o.Namespace == "" {
			o.Namespace = "default"
		}
	} else {
		o.Namespace = ""
	}
	return m, nil
}

func (e *Engine) resource(m *meta.RESTMapping, ns string) dynamic.ResourceInterface {
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return e.dyn.Resource(m.Resource).Namespace(ns)
	}
	return e.dyn.Resource(m.Resource)
}

// prepared is an object with its mapping, ready to apply.
type prepared struct {
	Object
	m *meta.RESTMapping
}

// Apply brings the cluster to objs: namespaces and CRDs first, then (once
// the CRDs are established) the rest; prune or abandon what left the set;
// wait for readiness. The inventory is written before each batch is applied
// and trimmed to what exists after a failure, so nothing applied is ever
// missing from it. previous are the members the caller recorded. ctx's
// deadline bounds the apply and its waits.
func (e *Engine) Apply(ctx context.Context, objs []Object, previous []Ref, opts Options) (Result, error) {
	res := Result{Fields: map[string]string{}}
	recorded, _, err := e.Inv.Load(ctx)
	if err != nil {
		return res, err
	}
	before := Union(recorded, previous)
	members := append([]Ref(nil), before...)
	res.Members = members
	owned := IDs(before).ToMap()
	first, rest := Split(objs)
	var applied, all []Ref
	for i, batch := range [][]Object{first, rest} {
		if len(batch) == 0 {
			continue
		}
		if i == 1 && len(first) > 0 {
			e.mapper.Reset()
		}
		ps, err := e.prepare(ctx, batch, crdKinds(first))
		if err != nil {
			return res, err
		}
		if err := e.checkOwnership(ctx, ps, owned, opts.Policy); err != nil {
			return res, err
		}
		batchRefs := make([]Ref, len(ps))
		for j, p := range ps {
			batchRefs[j] = p.Ref
		}
		all = append(all, batchRefs...)
		members = Union(members, batchRefs)
		if err := e.Inv.Store(ctx, members); err != nil {
			return res, err
		}
		ok, fields, applyErr := e.applyAll(ctx, ps, opts.Force)
		for k, v := range fields {
			res.Fields[k] = v
		}
		applied = append(applied, ok...)
		if applyErr != nil {
			// Keep what was there before and what was applied now.
			members = Union(before, applied)
			res.Members = members
			if err := e.Inv.Store(context.WithoutCancel(ctx), members); err != nil {
				return res, errors.Join(applyErr, err)
			}
			return res, applyErr
		}
		res.Members = members
		if i == 0 {
			if err := e.waitEstablished(ctx, ps); err != nil {
				return res, err
			}
		}
	}
	if opts.Wait {
		if err := e.WaitReady(ctx, all, opts.Conditions); err != nil {
			return res, err
		}
	}
	if err := e.release(ctx, Removed(members, all), opts); err != nil {
		return res, err
	}
	res.Members = all
	return res, e.Inv.Store(ctx, all)
}

// release deletes the objects that left the phase (prune) or abandons them.
func (e *Engine) release(ctx context.Context, gone []Ref, opts Options) error {
	switch {
	case len(gone) == 0:
		return nil
	case opts.Prune:
		return e.Delete(ctx, gone)
	default:
		return e.abandon(ctx, gone)
	}
}

// discoveryRetries bounds how often a kind that a CRD of this bundle defines
// is looked up again: discovery can lag a moment behind Established.
const discoveryRetries = 8

// prepare maps every object, naming each document that cannot be mapped.
func (e *Engine) prepare(ctx context.Context, batch []Object, defined map[schema.GroupKind]bool) ([]prepared, error) {
	ps := make([]prepared, len(batch))
	var errs []error
	for i, o := range batch {
		m, err := e.resolve(&o)
		for try := 1; err != nil && defined[o.GroupKind] && try <= discoveryRetries; try++ {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Duration(try) * 100 * time.Millisecond):
			}
			e.mapper.Reset()
			m, err = e.resolve(&o)
		}
		if err != nil {
			errs = append(errs, &DocError{Obj: o, Err: err})
		}
		ps[i] = prepared{Object: o, m: m}
	}
	return ps, errors.Join(errs...)
}

// crdKinds are the kinds the CRDs among objs define.
func crdKinds(objs []Object) map[schema.GroupKind]bool {
	out := map[schema.GroupKind]bool{}
	for _, o := range objs {
		if stage(o.GroupKind) == 1 {
			g, _, _ := unstructured.NestedString(o.U.Object, "spec", "group")
			k, _, _ := unstructured.NestedString(o.U.Object, "spec", "names", "kind")
			out[schema.GroupKind{Group: g, Kind: k}] = true
		}
	}
	return out
}

// checkOwnership refuses objects that exist and belong to another
// inventory (strict, adopt) or to none (strict). Objects this phase already
// owns are not looked up; the rest are listed per kind and namespace, with
// metadata only, instead of one GET each.
func (e *Engine) checkOwnership(ctx context.Context, ps []prepared, owned map[object.ObjMetadata]struct{}, policy Policy) error {
	if policy == PolicyForceAdopt {
		return nil
	}
	type key struct {
		gvr schema.GroupVersionResource
		ns  string
	}
	groups := map[key][]prepared{}
	for _, p := range ps {
		if _, ok := owned[p.ObjMetadata]; !ok {
			k := key{p.m.Resource, p.Namespace}
			groups[k] = append(groups[k], p)
		}
	}
	var errs []error
	for k, list := range groups {
		owners, err := e.owners(ctx, k.gvr, k.ns, list)
		if err != nil {
			return err
		}
		for _, p := range list {
			owner, exists := owners[p.Name]
			if !exists {
				continue
			}
			if err := e.refuse(ctx, owner, policy); err != nil {
				errs = append(errs, &DocError{Obj: p.Object, Err: err})
			}
		}
	}
	return errors.Join(errs...)
}

// owners returns the ApplySet that owns each object of list that exists,
// by name: one GET for a single object, one metadata list for more.
func (e *Engine) owners(ctx context.Context, gvr schema.GroupVersionResource, ns string, list []prepared) (map[string]string, error) {
	out := map[string]string{}
	ri := e.meta.Resource(gvr).Namespace(ns)
	if len(list) == 1 {
		o, err := ri.Get(ctx, list[0].Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("reading %s: %w", list[0].Ref, err)
		default:
			out[o.Name] = o.Labels[LabelPartOf]
		}
		return out, nil
	}
	l, err := ri.List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("listing %s in %q: %w", gvr.Resource, ns, err)
	default:
		for _, o := range l.Items {
			out[o.Name] = o.Labels[LabelPartOf]
		}
	}
	return out, nil
}

// refuse returns the *OwnedError of an existing object whose ApplySet is
// owner, or nil when policy lets this phase take it.
func (e *Engine) refuse(ctx context.Context, owner string, policy Policy) error {
	switch {
	case owner == e.Inv.ID, owner == "" && policy != PolicyStrict:
		return nil
	case owner == "":
		return &OwnedError{Policy: policy}
	}
	if ph := PhaseOf(ctx, e.Inv.kube, e.Inv.Namespace, owner); ph != "" {
		return &OwnedError{Policy: policy, Owner: ph}
	}
	return &OwnedError{Policy: policy, OwnerID: owner}
}

// applyAll server-side applies ps concurrently in document order. After the
// first failure no new apply starts; it returns the refs applied, their
// field digests, and every failure.
func (e *Engine) applyAll(ctx context.Context, ps []prepared, force bool) ([]Ref, map[string]string, error) {
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		applied []Ref
		errs    []error
		failed  bool
		fields  = map[string]string{}
		sem     = make(chan struct{}, applyConcurrency)
	)
	for _, p := range ps {
		mu.Lock()
		stop := failed
		mu.Unlock()
		if stop || ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func(p prepared) {
			defer func() { <-sem; wg.Done() }()
			out, err := e.applyOne(ctx, p, force, false)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = true
				if apierrors.IsConflict(err) {
					err = &ConflictError{Err: err}
				}
				errs = append(errs, &DocError{Obj: p.Object, Err: err})
				return
			}
			applied = append(applied, p.Ref)
			fields[p.Key()] = FieldsDigest(out)
		}(p)
	}
	wg.Wait()
	if err := ctx.Err(); err != nil && len(errs) == 0 {
		errs = append(errs, err)
	}
	sort.Slice(errs, func(i, j int) bool { return docIndex(errs[i]) < docIndex(errs[j]) })
	return applied, fields, errors.Join(errs...)
}

func docIndex(err error) int {
	var de *DocError
	if errors.As(err, &de) {
		return de.Obj.Doc
	}
	return -1
}

// applyOne sends one server-side apply with kubeplay's field manager; the
// object carries the ApplySet membership label. An apply is idempotent: it
// is sent again after a transient failure (kubeclient.RetryIdempotent).
func (e *Engine) applyOne(ctx context.Context, p prepared, force, dryRun bool) (*unstructured.Unstructured, error) {
	u := p.U.DeepCopy()
	u.SetNamespace(p.Namespace)
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelPartOf] = e.Inv.ID
	u.SetLabels(labels)
	opts := metav1.ApplyOptions{FieldManager: managed.FieldManager, Force: force}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	var out *unstructured.Unstructured
	err := kubeclient.RetryIdempotent(ctx, func() (err error) {
		out, err = e.resource(p.m, p.Namespace).Apply(ctx, p.Name, u, opts)
		return err
	})
	return out, err
}

// FieldsDigest summarizes the fields kubeplay's apply owns in u. Another
// writer that changes one of them takes it over, so the digest changes:
// that is how Read sees out-of-band edits without comparing values the
// server defaults or normalizes.
func FieldsDigest(u *unstructured.Unstructured) string { return fieldsDigest(u.GetManagedFields()) }

func fieldsDigest(entries []metav1.ManagedFieldsEntry) string {
	for _, f := range entries {
		if f.Manager == managed.FieldManager && f.Operation == metav1.ManagedFieldsOperationApply && f.Subresource == "" && f.FieldsV1 != nil {
			sum := sha256.Sum256(f.FieldsV1.GetRawBytes())
			return hex.EncodeToString(sum[:8])
		}
	}
	return ""
}

// waitEstablished waits until the CRDs and namespaces just applied are
// ready, so that custom resources map and namespaced objects find their
// namespace.
func (e *Engine) waitEstablished(ctx context.Context, ps []prepared) error {
	var refs []Ref
	for _, p := range ps {
		refs = append(refs, p.Ref)
	}
	return e.WaitReady(ctx, refs, nil)
}

// abandon takes objects out of the phase without deleting them: it drops
// the membership label, so no inventory claims them.
func (e *Engine) abandon(ctx context.Context, refs []Ref) error {
	patch := []byte(`{"metadata":{"labels":{"` + LabelPartOf + `":null}}}`)
	var errs []error
	for _, r := range refs {
		m, err := e.mapper.RESTMapping(r.GroupKind)
		if err != nil {
			continue // its kind is gone, so is the object
		}
		_, err = e.resource(m, r.Namespace).Patch(ctx, r.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("releasing %s from the phase: %w", r, err))
		}
	}
	return errors.Join(errs...)
}

// DryRun sends every object as a server-side dry-run apply and returns the
// refusals. Documents that cannot be judged yet (their kind or namespace is
// missing, perhaps made by this or an earlier phase, or the cluster cannot
// be reached) come back Unchecked.
func (e *Engine) DryRun(ctx context.Context, objs []Object, force bool) []*DocError {
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []*DocError
		sem  = make(chan struct{}, applyConcurrency)
	)
	add := func(de *DocError) {
		mu.Lock()
		errs = append(errs, de)
		mu.Unlock()
	}
	for _, o := range objs {
		m, err := e.resolve(&o)
		if err != nil {
			add(&DocError{Obj: o, Err: err, Unchecked: true})
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func(p prepared) {
			defer func() { <-sem; wg.Done() }()
			_, err := e.applyOne(ctx, p, force, true)
			switch {
			case err == nil:
			case isNamespaceNotFound(err, p.Namespace):
				add(&DocError{Obj: p.Object, Err: fmt.Errorf("namespace %q does not exist yet", p.Namespace), Unchecked: true})
			case !isAPIStatus(err):
				add(&DocError{Obj: p.Object, Err: err, Unchecked: true})
			default:
				add(&DocError{Obj: p.Object, Err: err})
			}
		}(prepared{Object: o, m: m})
	}
	wg.Wait()
	sort.Slice(errs, func(i, j int) bool { return errs[i].Obj.Doc < errs[j].Obj.Doc })
	return errs
}

func isNamespaceNotFound(err error, ns string) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) || !apierrors.IsNotFound(err) {
		return false
	}
	d := st.Status().Details
	return d != nil && d.Kind == "namespaces" && d.Name == ns
}

func isAPIStatus(err error) bool {
	var st apierrors.APIStatus
	return errors.As(err, &st)
}

// Live is what Inspect found of one member.
type Live struct {
	Exists bool
	// Fields is FieldsDigest of the live object.
	Fields string
}

// Inspect looks up members that still carry this phase's label, one
// metadata list per kind and namespace, by Key. A member whose kind no
// longer exists is missing.
func (e *Engine) Inspect(ctx context.Context, refs []Ref) (map[string]Live, error) {
	gs, err := e.groups(refs)
	if err != nil {
		return nil, err
	}
	out := map[string]Live{}
	for _, g := range gs {
		l, err := e.meta.Resource(g.gvr).Namespace(g.ns).List(ctx, e.selector())
		if err != nil {
			return nil, fmt.Errorf("listing %s in %q: %w", g.gvr.Resource, g.ns, err)
		}
		for _, o := range l.Items {
			if r, ok := g.names[o.Name]; ok {
				out[r.Key()] = Live{Exists: true, Fields: fieldsDigest(o.ManagedFields)}
			}
		}
	}
	return out, nil
}
