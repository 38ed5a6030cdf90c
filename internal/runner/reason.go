package runner

import (
	"context"
	"errors"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Reason says why a run did not succeed, as one of a closed set that a
// pipeline or a module can branch on; Message says it for people.
type Reason string

// The reasons, in the order the documentation lists them.
const (
	ReasonPlaybookFailed     Reason = "playbook_failed"
	ReasonHostsUnreachable   Reason = "hosts_unreachable"
	ReasonCommandFailed      Reason = "command_failed"
	ReasonQuotaExceeded      Reason = "quota_exceeded"
	ReasonCapacityTimeout    Reason = "capacity_timeout"
	ReasonUnschedulable      Reason = "unschedulable"
	ReasonImagePull          Reason = "image_pull"
	ReasonPodRejected        Reason = "pod_rejected"
	ReasonAdmissionTimeout   Reason = "admission_timeout"
	ReasonNodeStartFailed    Reason = "node_start_failed"
	ReasonStartFailed        Reason = "start_failed"
	ReasonStartTimeout       Reason = "start_timeout"
	ReasonEvicted            Reason = "evicted"
	ReasonPodDeleted         Reason = "pod_deleted"
	ReasonNodeLost           Reason = "node_lost"
	ReasonOOMKilled          Reason = "oom_killed"
	ReasonStreamLost         Reason = "stream_lost"
	ReasonBundleFailed       Reason = "bundle_failed"
	ReasonResultUnreadable   Reason = "result_unreadable"
	ReasonCleanupFailed      Reason = "cleanup_failed"
	ReasonTimeout            Reason = "timeout"
	ReasonCanceled           Reason = "canceled"
	ReasonClusterUnavailable Reason = "cluster_unavailable"
	ReasonHostListFailed     Reason = "host_list_failed"
	ReasonHostsChanged       Reason = "hosts_changed"
	ReasonSlicesMixed        Reason = "slices_mixed"
	ReasonOther              Reason = "other"
)

// ReasonDoc is a reason and what it means, for the documentation.
type ReasonDoc struct {
	Reason  Reason
	Meaning string
	// Retried marks a launch failure that launch_retries retries with a
	// fresh pod: one that a new pod of the same spec can get past.
	Retried bool
}

// Reasons lists every reason a run records, in order.
var Reasons = []ReasonDoc{
	{ReasonPlaybookFailed, "Tasks failed (status `failed`).", false},
	{ReasonHostsUnreachable, "Every failure was an unreachable host (status `failed`).", false},
	{ReasonCommandFailed, "The `command` exited non-zero (status `failed`).", false},
	{ReasonQuotaExceeded, "The namespace's ResourceQuota refused the pod past `pod_pending_timeout`.", false},
	{ReasonCapacityTimeout, "The pod waited for a node past `pod_pending_timeout`.", false},
	{ReasonUnschedulable, "No node can ever hold the pod and no autoscaler said within 20 seconds it adds one, or nodes refused it past `pod_pending_timeout`.", false},
	{ReasonImagePull, "The image cannot be pulled.", false},
	{ReasonPodRejected, "The API server, a webhook or the kubelet refused the pod or its container.", false},
	{ReasonAdmissionTimeout, "An admission webhook did not answer in time.", true},
	{ReasonNodeStartFailed, "The node could not start the pod.", true},
	{ReasonStartFailed, "The container exited before the run began.", false},
	{ReasonStartTimeout, "The pod was scheduled but did not start within `pod_pending_timeout`.", false},
	{ReasonEvicted, "The pod was evicted or preempted.", true},
	{ReasonPodDeleted, "The pod was deleted by someone else.", true},
	{ReasonNodeLost, "The pod's node stopped answering or went away.", true},
	{ReasonOOMKilled, "A process exceeded the container's memory limit (status `failed`).", false},
	{ReasonStreamLost, "The provider and the pod lost each other past `disconnect_grace_period`, or the run's files went.", false},
	{ReasonBundleFailed, "The run could not start in the pod (missing `sh`, `head`, `tar` or `mkfifo`, a bad bundle, a project file changed while sent).", false},
	{ReasonResultUnreadable, "The result could not be read, or was not strict JSON.", false},
	{ReasonCleanupFailed, "The pod could not be deleted (status `error`).", false},
	{ReasonTimeout, "The run passed its `timeouts`.", false},
	{ReasonCanceled, "Terraform was interrupted (status `canceled`).", false},
	{ReasonClusterUnavailable, "The cluster could not be reached, or refused the credential.", false},
	{ReasonHostListFailed, "A sliced or rerun run could not list its hosts, or a host name cannot be targeted exactly.", false},
	{ReasonHostsChanged, "The slices saw different host lists (a dynamic inventory changed); status `error`.", false},
	{ReasonSlicesMixed, "The slices failed for different reasons; see `slice_results`.", false},
	{ReasonOther, "Any other cause; the message says which.", false},
}

// reasoned is an error with its reason.
type reasoned struct {
	reason Reason
	err    error
}

func (e *reasoned) Error() string { return e.err.Error() }
func (e *reasoned) Unwrap() error { return e.err }

// because gives err its reason; the outermost reason wins.
func because(r Reason, err error) error {
	if err == nil {
		return nil
	}
	return &reasoned{reason: r, err: err}
}

// ReasonOf is the reason err carries, ReasonOther when it carries none.
func ReasonOf(err error) Reason {
	var r *reasoned
	var lost *NodeLostError
	switch {
	case errors.As(err, &r):
		return r.reason
	case errors.As(err, &lost):
		return ReasonNodeLost
	case errors.Is(err, context.DeadlineExceeded):
		return ReasonTimeout
	case errors.Is(err, context.Canceled):
		return ReasonCanceled
	}
	return ReasonOther
}

// CanPass reports a launch failure that a fresh pod can get past (see
// Reasons' Retried): the pod was evicted or deleted, or its node lost,
// before it ran; the node could not start it; an admission webhook timed
// out. Missing images, refused specs and unschedulable pods cannot pass: a
// new pod of the same spec meets them again.
func CanPass(err error) bool {
	r := ReasonOf(err)
	return slices.ContainsFunc(Reasons, func(d ReasonDoc) bool { return d.Reason == r && d.Retried })
}

// exitReason is why a run whose playbook or command ran exited non-zero:
// its hosts' counts tell a failed task from hosts that were all
// unreachable.
func exitReason(command bool, res Result) Reason {
	switch {
	case command:
		return ReasonCommandFailed
	case res.HostCounts.Failed == 0 && res.HostCounts.Unreachable > 0:
		return ReasonHostsUnreachable
	}
	return ReasonPlaybookFailed
}

// lostReason is the reason of a pod the cluster took away before or while
// it ran: evicted or preempted, its node lost or shut down, refused by the
// kubelet's admission; "" for a pod that was not taken away.
func lostReason(p *corev1.Pod) Reason {
	switch p.Status.Reason {
	case "Evicted":
		return ReasonEvicted
	case "UnexpectedAdmissionError":
		return ReasonNodeStartFailed
	case "NodeLost", "Shutdown", "NodeShutdown", "Terminated":
		return ReasonNodeLost
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			if c.Reason == "DeletionByTaintManager" {
				return ReasonNodeLost
			}
			return ReasonEvicted
		}
	}
	return ""
}

// oomKilled reports a pod whose container the kernel killed at its memory
// limit.
func oomKilled(p *corev1.Pod, container string) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != container {
			continue
		}
		for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
			if t != nil && t.Reason == "OOMKilled" {
				return true
			}
		}
	}
	return false
}
