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

	// Readiness is kstatus's status watcher from github.com/fluxcd/cli-utils
	// rather than sigs.k8s.io/cli-utils: the fork is already the module
	// kstatus comes from, so the watcher adds no third cli-utils module.
	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/event"
	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/statusreaders"
	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/cli-utils/pkg/kstatus/watcher"
	"github.com/fluxcd/cli-utils/pkg/object"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

// statusFunc computes an object's status with kstatus, then lets the
// kind's conditions, when it has any, decide readiness instead of
// kstatus's Current. A Failed status is final whatever they say.
func statusFunc(conds []Condition) statusreaders.StatusFunc {
	return func(u *unstructured.Unstructured) (*status.Result, error) {
		res, err := status.Compute(u)
		if err != nil || res.Status == status.FailedStatus {
			return res, err
		}
		matched := false
		for _, c := range conds {
			if !c.matches(u) {
				continue
			}
			matched = true
			if ok, got := c.met(u); !ok {
				return &status.Result{Status: status.InProgressStatus,
					Message: fmt.Sprintf("waiting for %s to be %q, it is %q", c.JSONPath, c.Value, got)}, nil
			}
		}
		if matched {
			return &status.Result{Status: status.CurrentStatus, Message: "wait conditions met"}, nil
		}
		return res, nil
	}
}

// statusWatcher is kstatus's watcher over the engine's clients, one
// informer per kind and namespace (the least privilege). Status comes from
// each object alone, as status.Compute judges it, without reading the
// ReplicaSets and Pods a Deployment generates.
func (e *Engine) statusWatcher(conds []Condition) watcher.StatusWatcher {
	w := watcher.NewDefaultStatusWatcher(e.dyn, e.mapper)
	w.StatusReader = statusreaders.NewGenericStatusReader(e.mapper, statusFunc(conds))
	return w
}

const (
	wantReady   = "ready"
	wantDeleted = "deleted"
)

// waiter follows one wait: the objects still pending and their last status.
type waiter struct {
	want    string
	pending map[object.ObjMetadata]*Pending
	seen    map[object.ObjMetadata]bool
}

func newWaiter(want string, refs []Ref) *waiter {
	w := &waiter{want: want, pending: map[object.ObjMetadata]*Pending{}, seen: map[object.ObjMetadata]bool{}}
	initial := "not found"
	if want == wantDeleted {
		initial = "still exists"
	}
	for _, r := range refs {
		w.pending[r.ObjMetadata] = &Pending{Ref: r, Status: initial}
	}
	return w
}

func (w *waiter) done() bool { return len(w.pending) == 0 }

func (w *waiter) ids() object.ObjMetadataSet {
	ids := make(object.ObjMetadataSet, 0, len(w.pending))
	for id := range w.pending {
		ids = append(ids, id)
	}
	return ids
}

// observe records one status; an object that fails ends a ready wait.
func (w *waiter) observe(rs *event.ResourceStatus) error {
	p, ok := w.pending[rs.Identifier]
	if !ok {
		return nil
	}
	w.seen[rs.Identifier] = true
	switch {
	case w.want == wantDeleted && rs.Status == status.NotFoundStatus,
		w.want == wantReady && rs.Status == status.CurrentStatus:
		delete(w.pending, rs.Identifier)
	case w.want == wantReady && rs.Status == status.FailedStatus:
		return &WaitError{Want: w.want, Failed: true, NotReady: []Pending{{Ref: p.Ref, Status: rs.Message}}}
	case w.want == wantReady && rs.Status == status.NotFoundStatus:
		p.Status = "deleted while waiting"
	default:
		p.Status = describe(rs)
	}
	return nil
}

func describe(rs *event.ResourceStatus) string {
	s := rs.Status.String()
	if rs.Message != "" {
		s += ": " + rs.Message
	}
	if rs.Error != nil {
		s += " (" + rs.Error.Error() + ")"
	}
	return s
}

// timeout is the error of a wait whose deadline passed.
func (w *waiter) timeout() *WaitError {
	we := &WaitError{Want: w.want}
	for _, p := range w.pending {
		we.NotReady = append(we.NotReady, *p)
	}
	sort.Slice(we.NotReady, func(i, j int) bool { return we.NotReady[i].Ref.Key() < we.NotReady[j].Ref.Key() })
	return we
}

// WaitReady watches refs until each is Current by kstatus (or meets its
// kind's conditions). An object that reaches Failed ends the wait at once
// with its message; the context's deadline ends it with a *WaitError
// naming those still pending and their status.
func (e *Engine) WaitReady(ctx context.Context, refs []Ref, conds []Condition) error {
	return e.await(ctx, newWaiter(wantReady, refs), conds)
}

// WaitGone watches refs until none exists.
func (e *Engine) WaitGone(ctx context.Context, refs []Ref) error {
	return e.await(ctx, newWaiter(wantDeleted, refs), nil)
}

func (e *Engine) await(ctx context.Context, w *waiter, conds []Condition) error {
	if w.done() {
		return nil
	}
	wctx, cancel := context.WithCancel(ctx)
	events := e.statusWatcher(conds).Watch(wctx, w.ids(), watcher.Options{RESTScopeStrategy: watcher.RESTScopeNamespace})
	defer func() {
		cancel()
		// Drain, so that the watcher's goroutines can finish.
		for range events {
		}
	}()
	for ev := range events {
		var err error
		switch ev.Type {
		case event.ErrorEvent:
			if ctx.Err() != nil {
				return w.ended(ctx)
			}
			err = fmt.Errorf("watching the objects' status: %w", ev.Error)
		case event.SyncEvent:
			if w.want == wantDeleted {
				err = e.confirmGone(wctx, w)
			}
		case event.ResourceUpdateEvent:
			err = w.observe(ev.Resource)
		}
		if err != nil {
			return err
		}
		if w.done() {
			return nil
		}
	}
	return w.ended(ctx)
}

// ended is the error of a wait whose watcher stopped: a *WaitError when
// the deadline passed.
func (w *waiter) ended(ctx context.Context) error {
	switch err := ctx.Err(); {
	case errors.Is(err, context.DeadlineExceeded):
		return w.timeout()
	case err != nil:
		return err
	}
	return errors.New("the status watcher stopped before the wait ended")
}

// confirmGone settles, once the watcher has synced, the objects it has not
// reported: the watcher's handlers may still be delivering the initial
// list, so one list per kind and namespace tells which of them are gone.
func (e *Engine) confirmGone(ctx context.Context, w *waiter) error {
	var unseen []Ref
	for id, p := range w.pending {
		if !w.seen[id] {
			unseen = append(unseen, p.Ref)
		}
	}
	gs, err := e.groups(unseen)
	if err != nil {
		return err
	}
	mapped := map[object.ObjMetadata]bool{}
	for _, g := range gs {
		live, err := e.listMembers(ctx, g)
		if err != nil {
			return err
		}
		for name, r := range g.names {
			mapped[r.ObjMetadata] = true
			if !live[name] {
				delete(w.pending, r.ObjMetadata)
			}
		}
	}
	for _, r := range unseen {
		if !mapped[r.ObjMetadata] {
			delete(w.pending, r.ObjMetadata) // its kind is gone, and so is it
		}
	}
	return nil
}
