// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runnamespace"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/warmpool"
)

// sweep removes what providers killed before this one started left in the
// group: one sweep per group and process finds it all. Only runs of
// namespace labels look for run namespaces: listing namespaces needs rights
// that a pods-only credential lacks.
func (e *Engine) sweep(ctx context.Context, g Group, namespaces bool) {
	key := strings.Join([]string{e.clients.Config.Host, g.Namespace, g.Name, fmt.Sprint(namespaces)}, "\x00")
	_ = e.sweeps(key, func() error {
		if namespaces {
			e.reapNamespaces(ctx, g.Name)
		}
		e.reapPods(ctx, g)
		return nil
	})
}

// runSelector selects the group's run pods and run namespaces.
func runSelector(group string) string {
	return managed.LabelManagedBy + "=" + managed.ManagedByValue + "," + managed.LabelContainerGroup + "=" + group + "," + managed.LabelRun
}

// orphaned reports a run pod that no provider will delete: it ended, or its
// deadline passed (the provider that made it was killed).
func orphaned(p *corev1.Pod, now time.Time) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
		return true
	}
	d := p.Spec.ActiveDeadlineSeconds
	return d != nil && p.Status.StartTime != nil && now.After(p.Status.StartTime.Add(time.Duration(*d)*time.Second))
}

// orphanPods lists the group's orphaned run pods that kubeplay signed
// (warmpool.VerifyRun, under the catalog key or a previous one): their
// names, and their UIDs, which their deletes are conditioned on. Labels can
// be copied onto any pod, so an unsigned one is logged and left.
func (e *Engine) orphanPods(ctx context.Context, g Group) ([]string, []types.UID, error) {
	key, err := e.key(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", errSweepKey, err)
	}
	pods, err := e.clients.Kube.CoreV1().Pods(g.Namespace).List(ctx, metav1.ListOptions{LabelSelector: runSelector(g.Name)})
	if err != nil {
		return nil, nil, err
	}
	var names []string
	var uids []types.UID
	now := time.Now()
	for i := range pods.Items {
		p := &pods.Items[i]
		switch {
		case !orphaned(p, now):
		case !warmpool.VerifyRun(key, g.Name, p, true):
			e.log(slog.LevelWarn, "a pod with the labels of the group's run pods was not signed by kubeplay: the orphan sweep leaves it",
				map[string]any{"pod": p.Name, "namespace": p.Namespace, "group": g.Name})
		default:
			names, uids = append(names, p.Name), append(uids, p.UID)
		}
	}
	return names, uids, nil
}

// errSweepKey: without the catalog key the sweep tells no pod of kubeplay's
// from others, so it deletes none; an engine without a key signed none.
var errSweepKey = errors.New("the catalog key, which tells kubeplay's run pods from others, is not available, so the orphan sweep deletes none")

// signRunPod signs each run pod right after its create, so that the orphan
// sweep of a later provider knows it as kubeplay's. A pod that cannot be
// signed (no key, or a credential without update on pods) still runs: the
// run deletes it, and only a killed provider's is left to its deadline.
func (e *Engine) signRunPod(runID string) func(context.Context, *corev1.Pod) error {
	return func(ctx context.Context, p *corev1.Pod) error {
		key, err := e.key(ctx)
		if err == nil {
			_, err = warmpool.SignRun(ctx, e.clients.Kube, key, p)
		}
		if err != nil {
			level := slog.LevelWarn
			if apierrors.IsForbidden(err) || errors.Is(err, warmpool.ErrNoKey) {
				level = slog.LevelDebug
			}
			e.log(level, "the run pod is not signed: if this provider is killed, no orphan sweep deletes it", map[string]any{
				"run": runID, "pod": p.Name, "error": err.Error()})
		}
		return nil
	}
}

// reapPods deletes the group's orphaned run pods, waiting until each is
// gone so that the quota they held is free.
func (e *Engine) reapPods(ctx context.Context, g Group) {
	names, uids, err := e.orphanPods(ctx, g)
	if errors.Is(err, errSweepKey) {
		e.log(slog.LevelDebug, err.Error(), map[string]any{"group": g.Name})
		return
	}
	if err != nil {
		e.log(slog.LevelWarn, "listing orphaned run pods failed", map[string]any{"error": err.Error()})
		return
	}
	for i, name := range names {
		e.log(slog.LevelInfo, "removing an orphaned run pod", map[string]any{"pod": name, "namespace": g.Namespace})
		if err := runner.DeletePod(ctx, e.clients.Kube, g.Namespace, name, uids[i]); err != nil && !errors.Is(err, context.Canceled) {
			e.log(slog.LevelWarn, "removing an orphaned run pod failed", map[string]any{"pod": name, "error": err.Error()})
		}
	}
}

// reapNamespaces deletes the group's run namespaces past their deadline.
func (e *Engine) reapNamespaces(ctx context.Context, group string) {
	nss := e.clients.Kube.CoreV1().Namespaces()
	list, err := nss.List(ctx, metav1.ListOptions{LabelSelector: runSelector(group)})
	if err != nil {
		e.log(slog.LevelWarn, "listing orphaned run namespaces failed", map[string]any{"error": err.Error()})
		return
	}
	now := time.Now()
	for i := range list.Items {
		ns := &list.Items[i]
		if ns.DeletionTimestamp != nil || !runnamespace.Expired(ns, now) {
			continue
		}
		e.log(slog.LevelInfo, "removing an orphaned run namespace", map[string]any{"namespace": ns.Name})
		if err := nss.Delete(ctx, ns.Name, managed.DeleteOptions(ns.UID)); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			e.log(slog.LevelWarn, "removing an orphaned run namespace failed", map[string]any{"namespace": ns.Name, "error": err.Error()})
		}
	}
}
