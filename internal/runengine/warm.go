// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/inflight"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/warmpool"
)

// warmRunInfo fills a node label's run placeholders in a warm pod's labels;
// a claim replaces them with the run's.
var warmRunInfo = RunInfo{ID: "warm", Name: "warm"}

// refillTimeout bounds a fill after a claim or a run.
const refillTimeout = 30 * time.Second

// WarmTemplate renders the pool of the group's warm pods for node label l
// (nil for the group's own pod). A namespace label has no pool: its runs
// need a namespace made for them.
func WarmTemplate(g Group, l *podspec.Label) (warmpool.Template, error) {
	pod, err := RenderPod(g, l, warmRunInfo, warmpool.MaxAge)
	if err != nil {
		return warmpool.Template{}, err
	}
	return warmpool.Template{Group: g.Name, Namespace: g.Namespace, Label: labelName(l), Pod: pod}, nil
}

func labelName(l *podspec.Label) string {
	if l == nil {
		return ""
	}
	return l.Name
}

// warmPool is the pool of req's run pod and its size; size 0 when the
// group keeps none for it.
func warmPool(req Request, pod *corev1.Pod) (warmpool.Template, int) {
	t := warmpool.Template{Group: req.Group.Name, Namespace: req.Group.Namespace, Label: labelName(req.Label), Pod: pod}
	if namespaceLabel(req.Label) != nil {
		return t, 0
	}
	return t, int(req.Group.Warm[t.Label])
}

// signedPool is t with the catalog key, and pods refused for their
// signatures logged as warnings; false, logged, when there is no key.
func (e *Engine) signedPool(ctx context.Context, t *warmpool.Template) bool {
	key, err := e.key(ctx)
	if err != nil {
		e.log(slog.LevelWarn, "the catalog key is not available, so warm pods are neither claimed nor made; runs start pods of their own",
			map[string]any{"group": t.Group, "label": t.Label, "error": err.Error()})
		return false
	}
	t.Key = key
	t.OnRefused = func(r *warmpool.RefusedError) {
		msg := "a pod with the labels of a warm pod was not made by kubeplay: it is not claimed and is left in place"
		if r.Ours {
			msg = "a warm pod changed since kubeplay made it: it is not claimed, and the next fill deletes it"
		}
		e.log(slog.LevelWarn, msg, map[string]any{"group": t.Group, "label": t.Label, "pod": r.Namespace + "/" + r.Name, "reason": r.Reason})
	}
	return true
}

// takeWarm claims a pod of pool t (of size n) for req's run, or returns nil
// for the cold path: the pool is empty, or it failed (which is logged, not
// an error: a run does not need it). A claim starts a refill at once. Only
// a pod whose signatures hold is claimed; the check reads nothing more.
func (e *Engine) takeWarm(ctx context.Context, req Request, t warmpool.Template, n int) (*corev1.Pod, *atomic.Bool) {
	wctx, cancel := context.WithTimeout(ctx, req.Group.pending())
	defer cancel()
	got, err := warmpool.Take(wctx, e.clients.Kube, t, warmpool.Claim{Labels: t.Pod.Labels, Annotations: t.Pod.Annotations, Timeout: PodDeadline(req.Timeout)})
	if err != nil && ctx.Err() == nil {
		e.log(slog.LevelWarn, "claiming a warm pod failed; the run starts a pod of its own", map[string]any{
			"run": req.ID, "group": req.Group.Name, "error": err.Error()})
	}
	if got == nil {
		return nil, nil
	}
	return got, e.refill(ctx, t, n)
}

// refill tops t's pool up to n in the background (warmpool.Refill: a full
// quota is waited out for up to refillTimeout), with a context of its own
// so that a canceled run still refills. It never holds the run: a warm
// run's pod holds the quota until the kubelet has stopped it, and a pod
// kept on failure holds it on. The flag it returns is set once the pool is
// topped up: neither cut short by the quota's wait nor failed.
func (e *Engine) refill(ctx context.Context, t warmpool.Template, n int) *atomic.Bool {
	topped := &atomic.Bool{}
	// A refill of the pool that has not listed it yet sees this claim when
	// it does: runs that claim together share it (one LIST, not one each).
	key := e.clients.Config.Host + "\x00" + t.Namespace + "\x00" + t.Group + "\x00" + t.Label + "\x00" + warmpool.Revision(t.Pod)
	if queued, loaded := queuedRefills.LoadOrStore(key, topped); loaded {
		if queued, ok := queued.(*atomic.Bool); ok {
			return queued
		}
	}
	unqueue := func() { queuedRefills.CompareAndDelete(key, topped) }
	t.OnFill = unqueue
	active.Enter() // a provider whose Terraform died waits for the refill
	refills.Enter()
	go func() {
		defer active.Leave()
		defer refills.Leave()
		defer unqueue() // a fill that failed before it listed
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refillTimeout)
		defer cancel()
		defer context.AfterFunc(background, cancel)()
		_, err := warmpool.Refill(fctx, e.clients.Kube, t, n)
		if err != nil && fctx.Err() == nil {
			e.log(slog.LevelWarn, "refilling the warm pool failed", map[string]any{"group": t.Group, "label": t.Label, "error": err.Error()})
		}
		topped.Store(err == nil && fctx.Err() == nil)
	}()
	return topped
}

// queuedRefills holds, per pool, the flag of the refill that waits to list
// it (Engine.refill).
var queuedRefills sync.Map // pool key -> *atomic.Bool

// background ends with StopBackground; refills runs the refills in flight.
var (
	background, stopBackground = context.WithCancel(context.Background())
	refills                    = &inflight.Gate{}
)

// StopBackground ends the refills in flight, for a provider that Terraform
// is stopping, and waits up to wait for them: a refill that is waiting for
// quota gives up, one that has just created a pod signs it first, so that
// no pod is left that no run would claim. Terraform kills a provider 2 s
// after it asked it to stop.
func StopBackground(wait time.Duration) {
	stopBackground()
	select {
	case <-refills.Idle():
	case <-time.After(wait):
	}
}
