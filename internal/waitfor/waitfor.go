// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

// Package waitfor waits, watching, until one named Kubernetes object meets a
// condition or is gone. Every wait in kubeplay goes through it, so that none
// polls and all survive a watch that the API server closes.
package waitfor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// ListWatcher is what a typed client-go client of one resource offers, for
// example kube.CoreV1().Pods(ns).
type ListWatcher[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// Deleter is a ListWatcher that can also delete.
type Deleter[L runtime.Object] interface {
	ListWatcher[L]
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// Named lists and watches the one object called name.
func Named[L runtime.Object](c ListWatcher[L], name string) cache.ListerWatcher {
	return Selected(c, fields.OneTermEqualSelector("metadata.name", name))
}

// Selected lists and watches the objects that the field selector fs selects.
func Selected[L runtime.Object](c ListWatcher[L], fs fields.Selector) cache.ListerWatcher {
	sel := fs.String()
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return c.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return c.Watch(ctx, o)
		},
	}
}

// Lists lists with opts until done holds of a list, watching from each
// list's resourceVersion between lists so that no change is missed: any
// event, an expired watch's error included, means list again. It returns
// the last list, with ctx's error when ctx ended first.
func Lists[L runtime.Object](ctx context.Context, c ListWatcher[L], opts metav1.ListOptions, done func(L) (bool, error)) (L, error) {
	var last L
	for {
		list, err := c.List(ctx, opts)
		if err != nil {
			return last, err
		}
		last = list
		if ok, err := done(list); ok || err != nil {
			return list, err
		}
		m, err := meta.ListAccessor(list)
		if err != nil {
			return list, err
		}
		w, err := c.Watch(ctx, metav1.ListOptions{LabelSelector: opts.LabelSelector, FieldSelector: opts.FieldSelector,
			ResourceVersion: m.GetResourceVersion()})
		if err != nil {
			return list, err
		}
		select {
		case <-w.ResultChan():
			w.Stop()
		case <-ctx.Done():
			w.Stop()
			return list, ctx.Err()
		}
	}
}

// Gone waits until the object that lw lists no longer exists. example is an
// empty object of its type, such as &corev1.Pod{}.
func Gone(ctx context.Context, lw cache.ListerWatcher, example runtime.Object) error {
	gone := func(store cache.Store) (bool, error) {
		return len(store.List()) == 0 && !consistentlyHas(ctx, lw, anyObject), nil
	}
	_, err := watchtools.UntilWithSync(ctx, lw, example, gone, func(ev watch.Event) (bool, error) {
		return ev.Type == watch.Deleted, nil
	})
	return err
}

// GoneUID is Gone for the object of uid: another object that took its name
// since does not hold the wait. An empty uid is Gone.
func GoneUID(ctx context.Context, lw cache.ListerWatcher, example runtime.Object, uid types.UID) error {
	if uid == "" {
		return Gone(ctx, lw, example)
	}
	other := func(obj any) bool {
		m, err := meta.Accessor(obj)
		return err == nil && m.GetUID() != uid
	}
	gone := func(store cache.Store) (bool, error) {
		return !slices.ContainsFunc(store.List(), func(o any) bool { return !other(o) }) &&
			!consistentlyHas(ctx, lw, func(o runtime.Object) bool { return !other(o) }), nil
	}
	_, err := watchtools.UntilWithSync(ctx, lw, example, gone, func(ev watch.Event) (bool, error) {
		return ev.Type == watch.Deleted || other(ev.Object), nil
	})
	return err
}

// Until waits until cond holds for the object that lw lists and returns the
// event that satisfied it. cond sees every event, Deleted included.
func Until(ctx context.Context, lw cache.ListerWatcher, example runtime.Object, cond watchtools.ConditionFunc) (*watch.Event, error) {
	return watchtools.UntilWithSync(ctx, lw, example, nil, cond)
}

// UntilPresent is Until for an object that must exist: when the first list
// does not hold it (it was deleted before the wait began), it returns absent.
func UntilPresent(ctx context.Context, lw cache.ListerWatcher, example runtime.Object, cond watchtools.ConditionFunc, absent error) (*watch.Event, error) {
	present := func(store cache.Store) (bool, error) {
		if len(store.List()) > 0 || consistentlyHas(ctx, lw, anyObject) {
			return false, nil
		}
		return false, absent
	}
	return watchtools.UntilWithSync(ctx, lw, example, present, cond)
}

// anyObject matches every object of a list.
func anyObject(runtime.Object) bool { return true }

// consistentlyHas asks again, with a consistent read, whether the object an
// informer's first list did not hold exists (one that match accepts): that
// list may be served from the API server's watch cache (resourceVersion
// "0", client-go's fallback when it cannot stream the list), which can lag
// behind a create that has just returned. The watch from that list's
// version then brings the object. An error reads as "has": unknown is
// neither absent nor gone, and the wait goes on within its context.
func consistentlyHas(ctx context.Context, lw cache.ListerWatcher, match func(runtime.Object) bool) bool {
	list, err := cache.ToListerWatcherWithContext(lw).ListWithContext(ctx, metav1.ListOptions{})
	if err != nil {
		return true
	}
	items, err := meta.ExtractList(list)
	return err != nil || slices.ContainsFunc(items, match)
}

// Delete deletes the object called name with opts, treats an object that
// is already gone as deleted, and waits until the API server has removed it
// (finalizers included).
func Delete[L runtime.Object](ctx context.Context, c Deleter[L], name string, opts metav1.DeleteOptions, example runtime.Object) error {
	if err := c.Delete(ctx, name, opts); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	return Gone(ctx, Named(c, name), example)
}

// DeleteObject is Delete for a dynamic client, whose Delete also takes
// subresources: it deletes the named object and waits until it is gone.
func DeleteObject(ctx context.Context, r dynamic.ResourceInterface, name string, opts metav1.DeleteOptions) error {
	if err := r.Delete(ctx, name, opts); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	return Gone(ctx, Named(r, name), &unstructured.Unstructured{})
}

// StartFailures are the reasons a container waits that waiting longer
// cannot fix: a run whose pod shows one ends at once, and a warm pod that
// shows one is replaced.
var StartFailures = []string{
	"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull",
	"CreateContainerConfigError", "CreateContainerError",
}

// StartFailure describes the first container of p that waits for one of
// StartFailures, and reports whether there is one.
func StartFailure(p *corev1.Pod) (string, bool) {
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && slices.Contains(StartFailures, w.Reason) {
			return fmt.Sprintf("container %s of pod %s/%s cannot start: %s: %s", cs.Name, p.Namespace, p.Name, w.Reason, w.Message), true
		}
	}
	return "", false
}

// QuotaExceeded reports the API server's ResourceQuota refusal, which
// QuotaChange waits out.
func QuotaExceeded(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota")
}

// QuotaConflict reports the quota admission's lost race: requests admitted
// together in a namespace with a ResourceQuota update its usage at once, and
// the losers are refused with a Conflict on the quota, the request not
// carried out. Sent again, it is admitted against the new usage.
func QuotaConflict(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsConflict(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d != nil && d.Kind == "resourcequotas"
}

// QuotaWait waits out a namespace's quota refusals, one Wait per refusal.
// Each wait ends at a change of a ResourceQuota of the namespace or after a
// recheck that starts at a second and doubles, up to 16 s, while nothing
// changes (see QuotaChange).
type QuotaWait struct {
	Kube      kubernetes.Interface
	Namespace string
	recheck   time.Duration
}

const (
	quotaRecheck    = time.Second
	maxQuotaRecheck = 16 * time.Second
)

// Wait blocks until the quota may have room; an error means ctx ended or
// the quotas cannot be watched.
func (q *QuotaWait) Wait(ctx context.Context) error {
	if q.recheck == 0 {
		q.recheck = quotaRecheck
	}
	changed, err := QuotaChange(ctx, q.Kube, q.Namespace, q.recheck)
	if changed {
		q.recheck = quotaRecheck
	} else {
		q.recheck = min(2*q.recheck, maxQuotaRecheck)
	}
	return err
}

// QuotaChange blocks until a ResourceQuota of ns changes its status, and
// reports true, or until recheck has passed, and reports false. The API
// server's quota admission reads quotas from its own cache, which can lag
// the watch: a create refused just after the change that freed room would
// otherwise wait for a change that has already come.
func QuotaChange(ctx context.Context, kube kubernetes.Interface, ns string, recheck time.Duration) (bool, error) {
	list, err := kube.CoreV1().ResourceQuotas(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	w, err := kube.CoreV1().ResourceQuotas(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		return false, err
	}
	defer w.Stop()
	timer := time.NewTimer(recheck)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-timer.C:
			return false, nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false, nil // the watch ended: try again, which re-lists
			}
			if ev.Type == watch.Modified || ev.Type == watch.Deleted {
				return true, nil
			}
		}
	}
}
