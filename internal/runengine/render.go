// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podsecurity"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
)

const (
	// DefaultPendingTimeout applies to a group that sets none.
	DefaultPendingTimeout = 5 * time.Minute
	// podGracePeriod: a worker that ignores SIGTERM (sleep as PID 1) would
	// otherwise hold its quota for 30 s.
	podGracePeriod = 1
	// generateName of every run pod.
	podNamePrefix = "kubeplay-run-"
)

// Group is what a run needs of its container group.
type Group struct {
	Name, Namespace string
	// Credential names the group's credential; empty for the provider's own.
	Credential string
	// MaxConcurrentRuns and MaxForks are the group's ledgers' limits; nil
	// for no ledger.
	MaxConcurrentRuns, MaxForks *int64
	// PendingTimeout bounds waiting for capacity and for the pod to start;
	// zero or less means DefaultPendingTimeout.
	PendingTimeout time.Duration
	// DisconnectGrace is how long a run goes on in its pod without a beat
	// from the provider; zero means bundle.DefaultLeaseGrace.
	DisconnectGrace time.Duration
	// LaunchRetries is how many fresh pods a run may launch after the first
	// when a launch fails for a reason that can pass (runner.CanPass).
	LaunchRetries int
	// Pod renders the group's pod; its Name and Namespace are the group's.
	Pod podspec.Group
	// DefaultLabel fills what a node label leaves unset.
	DefaultLabel podspec.Resources
	// PodSecurityLevel is the Pod Security Standard level every run pod
	// must meet; "" is podsecurity.Default.
	PodSecurityLevel string
	// PodSecurityVersion is the policy version the group's API server
	// enforces ("v1.32", podsecurity.ServerVersion); "" for the newest
	// checks, when the cluster is not known.
	PodSecurityVersion string
	// OwnerID is the group definition's owner id: its ledgers carry it,
	// and a ledger with another is not the group's. "" for a group stored
	// before owner ids.
	OwnerID string
	// Warm maps a node label's name ("" for the group's own pod) to the
	// number of warm pods the group keeps of it.
	Warm map[string]int64
}

func (g Group) pending() time.Duration {
	if g.PendingTimeout <= 0 {
		return DefaultPendingTimeout
	}
	return g.PendingTimeout
}

// RunInfo identifies a run to the node label's placeholders.
type RunInfo struct {
	// ID is the run's id; empty at plan time, before it is chosen.
	ID   string
	Name string
}

// deadlineSlack is what a run pod's activeDeadlineSeconds adds to the run's
// timeout. The kubelet counts the deadline from the pod's startTime, which
// the API keeps in whole seconds, so a pod that started at once was killed
// up to a second before the provider's own timeout: the run's stream broke
// and it ended as stream_lost, not timeout. With the slack the provider ends
// the run first; the deadline still ends a pod whose provider is gone.
const deadlineSlack = 2 * time.Second

// PodDeadline is the activeDeadlineSeconds of the pod of a run of timeout:
// the timeout in whole seconds, rounded up, plus deadlineSlack.
func PodDeadline(timeout time.Duration) time.Duration {
	return (timeout + time.Second - 1).Truncate(time.Second) + deadlineSlack
}

// RenderPod renders a run's pod: the group's pod, with the node label (nil
// for none) composed over it, generateName, a short grace period and
// activeDeadlineSeconds of deadline, so that the cluster kills a pod whose
// provider died. The pod does not carry the run's id label: that is chosen
// at apply, and the pod a plan shows must be the one apply reports. With
// run.ID empty, a label that uses {run.id} gives ErrRenderAtApply. A pod
// that fails the group's pod security level gives a *PodSecurityError.
// Other errors match ErrGroupUnavailable.
func RenderPod(g Group, l *podspec.Label, run RunInfo, deadline time.Duration) (*corev1.Pod, error) {
	pg := g.Pod
	pg.Name, pg.Namespace = g.Name, g.Namespace
	pod, err := podspec.RenderGroup(pg)
	if err != nil {
		return nil, unavailable{fmt.Errorf("container group %q: %w", g.Name, err)}
	}
	if err := checkPodSecurity(g, nil, pod); err != nil {
		return nil, err
	}
	if l != nil {
		if run.ID == "" && usesRunID(l.DynamicLabels) {
			return nil, ErrRenderAtApply
		}
		pod, err = podspec.Compose(pod, *l, g.DefaultLabel, map[string]string{
			"run.id": run.ID, "run.name": run.Name, "run.group": g.Name, "run.label": l.Name,
		})
		if err != nil {
			return nil, unavailable{fmt.Errorf("node label %q: %w", l.Name, err)}
		}
		pod.Labels[managed.LabelNodeLabel] = l.Name
		if err := checkPodSecurity(g, l, pod); err != nil {
			return nil, err
		}
	}
	pod.GenerateName = podNamePrefix
	if pod.Spec.TerminationGracePeriodSeconds == nil {
		pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](podGracePeriod)
	}
	pod.Spec.ActiveDeadlineSeconds = ptr.To(int64(deadline / time.Second))
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	return pod, nil
}

// checkPodSecurity holds pod to the group's level; l is the node label
// composed into it, nil for the group's pod alone.
func checkPodSecurity(g Group, l *podspec.Label, pod *corev1.Pod) error {
	err := podsecurity.CheckAt(g.PodSecurityLevel, g.PodSecurityVersion, pod)
	var ve *podsecurity.ViolationError
	switch {
	case errors.As(err, &ve):
		pe := &PodSecurityError{Group: g.Name, Err: ve}
		if l != nil {
			pe.Label = l.Name
		}
		return pe
	case err != nil:
		return unavailable{fmt.Errorf("container group %q: %w", g.Name, err)}
	}
	return nil
}

func usesRunID(templates map[string]string) bool {
	for _, t := range templates {
		if strings.Contains(t, "{run.id}") {
			return true
		}
	}
	return false
}

// namespaceLabel returns l when it gives runs a namespace of their own.
func namespaceLabel(l *podspec.Label) *podspec.Label {
	if l != nil && l.Type == podspec.TypeNamespace {
		return l
	}
	return nil
}
