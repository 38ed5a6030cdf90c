// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package phase

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/jsonpath"
)

// Condition is a per-kind readiness rule: the JSONPath must yield Value.
type Condition struct {
	APIVersion string
	Kind       string
	JSONPath   string
	Value      string
}

// ParseJSONPath compiles a wait condition's path; both `{.status.phase}`
// and `.status.phase` are accepted.
func ParseJSONPath(p string) (*jsonpath.JSONPath, error) {
	if !strings.HasPrefix(strings.TrimSpace(p), "{") {
		p = "{" + p + "}"
	}
	j := jsonpath.New("wait").AllowMissingKeys(true)
	return j, j.Parse(p)
}

func (c Condition) matches(u *unstructured.Unstructured) bool {
	return u.GetKind() == c.Kind && u.GetAPIVersion() == c.APIVersion
}

// met evaluates the condition on u and returns the value found.
func (c Condition) met(u *unstructured.Unstructured) (bool, string) {
	j, err := ParseJSONPath(c.JSONPath)
	if err != nil {
		return false, err.Error()
	}
	var b bytes.Buffer
	if err := j.Execute(&b, u.Object); err != nil {
		return false, err.Error()
	}
	got := strings.TrimSpace(b.String())
	return got == c.Value, got
}

// readiness is the verdict on one live object.
type readiness struct {
	ready, failed bool
	msg           string
}

// evaluate applies kstatus and the kind's conditions. A failed kstatus
// status is final whatever the conditions say; when the kind has
// conditions they, not kstatus's Current, decide readiness.
func evaluate(u *unstructured.Unstructured, conds []Condition) readiness {
	res, err := status.Compute(u)
	if err != nil {
		return readiness{msg: "computing status: " + err.Error()}
	}
	if res.Status == status.FailedStatus {
		return readiness{failed: true, msg: res.Message}
	}
	var mine []Condition
	for _, c := range conds {
		if c.matches(u) {
			mine = append(mine, c)
		}
	}
	if len(mine) == 0 {
		return readiness{ready: res.Status == status.CurrentStatus, msg: fmt.Sprintf("%s: %s", res.Status, res.Message)}
	}
	for _, c := range mine {
		if ok, got := c.met(u); !ok {
			return readiness{msg: fmt.Sprintf("waiting for %s to be %q, it is %q", c.JSONPath, c.Value, got)}
		}
	}
	return readiness{ready: true}
}

// watchGroup is the refs of one resource in one namespace: one list and one
// watch cover them all.
type watchGroup struct {
	gvr   schema.GroupVersionResource
	ns    string
	names map[string]Ref
}

func (e *Engine) groups(refs []Ref) []*watchGroup {
	byKey := map[string]*watchGroup{}
	var out []*watchGroup
	for _, r := range refs {
		m, err := e.mapper.RESTMapping(r.GroupKind(), r.Version)
		if err != nil {
			continue // a kind that no longer exists has no objects
		}
		k := m.Resource.String() + "|" + r.Namespace
		g := byKey[k]
		if g == nil {
			g = &watchGroup{gvr: m.Resource, ns: r.Namespace, names: map[string]Ref{}}
			byKey[k] = g
			out = append(out, g)
		}
		g.names[r.Name] = r
	}
	return out
}

// tracker is the state of a wait across its watch groups.
type tracker struct {
	mu      sync.Mutex
	pending map[string]string // key -> last status message
	refs    map[string]Ref
}

func (t *tracker) set(r Ref, msg string) {
	t.mu.Lock()
	t.pending[r.Key()] = r.String() + ": " + msg
	if t.refs == nil {
		t.refs = map[string]Ref{}
	}
	t.refs[r.Key()] = r
	t.mu.Unlock()
}

func (t *tracker) done(r Ref) {
	t.mu.Lock()
	delete(t.pending, r.Key())
	t.mu.Unlock()
}

func (t *tracker) pendingRefs() []Ref {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Ref, 0, len(t.pending))
	for k := range t.pending {
		out = append(out, t.refs[k])
	}
	sortRefs(out)
	return out
}

// WaitError is a wait that ended before every object was ready (or gone):
// NotReady are the objects still pending, or the one that failed.
type WaitError struct {
	NotReady []Ref
	Err      error
}

func (e *WaitError) Error() string { return e.Err.Error() }

func (e *WaitError) Unwrap() error { return e.Err }

func (t *tracker) summary() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := make([]string, 0, len(t.pending))
	for _, m := range t.pending {
		l = append(l, m)
	}
	sort.Strings(l)
	return strings.Join(l, "; ")
}

// errFailed marks a wait ended by a resource that reached a failed status.
var errFailed = errors.New("kstatus Failed")

// WaitReady watches refs until each is Current by kstatus (or meets its
// kind's conditions). A resource that reaches Failed ends the wait at once
// with its message; the context's deadline ends it with the status of
// those still pending.
func (e *Engine) WaitReady(ctx context.Context, refs []Ref, conds []Condition) error {
	t := &tracker{pending: map[string]string{}}
	for _, r := range refs {
		t.set(r, "not seen yet")
	}
	return e.watchAll(ctx, refs, t, "ready", func(g *watchGroup, pending map[string]bool, ev watch.EventType, u *unstructured.Unstructured) error {
		r, ok := g.names[u.GetName()]
		if !ok || !pending[u.GetName()] {
			return nil
		}
		if ev == watch.Deleted {
			t.set(r, "deleted while waiting")
			return nil
		}
		v := evaluate(u, conds)
		switch {
		case v.failed:
			return &WaitError{NotReady: []Ref{r}, Err: fmt.Errorf("%s failed (%w): %s", r, errFailed, v.msg)}
		case v.ready:
			delete(pending, u.GetName())
			t.done(r)
		default:
			t.set(r, v.msg)
		}
		return nil
	})
}

// WaitGone watches refs until none exists.
func (e *Engine) WaitGone(ctx context.Context, refs []Ref) error {
	t := &tracker{pending: map[string]string{}}
	for _, r := range refs {
		t.set(r, "still exists")
	}
	return e.watchAll(ctx, refs, t, "deleted", func(g *watchGroup, pending map[string]bool, ev watch.EventType, u *unstructured.Unstructured) error {
		if r, ok := g.names[u.GetName()]; ok && ev == watch.Deleted {
			delete(pending, u.GetName())
			t.done(r)
		}
		return nil
	})
}

type onEvent func(g *watchGroup, pending map[string]bool, ev watch.EventType, u *unstructured.Unstructured) error

// watchAll runs one list-then-watch per group, selecting this phase's
// members by label; it relists when a watch ends early. gone-style waits
// count objects missing from a list as done.
func (e *Engine) watchAll(ctx context.Context, refs []Ref, t *tracker, what string, fn onEvent) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for _, g := range e.groups(refs) {
		wg.Add(1)
		go func(g *watchGroup) {
			defer wg.Done()
			if err := e.watchGroup(ctx, g, t, what, fn); err != nil {
				cancel(err)
			}
		}(g)
	}
	// Refs whose kind is gone are done.
	mapped := map[string]bool{}
	for _, g := range e.groups(refs) {
		for _, r := range g.names {
			mapped[r.Key()] = true
		}
	}
	for _, r := range refs {
		if !mapped[r.Key()] {
			t.done(r)
		}
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		if errors.Is(err, context.DeadlineExceeded) {
			return &WaitError{NotReady: t.pendingRefs(), Err: fmt.Errorf("timed out waiting for resources to be %s: %s", what, t.summary())}
		}
		return err
	}
	return nil
}

func (e *Engine) watchGroup(ctx context.Context, g *watchGroup, t *tracker, what string, fn onEvent) error {
	ri := e.dyn.Resource(g.gvr).Namespace(g.ns)
	sel := metav1.ListOptions{LabelSelector: LabelPartOf + "=" + e.Inv.ID}
	pending := map[string]bool{}
	for n := range g.names {
		pending[n] = true
	}
	for {
		l, err := ri.List(ctx, sel)
		if err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return fmt.Errorf("listing %s: %w", g.gvr.Resource, err)
		}
		if what == "deleted" {
			present := map[string]bool{}
			for _, u := range l.Items {
				present[u.GetName()] = true
			}
			for n := range pending {
				if !present[n] {
					delete(pending, n)
					t.done(g.names[n])
				}
			}
		} else {
			for i := range l.Items {
				if err := fn(g, pending, watch.Added, &l.Items[i]); err != nil {
					return err
				}
			}
		}
		if len(pending) == 0 {
			return nil
		}
		w, err := ri.Watch(ctx, metav1.ListOptions{LabelSelector: sel.LabelSelector, ResourceVersion: l.GetResourceVersion(), AllowWatchBookmarks: true})
		if err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return fmt.Errorf("watching %s: %w", g.gvr.Resource, err)
		}
		relist, err := e.drain(ctx, w, g, pending, fn)
		w.Stop()
		if err != nil || (!relist && len(pending) == 0) {
			return err
		}
	}
}

// drain handles events until the group is done, the watch ends (relist)
// or the context ends.
func (e *Engine) drain(ctx context.Context, w watch.Interface, g *watchGroup, pending map[string]bool, fn onEvent) (bool, error) {
	for {
		select {
		case <-ctx.Done():
			return false, context.Cause(ctx)
		case ev, ok := <-w.ResultChan():
			if !ok {
				return true, nil
			}
			switch ev.Type {
			case watch.Error:
				// Expired resource versions and the like: list again.
				return true, nil
			case watch.Bookmark:
				continue
			}
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			if err := fn(g, pending, ev.Type, u); err != nil {
				return false, err
			}
			if len(pending) == 0 {
				return false, nil
			}
		}
	}
}

// Delete deletes refs that still carry this phase's label, in waves (other
// objects, then CRDs, then namespaces), and waits until each wave is gone.
// Each kind and namespace is one delete-collection request by label when
// the whole group goes; otherwise, or when that is not allowed, one delete
// per object.
func (e *Engine) Delete(ctx context.Context, refs []Ref, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, wave := range DeleteOrder(refs) {
		e.mapper.Reset()
		for _, g := range e.groups(wave) {
			if err := e.deleteGroup(ctx, g); err != nil {
				return err
			}
		}
		if err := e.WaitGone(ctx, wave); err != nil {
			return err
		}
	}
	return nil
}

func (e *Engine) deleteGroup(ctx context.Context, g *watchGroup) error {
	ri := e.dyn.Resource(g.gvr).Namespace(g.ns)
	bg := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &bg}
	sel := LabelPartOf + "=" + e.Inv.ID
	l, err := e.meta.Resource(g.gvr).Namespace(g.ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("listing %s in %q: %w", g.gvr.Resource, g.ns, err)
	}
	whole := true
	for _, o := range l.Items {
		if _, ok := g.names[o.Name]; !ok {
			whole = false
		}
	}
	if whole && len(l.Items) > 1 {
		err := ri.DeleteCollection(ctx, opts, metav1.ListOptions{LabelSelector: sel})
		if err == nil {
			return nil
		}
		if !apierrors.IsForbidden(err) && !apierrors.IsMethodNotSupported(err) {
			return fmt.Errorf("deleting %s in %q: %w", g.gvr.Resource, g.ns, err)
		}
	}
	for _, o := range l.Items {
		r, ok := g.names[o.Name]
		if !ok {
			continue
		}
		err := ri.Delete(ctx, o.Name, opts)
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s: %w", r, err)
		}
	}
	return nil
}

// Destroy deletes every member the inventory or the state knows, waits
// until they are gone, then deletes the inventory.
func (e *Engine) Destroy(ctx context.Context, known []Ref, timeout time.Duration) error {
	recorded, _, err := e.Inv.Load(ctx)
	if err != nil {
		return err
	}
	if err := e.Delete(ctx, Union(recorded, known), timeout); err != nil {
		return err
	}
	return e.Inv.Delete(ctx)
}
