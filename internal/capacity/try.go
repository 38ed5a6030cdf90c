// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package capacity

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

// Seen is what a TryAcquire that found no room saw of its ledger: the
// version to watch from, and when the earliest claim expires.
type Seen struct {
	Ledger  Ledger
	Version string
	Expires time.Time
}

// TryAcquire claims forks for run when they fit now, without waiting: a
// run placed across groups tries each in turn. It returns true when the
// claim is taken; false and what it saw (for WaitAny) when the ledger has
// no room. A lost write (409 Conflict) is retried: it says nothing of room.
func (l Ledger) TryAcquire(ctx context.Context, run string, forks int64, ttl time.Duration) (bool, Seen, error) {
	if !runKey.MatchString(run) {
		return false, Seen{}, fmt.Errorf("run id %q is not a valid ConfigMap key", run)
	}
	if forks < 1 {
		return false, Seen{}, fmt.Errorf("forks must be at least 1, got %d", forks)
	}
	for {
		cm, err := l.get(ctx)
		if err != nil {
			return false, Seen{}, err
		}
		entries, limit, err := l.decode(cm)
		if err != nil {
			return false, Seen{}, err
		}
		if forks > limit {
			return false, Seen{}, fmt.Errorf("the run asks for %d %s but container group %q allows at most %d", forks, l.unit(), l.Group, limit)
		}
		now := time.Now()
		reaped := reap(entries, now)
		delete(entries, run)
		fits := forks <= limit-used(entries, limit)
		if !fits && len(reaped) == 0 {
			return false, Seen{Ledger: l, Version: cm.ResourceVersion, Expires: earliest(entries)}, nil
		}
		if fits {
			entries[run] = Entry{Forks: forks, Expires: now.Add(ttl)}
		}
		if err := encode(cm, entries); err != nil {
			return false, Seen{}, err
		}
		updated, err := l.Kube.CoreV1().ConfigMaps(l.Namespace).Update(ctx, cm, metav1.UpdateOptions{FieldManager: managed.ManagedByValue})
		switch {
		case apierrors.IsConflict(err):
			continue
		case err != nil:
			return false, Seen{}, fmt.Errorf("updating ledger %s/%s: %w", l.Namespace, cm.Name, err)
		case !fits:
			return false, Seen{Ledger: l, Version: updated.ResourceVersion, Expires: earliest(entries)}, nil
		}
		return true, Seen{}, nil
	}
}

// WaitAny waits until one of the ledgers changes after the version seen of
// it, one of their earliest claims expires, or ctx ends: the ledgers may
// be in different clusters, each watched with its own client. A watch that
// cannot start from the version seen (compacted) returns at once: read
// again.
func WaitAny(ctx context.Context, seen []Seen) error {
	if len(seen) == 0 {
		return errors.New("no ledger to wait on")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	woke := make(chan error, len(seen))
	var deadline time.Time
	for _, s := range seen {
		if !s.Expires.IsZero() && (deadline.IsZero() || s.Expires.Before(deadline)) {
			deadline = s.Expires
		}
		go func() { woke <- s.Ledger.changed(ctx, s.Version) }()
	}
	expire, stop := expiry(deadline)
	defer stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case err := <-woke:
		return err
	case <-expire:
		return nil
	}
}

// changed returns when the ledger has an event after version (a change, a
// deletion, an error event or a closed watch), or ctx ends. An error is a
// watch the API server refused for another reason than a compacted version.
func (l Ledger) changed(ctx context.Context, version string) error {
	w, err := l.Kube.CoreV1().ConfigMaps(l.Namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", l.name()).String(),
		ResourceVersion: version,
	})
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("watching ledger %s/%s: %w", l.Namespace, l.name(), err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if cm, isCM := ev.Object.(*corev1.ConfigMap); ok && isCM && cm.ResourceVersion == version {
				continue // the version seen, replayed
			}
			return nil
		}
	}
}

// expiry fires at deadline; a zero deadline never fires. stop frees its timer.
func expiry(deadline time.Time) (<-chan time.Time, func()) {
	if deadline.IsZero() {
		return nil, func() {}
	}
	t := time.NewTimer(time.Until(deadline))
	return t.C, func() { t.Stop() }
}
