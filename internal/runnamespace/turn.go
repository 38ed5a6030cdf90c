// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runnamespace

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/waitfor"
)

// AnnotationHolder on a held node's namespace names the run whose turn it
// is and until when: "<run id> <RFC 3339 time>". A turn whose time passed
// (its provider was killed) is free to take.
const AnnotationHolder = "kubeplay.io/held-by"

// ErrNodeGone: the held node's namespace went while a run waited for it.
var ErrNodeGone = errors.New("the held node's namespace is gone or terminating")

// holder gives the run that holds ns at now, if any.
func holder(ns *corev1.Namespace, now time.Time) (run string, until time.Time, held bool) {
	run, at, ok := strings.Cut(ns.Annotations[AnnotationHolder], " ")
	if !ok {
		return "", time.Time{}, false
	}
	until, err := time.Parse(time.RFC3339, at)
	if err != nil || !now.Before(until) {
		return "", time.Time{}, false
	}
	return run, until, true
}

// TakeTurn waits until no run holds the held node's namespace, then marks
// it as run's until the given time, with the resourceVersion it read, so
// that of two runs that find it free only one takes it. busy is told once,
// with the holder's id, when run must wait. The wait watches the namespace;
// a holder past its time is passed over. The returned release gives the
// turn back (it does nothing once another run took it).
func TakeTurn(ctx context.Context, kube kubernetes.Interface, namespace, run string, until time.Time, busy func(holder string)) (release func(context.Context) error, err error) {
	nss := kube.CoreV1().Namespaces()
	told := false
	for {
		ns, err := nss.Get(ctx, namespace, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil, ErrNodeGone
		case err != nil:
			return nil, err
		case ns.DeletionTimestamp != nil:
			return nil, ErrNodeGone
		}
		other, otherUntil, held := holder(ns, time.Now())
		if !held {
			if ns.Annotations == nil {
				ns.Annotations = map[string]string{}
			}
			ns.Annotations[AnnotationHolder] = run + " " + until.UTC().Format(time.RFC3339)
			_, err := nss.Update(ctx, ns, metav1.UpdateOptions{FieldManager: managed.ManagedByValue})
			switch {
			case err == nil:
				return func(ctx context.Context) error { return giveBack(ctx, kube, namespace, run) }, nil
			case apierrors.IsConflict(err):
				continue // another run took it, or the namespace changed: read again
			default:
				return nil, fmt.Errorf("taking a turn on namespace %s: %w", namespace, err)
			}
		}
		if !told && busy != nil {
			busy(other)
			told = true
		}
		// Until the namespace changes, or the holder's time is up.
		wctx, cancel := context.WithDeadline(ctx, otherUntil.Add(time.Second))
		_, err = waitfor.Until(wctx, waitfor.Named(nss, namespace), &corev1.Namespace{}, func(ev watch.Event) (bool, error) {
			o, ok := ev.Object.(*corev1.Namespace)
			return ev.Type == watch.Deleted || !ok || o.ResourceVersion != ns.ResourceVersion, nil
		})
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil && !wait.Interrupted(err) {
			return nil, err
		}
	}
}

// giveBack removes run's mark from the namespace, if it is still run's.
func giveBack(ctx context.Context, kube kubernetes.Interface, namespace, run string) error {
	nss := kube.CoreV1().Namespaces()
	for {
		ns, err := nss.Get(ctx, namespace, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if h, _, _ := strings.Cut(ns.Annotations[AnnotationHolder], " "); h != run {
			return nil
		}
		delete(ns.Annotations, AnnotationHolder)
		_, err = nss.Update(ctx, ns, metav1.UpdateOptions{FieldManager: managed.ManagedByValue})
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}
