// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"context"
	"errors"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/capacity"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

// Liveness says whether a run pod still has a process that will delete it.
type Liveness string

const (
	// Live: the run's process renews its claim in the group's ledger.
	Live Liveness = "live"
	// Orphaned: no process will delete the pod. It ended, its deadline
	// passed, or the claim its process renewed expired or is gone.
	Orphaned Liveness = "orphaned"
	// Deleting: the pod is being deleted.
	Deleting Liveness = "deleting"
	// Running: the pod runs and the group has no ledger (neither
	// max_concurrent_runs nor max_forks) to tell whether its process lives.
	// A pod whose process died ends itself once its exec session is gone,
	// and is Orphaned from then on.
	Running Liveness = "running"
)

// RunPod is a run pod of a group as found on its cluster.
type RunPod struct {
	Name, RunID, Node string
	Phase             corev1.PodPhase
	Created           time.Time
	Liveness          Liveness
}

// RunPods lists g's run pods, oldest first, with whether each has a live
// process, as of now. Dry-run pods are left out.
func RunPods(ctx context.Context, kube kubernetes.Interface, g Group, now time.Time) ([]RunPod, error) {
	pods, err := kube.CoreV1().Pods(g.Namespace).List(ctx, metav1.ListOptions{LabelSelector: runSelector(g.Name)})
	if err != nil {
		return nil, err
	}
	claims, ledgers, err := liveClaims(ctx, kube, g, now)
	if err != nil {
		return nil, err
	}
	var out []RunPod
	for i := range pods.Items {
		p := &pods.Items[i]
		id := p.Labels[managed.LabelRun]
		if id == dryRunID {
			continue
		}
		out = append(out, RunPod{
			Name: p.Name, RunID: id, Node: p.Spec.NodeName, Phase: knownPhase(p.Status.Phase),
			Created: p.CreationTimestamp.Time, Liveness: liveness(p, now, ledgers, claims[id]),
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// knownPhase is phase when it is one of the API's, else Unknown: whoever may
// update a pod's status may write any text there, which terraform query
// would show.
func knownPhase(phase corev1.PodPhase) corev1.PodPhase {
	switch phase {
	case corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed:
		return phase
	}
	return corev1.PodUnknown
}

func liveness(p *corev1.Pod, now time.Time, ledgers, claimed bool) Liveness {
	switch {
	case p.DeletionTimestamp != nil:
		return Deleting
	case orphaned(p, now) || (ledgers && !claimed):
		return Orphaned
	case ledgers:
		return Live
	}
	return Running
}

// liveClaims returns the run ids with an unexpired claim in g's ledgers,
// and whether g has any ledger. A claim's key is "<run id>-<operation>".
func liveClaims(ctx context.Context, kube kubernetes.Interface, g Group, now time.Time) (map[string]bool, bool, error) {
	live, ledgers := map[string]bool{}, false
	for kind, limit := range map[string]*int64{capacity.Runs: g.MaxConcurrentRuns, capacity.Forks: g.MaxForks} {
		if limit == nil {
			continue
		}
		led := capacity.Ledger{Kube: kube, Namespace: g.Namespace, Group: g.Name, Kind: kind, Limit: *limit, Owner: managed.Owner{ID: g.OwnerID}}
		claims, err := led.Claims(ctx)
		if errors.Is(err, capacity.ErrNoLedger) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		ledgers = true
		for key, e := range claims {
			if i := strings.LastIndexByte(key, '-'); i > 0 && now.Before(e.Expires) {
				live[key[:i]] = true
			}
		}
	}
	return live, ledgers, nil
}
