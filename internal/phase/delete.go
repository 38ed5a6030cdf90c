// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package phase

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// group is the refs of one resource in one namespace: one list covers them.
type group struct {
	gvr   schema.GroupVersionResource
	ns    string
	names map[string]Ref
}

// groups groups refs by resource and namespace, at the version the cluster
// prefers. Refs of a kind the cluster no longer serves are left out: they
// have no objects.
func (e *Engine) groups(refs []Ref) ([]*group, error) {
	type key struct {
		gvr schema.GroupVersionResource
		ns  string
	}
	byKey := map[key]*group{}
	var out []*group
	for _, r := range refs {
		m, err := e.mapper.RESTMapping(r.GroupKind)
		if meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("mapping %s: %w", r, err)
		}
		k := key{m.Resource, r.Namespace}
		g := byKey[k]
		if g == nil {
			g = &group{gvr: m.Resource, ns: r.Namespace, names: map[string]Ref{}}
			byKey[k] = g
			out = append(out, g)
		}
		g.names[r.Name] = r
	}
	return out, nil
}

// selector selects the objects that carry this phase's membership label.
func (e *Engine) selector() metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: LabelPartOf + "=" + e.Inv.ID}
}

// listMembers returns the names in g that exist with this phase's label,
// listing metadata only.
func (e *Engine) listMembers(ctx context.Context, g *group) (map[string]bool, error) {
	l, err := e.meta.Resource(g.gvr).Namespace(g.ns).List(ctx, e.selector())
	if apierrors.IsNotFound(err) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s in %q: %w", g.gvr.Resource, g.ns, err)
	}
	live := make(map[string]bool, len(l.Items))
	for _, o := range l.Items {
		live[o.Name] = true
	}
	return live, nil
}

// Delete deletes refs that still carry this phase's label, in waves (other
// objects, then CRDs, then namespaces), and waits until each wave is gone.
// Each kind and namespace is one delete-collection request by label when
// the whole group goes; otherwise, or when that is not allowed, one delete
// per object. ctx's deadline bounds the deletion and the waits.
func (e *Engine) Delete(ctx context.Context, refs []Ref) error {
	for _, wave := range DeleteOrder(refs) {
		e.mapper.Reset()
		gs, err := e.groups(wave)
		if err != nil {
			return err
		}
		var deleted []Ref
		for _, g := range gs {
			d, err := e.deleteGroup(ctx, g)
			if err != nil {
				return err
			}
			deleted = append(deleted, d...)
		}
		if err := e.WaitGone(ctx, deleted); err != nil {
			return err
		}
	}
	return nil
}

// deleteGroup deletes the members of g that carry the label and returns them.
func (e *Engine) deleteGroup(ctx context.Context, g *group) ([]Ref, error) {
	live, err := e.listMembers(ctx, g)
	if err != nil {
		return nil, err
	}
	var doomed []Ref
	for name := range live {
		if r, ok := g.names[name]; ok {
			doomed = append(doomed, r)
		}
	}
	ri := e.dyn.Resource(g.gvr).Namespace(g.ns)
	bg := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &bg}
	if len(doomed) == len(live) && len(doomed) > 1 {
		err := ri.DeleteCollection(ctx, opts, e.selector())
		if err == nil {
			return doomed, nil
		}
		if !apierrors.IsForbidden(err) && !apierrors.IsMethodNotSupported(err) {
			return nil, fmt.Errorf("deleting %s in %q: %w", g.gvr.Resource, g.ns, err)
		}
	}
	for _, r := range doomed {
		if err := ri.Delete(ctx, r.Name, opts); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("deleting %s: %w", r, err)
		}
	}
	return doomed, nil
}

// Destroy deletes every member the inventory or the caller knows, waits
// until they are gone, then deletes the inventory. ctx's deadline bounds it:
// a destroy that passes it keeps the inventory, so the next one continues.
func (e *Engine) Destroy(ctx context.Context, known []Ref) error {
	recorded, _, err := e.Inv.Load(ctx)
	if err != nil {
		return err
	}
	if err := e.Delete(ctx, Union(recorded, known)); err != nil {
		return err
	}
	return e.Inv.Delete(ctx)
}
