// Package runner runs one bundle in one ephemeral pod: it creates the pod
// (waiting, watching, while the namespace's quota is full), waits with a
// watch until it runs (failing fast on image and configuration errors, and
// launching a fresh pod, up to Spec.LaunchRetries times, when the launch
// failed for a reason that can pass), streams the bundle in over exec stdin,
// collects the result, and deletes the pod whatever happened, waiting until
// it is gone.
package runner

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/outputtail"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/waitfor"
)

// The statuses of a run.
const (
	StatusSuccessful = "successful"
	StatusFailed     = "failed"
	StatusError      = "error"
	StatusCanceled   = "canceled"
)

// Runner runs bundles with one cluster's clients.
type Runner struct {
	Config *rest.Config
	Kube   kubernetes.Interface
	// Log receives progress messages, at debug level but for why a pod
	// waits to be scheduled (info); nil discards them.
	Log func(level slog.Level, msg string, fields map[string]any)
}

// Spec is one run.
type Spec struct {
	// Pod is the rendered pod; its namespace must be set, and its name or
	// generateName.
	Pod *corev1.Pod
	// Claimed, when set, is a running pod that the run took from its
	// group's warm pool: the run execs in it instead of launching Pod, and
	// deletes it afterwards like a pod of its own.
	Claimed *corev1.Pod
	// Held marks Claimed as a held node's pod (kubeplay_node), which the
	// run leaves in place whatever happens.
	Held bool
	// DeleteAsync ends the run once its pod's deletion is accepted, without
	// waiting until the pod is gone.
	DeleteAsync bool
	// Container hosts the shell the bundle runs in.
	Container string
	Bundle    bundle.Bundle
	// Secrets are redacted from the output.
	Secrets []string
	// OutputLimit bounds the kept output tail in bytes.
	OutputLimit int
	// PendingTimeout bounds waiting for quota and for the pod to start.
	PendingTimeout time.Duration
	// KeepPodOnFailure leaves a failed or errored run's pod for inspection.
	KeepPodOnFailure bool
	// LaunchRetries is how many fresh pods the run may launch after the
	// first when a launch fails for a reason that can pass (see
	// CanPass); each gets a pending timeout of its own.
	LaunchRetries int
	// OnLaunchRetry is told of each failed launch that is retried, before
	// the retry; attempt counts from 1.
	OnLaunchRetry func(attempt int, err error)
	// OnLine receives each output line, redacted, as it arrives.
	OnLine func(line string)
	// OnEvent, when set, is told of the pod's progress as the waits see it:
	// created, scheduled, running.
	OnEvent func(event string)
	// OnCreated, when set, gets each pod the run creates as the create
	// returned it, before the wait for it to run; its error ends the launch
	// (a held node's pod is signed here, while its spec is the one created).
	OnCreated func(ctx context.Context, pod *corev1.Pod) error
	// Timeline, when set, is the run's timeline so far (the engine's
	// queue and claims); the runner goes on with it. Nil starts one.
	Timeline *Timeline
}

// event tells s.OnEvent, if set.
func (s Spec) event(format string, args ...any) {
	if s.OnEvent != nil {
		s.OnEvent(fmt.Sprintf(format, args...))
	}
}

// Result is what a run recorded.
type Result struct {
	Status     string
	ExitCode   int
	Hosts      map[string]bundle.HostStats
	HostCount  int64 // all the result's hosts; Hosts keeps at most bundle.MaxHosts
	HostCounts bundle.HostCounts
	// FailedHosts are the hosts that failed or were unreachable, at most
	// bundle.MaxFailedHosts.
	FailedHosts map[string]bundle.HostStats
	Output      string
	PodName     string
	NodeName    string
	StartedAt   time.Time
	FinishedAt  time.Time
	// ResultAt is when the run's exec ended, before the pod's clean-up.
	ResultAt time.Time
	// Message explains an error status, or is the cause of a canceled one
	// (such as "context canceled"), so that a caller says "canceled" once.
	Message string
	// Reason says why a run did not succeed; empty when it did.
	Reason Reason
	// Events are the pod's last warning events, for error diagnostics.
	Events []string
	// PodKept is set when the pod was left in place.
	PodKept bool
	// LaunchAttempts counts the pods the run launched (created, or tried
	// to): 1, plus one per retry and one per pod a node's kubelet refused
	// for want of room; 0 when it never tried.
	LaunchAttempts int
	// Timeline is where the run's time went, from StartedAt to FinishedAt.
	Timeline []Step
	// Warm marks a run in a warm pod of its group's pool.
	Warm bool
	// Err is the error behind an error status, for callers that tell a
	// rejected credential or an unreachable cluster from other causes.
	Err error

	// FailedTasks, FailedTaskCount and Artifacts are the bundle.Result's,
	// redacted as Output is.
	FailedTasks     []bundle.FailedTask
	FailedTaskCount int64
	Artifacts       string
	// Check is the bundle.Result's, redacted as Output is; nil but for a
	// run in check mode.
	Check *bundle.Check
	// NotOKHosts names every host that failed or was unreachable, not
	// redacted: the list a re-run of only those hosts targets.
	NotOKHosts []string
	// HostList says the run listed its hosts before the playbook (slices,
	// or a re-run): HostsTotal and HostsSHA256 are the whole list's count
	// and digest, SliceHosts how many of them this run targeted.
	HostList               bool
	HostsTotal, SliceHosts int64
	HostsSHA256            string
}

// Run runs s. Every outcome is a Result: status successful or failed for a
// playbook that ran, error when the run could not happen, canceled when ctx
// ended first.
func (r *Runner) Run(ctx context.Context, s Spec) Result {
	res := Result{StartedAt: time.Now().UTC(), ExitCode: -1}
	if s.Timeline == nil {
		first := StepCreate
		if s.Claimed != nil {
			first = StepClaim
		}
		s.Timeline = NewTimeline(first, res.StartedAt)
	}
	res.StartedAt = s.Timeline.Started().UTC() // the run began with its queue, not with its pod
	pod := s.Claimed
	if pod != nil {
		res.PodName = pod.Name
		what := "warm pod"
		if s.Held {
			what = "held node"
		}
		res.Warm = !s.Held
		if s.Timeline.Current() != StepClaim {
			s.Timeline.Begin(StepClaim, time.Now())
		}
		s.Timeline.Note(StepClaim, fmt.Sprintf("%s %s", what, pod.Name))
		r.log("the run uses a "+what, map[string]any{"namespace": pod.Namespace, "pod": pod.Name})
		s.event("%s %s/%s taken", what, pod.Namespace, pod.Name)
	} else {
		var err error
		if pod, err = r.launch(ctx, s, &res); err != nil {
			return r.finish(ctx, s, res, pod, err)
		}
	}
	res.NodeName = pod.Spec.NodeName
	r.log("run pod running", map[string]any{"pod": pod.Name, "node": pod.Spec.NodeName})

	s.Timeline.Begin(StepDeliver, time.Now())
	out := outputtail.New(outputtail.Options{Limit: s.OutputLimit, Secrets: s.Secrets, OnLine: s.OnLine})
	errs := outputtail.New(outputtail.Options{Limit: 8 << 10, Secrets: s.Secrets, OnLine: s.OnLine})
	f, err := newFollower(r, s, pod, out, errs)
	if err != nil {
		return r.finish(ctx, s, res, pod, err)
	}
	result, err := f.follow(ctx)
	if err == nil && ctx.Err() != nil {
		err = ctx.Err() // the result of a canceled run: the playbook was ended part way
	}
	res.ResultAt = time.Now().UTC()
	r.log("run followed to its end", map[string]any{"pod": pod.Name, "bytes": f.position(), "lost": f.lost})
	_ = out.Close()
	_ = errs.Close()
	res.Output = out.String()
	if err != nil {
		return r.finish(ctx, s, res, pod, err)
	}
	if result.Abandoned {
		res.ExitCode = result.ExitCode
		return r.finish(ctx, s, res, pod, because(ReasonStreamLost, fmt.Errorf("pod %s ended the run: it did not hear from the "+
			"provider for longer than the run's disconnect grace period (%s)", pod.Name, f.grace)))
	}
	if result.StatsErr != nil {
		// Any process of the run can write the stats: a run is successful
		// or failed on its exit code only with stats kubeplay could read.
		res.ExitCode = result.ExitCode
		return r.finish(ctx, s, res, pod, because(ReasonResultUnreadable, fmt.Errorf("the run in pod %s exited with code %d, "+
			"but %w; no host stats, failed tasks, artifacts or check are recorded. Do not write to $KUBEPLAY_STATS_FILE "+
			"from the playbook", pod.Name, result.ExitCode, result.StatsErr)))
	}
	res.ExitCode, res.Hosts, res.HostCount = result.ExitCode, redactHosts(result.Hosts, s.Secrets), result.HostCount
	res.HostCounts, res.FailedHosts = result.HostCounts, redactHosts(result.FailedHosts, s.Secrets)
	res.FailedTasks, res.FailedTaskCount, res.Artifacts = redactResult(result, s.Secrets)
	res.Check = redactCheck(result.Check, s.Secrets)
	res.HostList, res.HostsTotal, res.HostsSHA256, res.SliceHosts = result.HostList, result.HostsTotal, result.HostsSHA256, result.SliceHosts
	res.NotOKHosts = result.NotOKHosts
	listed := s.Bundle.Slices > 1 || s.Bundle.OnlyHosts != nil
	switch {
	case listed && res.ExitCode == bundle.ExitHostList:
		// The script's own exit: the playbook did not run.
		return r.finish(ctx, s, res, pod, because(ReasonHostListFailed, fmt.Errorf("the run in pod %s could not list "+
			"its hosts before the playbook: its output says why", pod.Name)))
	case listed && res.ExitCode == bundle.ExitHostsChanged:
		return r.finish(ctx, s, res, pod, because(ReasonHostsChanged, fmt.Errorf("the inventory's hosts in pod %s are "+
			"not those the run's other slices saw (a dynamic inventory changed): its playbook did not run", pod.Name)))
	case res.ExitCode == 0:
		res.Status = StatusSuccessful
	default:
		res.Status, res.Reason = StatusFailed, exitReason(len(s.Bundle.Command) > 0, res)
		if result.OOMKills > 0 {
			res.Reason = ReasonOOMKilled
		}
	}
	return r.finish(ctx, s, res, pod, nil)
}

// launch creates the run's pod and waits until it runs. While a launch
// fails for a reason that can pass and retries are left, it deletes the
// pod, waiting until it is gone so that its quota is free, and launches a
// fresh one. The pod it returns with an error is the last attempt's, nil
// when that one was not created.
func (r *Runner) launch(ctx context.Context, s Spec, res *Result) (*corev1.Pod, error) {
	// Pods the node's kubelet refused for want of room: a full node, which
	// the run waits out within the pending timeout, not a launch retry.
	refused, roomBy := 0, time.Now().Add(s.PendingTimeout)
	for {
		res.LaunchAttempts++
		res.PodName = ""
		if s.Timeline.Current() != StepCreate || res.LaunchAttempts > 1 {
			s.Timeline.Begin(StepCreate, time.Now())
		}
		if res.LaunchAttempts > 1 {
			s.Timeline.Note(StepCreate, fmt.Sprintf("launch attempt %d", res.LaunchAttempts))
		}
		pod, err := r.create(ctx, s)
		if err == nil {
			s.Timeline.Begin(StepSchedule, time.Now())
			res.PodName = pod.Name
			r.log("run pod created", map[string]any{"namespace": pod.Namespace, "pod": pod.Name, "attempt": res.LaunchAttempts})
			s.event("pod %s/%s created (launch attempt %d)", pod.Namespace, pod.Name, res.LaunchAttempts)
			if s.OnCreated != nil {
				if err = s.OnCreated(ctx, pod); err != nil {
					return pod, err
				}
			}
			pod, err = r.waitRunning(ctx, s, pod)
		}
		if nr := (noRoom{}); err != nil && ctx.Err() == nil && errors.As(err, &nr) && pod != nil {
			wait := min(refusedBackoff<<min(refused, 4), time.Until(roomBy))
			if wait <= 0 {
				return pod, because(ReasonUnschedulable, fmt.Errorf("%w; no node had room for the run within the pending timeout of %s", err, s.PendingTimeout))
			}
			refused++
			if derr := DeletePod(ctx, r.Kube, pod.Namespace, pod.Name, pod.UID); derr != nil {
				return pod, fmt.Errorf("%w; deleting pod %s before launching another failed: %v", err, pod.Name, derr)
			}
			r.log("the node's kubelet refused the run pod for want of room; launching another", map[string]any{
				"namespace": pod.Namespace, "pod": pod.Name, "node": nr.node, "reason": nr.reason, "wait": wait.String()})
			s.event("pod %s refused by node %s (%s): waiting for room, then launching another", pod.Name, nr.node, nr.reason)
			s.Timeline.Note(StepSchedule, fmt.Sprintf("refused by node %s: %s", nr.node, nr.reason))
			select {
			case <-ctx.Done():
				return pod, ctx.Err()
			case <-time.After(wait):
			}
			continue
		}
		if err == nil || ctx.Err() != nil || !CanPass(err) {
			return pod, err
		}
		if res.LaunchAttempts-refused > s.LaunchRetries {
			if s.LaunchRetries > 0 {
				err = fmt.Errorf("%w (launch attempt %d of %d)", err, res.LaunchAttempts-refused, s.LaunchRetries+1)
			}
			return pod, err
		}
		if pod != nil {
			if derr := DeletePod(ctx, r.Kube, pod.Namespace, pod.Name, pod.UID); derr != nil {
				return pod, fmt.Errorf("%w; deleting pod %s before a retry failed: %v", err, pod.Name, derr)
			}
		}
		if s.OnLaunchRetry != nil {
			s.OnLaunchRetry(res.LaunchAttempts, err)
		}
	}
}

// Start launches s.Pod and waits until it runs, as Run does, and leaves it
// running: a held node's pod. A pod that did not start is deleted.
func (r *Runner) Start(ctx context.Context, s Spec) (*corev1.Pod, error) {
	var res Result
	pod, err := r.launch(ctx, s, &res)
	if err != nil && pod != nil {
		cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		if derr := DeletePod(cleanup, r.Kube, pod.Namespace, pod.Name, pod.UID); derr != nil {
			err = fmt.Errorf("%w; deleting pod %s failed: %v", err, pod.Name, derr)
		}
	}
	return pod, err
}

// schedulerSays is the scheduler's message without its final periods (its
// condition's has two), for kubeplay's sentences to end.
func schedulerSays(msg string) string {
	return strings.TrimRight(strings.TrimSpace(msg), ".")
}

// timeoutMessage says that a run ran out of its timeout and in which step,
// with what that step waited for: client-go's "timed out waiting for the
// condition" says neither.
func timeoutMessage(tl *Timeline, err error) string {
	msg := "the run did not finish within its timeout"
	if st, ok := tl.CurrentStep(); ok && st.Name != StepCleanup {
		msg += "; it ended in its " + st.Name + " step"
		if st.Detail != "" {
			msg += " (" + st.Detail + ")"
		}
	}
	if wait.Interrupted(err) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return msg
	}
	return msg + ": " + err.Error()
}

// finish classifies err, then deletes the pod with a context of its own so
// that a canceled apply still cleans up.
func (r *Runner) finish(ctx context.Context, s Spec, res Result, pod *corev1.Pod, err error) Result {
	switch {
	case err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		// The caller's timeout (the run's create timeout) is not a cancel.
		res.Status, res.Message, res.Reason = StatusError, timeoutMessage(s.Timeline, err), ReasonTimeout
	case err != nil && ctx.Err() != nil:
		res.Status, res.Message, res.Reason = StatusCanceled, context.Cause(ctx).Error(), ReasonCanceled
	case err != nil:
		res.Status, res.Message, res.Err, res.Reason = StatusError, err.Error(), err, ReasonOf(err)
	}
	if s.Timeline.Current() != StepCleanup {
		s.Timeline.Begin(StepCleanup, time.Now())
	}
	cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	if pod != nil && s.Claimed == nil {
		r.splitImage(cleanup, s.Timeline, pod)
	}
	if pod != nil && res.Status == StatusError {
		res.Events = warningEvents(cleanup, r.Kube, pod)
	}
	if pod != nil && !s.Held { // a held node outlives its runs
		if s.KeepPodOnFailure && (res.Status == StatusFailed || res.Status == StatusError) {
			res.PodKept = true
		} else if lost := (*NodeLostError)(nil); errors.As(err, &lost) {
			r.deleteOnLostNode(cleanup, &res, pod, lost)
		} else {
			del := DeletePod
			if s.DeleteAsync {
				del = requestDelete
			}
			if derr := del(cleanup, r.Kube, pod.Namespace, pod.Name, pod.UID); derr != nil {
				res.Message = strings.TrimSpace(res.Message + "; deleting pod " + pod.Name + " failed: " + derr.Error())
				if res.Status == StatusSuccessful || res.Status == StatusFailed {
					res.Status, res.Reason = StatusError, ReasonCleanupFailed
				}
			}
		}
	}
	res.FinishedAt = time.Now().UTC()
	res.Timeline = s.Timeline.End(res.FinishedAt)
	return res
}

// vanished says how the pod disappeared, and why, or "" when it is still
// there and its container was not killed for its memory.
func (r *Runner) vanished(ctx context.Context, pod *corev1.Pod, container string) (string, Reason) {
	p, err := r.Kube.CoreV1().Pods(pod.Namespace).Get(context.WithoutCancel(ctx), pod.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "was deleted", ReasonPodDeleted
	case err == nil && pod.UID != "" && p.UID != pod.UID:
		return "was deleted (another pod has its name now)", ReasonPodDeleted
	case err == nil && oomKilled(p, container):
		return "was killed for using more memory than its limit (OOMKilled)", ReasonOOMKilled
	case err == nil && p.Status.Phase == corev1.PodFailed && lostPod(p):
		return "failed (" + p.Status.Reason + ")", lostReason(p)
	case err == nil && p.DeletionTimestamp != nil:
		return "was deleted (terminating)", ReasonPodDeleted
	case err == nil && p.Status.Phase == corev1.PodFailed && p.Status.Reason == reasonDeadline:
		return "reached its activeDeadlineSeconds (the run's timeout)", ReasonTimeout
	case err == nil && p.Status.Phase == corev1.PodFailed:
		return "failed (" + p.Status.Reason + ")", ReasonOther
	}
	return "", ""
}

// createReason is why the API server refused a run pod: the pod, or the
// cluster.
func createReason(err error) Reason {
	switch {
	case transient(err) || apierrors.IsUnauthorized(err):
		return ReasonClusterUnavailable
	case apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) || apierrors.IsAlreadyExists(err):
		return ReasonPodRejected
	}
	return ReasonOther
}

// startFailureReason is the reason of a container waiting for one of
// waitfor.StartFailures.
func startFailureReason(waiting string) Reason {
	if strings.Contains(waiting, "Image") {
		return ReasonImagePull
	}
	return ReasonPodRejected
}

func (r *Runner) log(msg string, f map[string]any) {
	if r.Log != nil {
		r.Log(slog.LevelDebug, msg, f)
	}
}

// info logs what a person waiting for the run wants to know.
func (r *Runner) info(msg string, f map[string]any) {
	if r.Log != nil {
		r.Log(slog.LevelInfo, msg, f)
	}
}

// reasonSandbox is the kubelet's event when it cannot create a pod's sandbox.
const reasonSandbox = "FailedCreatePodSandBox"

// reasonDeadline is the kubelet's reason for a pod it failed at its
// activeDeadlineSeconds.
const reasonDeadline = "DeadlineExceeded"

// workerGaveUp reports a default worker that ended by itself because no run
// had started in it within podspec.WorkerStartTimeout: the runner never
// saw it run (a kubelet that reported the start too late, as one does just
// after a restart), so a fresh pod can get past it.
func workerGaveUp(p *corev1.Pod, container string) bool {
	i := slices.IndexFunc(p.Spec.Containers, func(c corev1.Container) bool { return c.Name == container })
	if i < 0 || !slices.Equal(p.Spec.Containers[i].Args, podspec.WorkerArgs) {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; cs.Name == container && t != nil {
			return t.ExitCode == 0 && !t.StartedAt.IsZero() &&
				t.FinishedAt.Sub(t.StartedAt.Time) >= podspec.WorkerStartTimeout-time.Second
		}
	}
	return false
}

// gaveUp says why a worker that gave up ended, and what helps.
func gaveUp(err error) error {
	return fmt.Errorf("%w; its worker waited %s for the run and ended because the node reported the pod running only "+
		"later (a kubelet that restarted or is overloaded): a fresh pod is launched within the group's launch_retries, "+
		"which may be raised if this recurs", err, podspec.WorkerStartTimeout)
}

// startInterrupted reports a container whose start the node itself broke
// off: the runtime's StartError with a canceled context, as when the
// kubelet is stopped while it starts the container (the soak's
// kubelet_restart). Its process never ran, so a fresh pod can get past it;
// other StartErrors (a missing executable) would fail again.
func startInterrupted(p *corev1.Pod, container string) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; cs.Name == container && t != nil && t.Reason == "StartError" {
			return strings.Contains(t.Message, "context canceled") || strings.Contains(t.Message, "context deadline exceeded")
		}
	}
	return false
}

func interrupted(err error) error {
	return fmt.Errorf("%w; the node broke off the container's start (a kubelet that restarted): a fresh pod is launched "+
		"within the group's launch_retries, which may be raised if this recurs", err)
}

// lostPod reports a pod that failed because its node or the cluster took it
// away, not because of what it runs.
func lostPod(p *corev1.Pod) bool { return lostReason(p) != "" }

// webhookTimeout reports an admission webhook that did not answer in time.
func webhookTimeout(err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "failed calling webhook") &&
		(strings.Contains(msg, "deadline exceeded") || strings.Contains(msg, "timeout") || strings.Contains(msg, "timed out"))
}

// sandboxFailed reports a pod whose warning events say the kubelet could
// not create its sandbox.
func sandboxFailed(ctx context.Context, kube kubernetes.Interface, pod *corev1.Pod) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	events, err := podEvents(ctx, kube, pod, fields.OneTermEqualSelector("reason", reasonSandbox))
	return err == nil && slices.ContainsFunc(events, func(e corev1.Event) bool { return e.Reason == reasonSandbox })
}

// podEvents lists the events of pod (by name, and by uid when it has one)
// that also match sel, as the API server's cache has them; the items are
// checked again, for a server that ignores a field selector.
func podEvents(ctx context.Context, kube kubernetes.Interface, pod *corev1.Pod, sel fields.Selector) ([]corev1.Event, error) {
	list, err := kube.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: podEventSelector(pod, sel).String(), ResourceVersion: "0",
	})
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(list.Items, func(e corev1.Event) bool {
		return e.InvolvedObject.Name != pod.Name || pod.UID != "" && e.InvolvedObject.UID != pod.UID
	}), nil
}

// podEventSelector selects the events of pod (by name, and by UID once it
// has one) that sel selects.
func podEventSelector(pod *corev1.Pod, sel fields.Selector) fields.Selector {
	terms := []fields.Selector{fields.OneTermEqualSelector("involvedObject.name", pod.Name), sel}
	if pod.UID != "" {
		terms = append(terms, fields.OneTermEqualSelector("involvedObject.uid", string(pod.UID)))
	}
	return fields.AndSelectors(terms...)
}

// create creates the pod; while the namespace's quota refuses it (full, or
// conflicts that outlasted createOnce's resends), it waits for a change of
// the quotas, watching, up to the pending timeout. Between changes it tries
// again after a recheck that doubles from 1 s to 16 s, for a refusal the
// admission's lagging quota cache made after the change.
func (r *Runner) create(ctx context.Context, s Spec) (*corev1.Pod, error) {
	ns := s.Pod.Namespace
	pending, cancel := context.WithTimeout(ctx, s.PendingTimeout)
	defer cancel()
	room := waitfor.QuotaWait{Kube: r.Kube, Namespace: ns}
	for {
		pod, err := r.createOnce(ctx, s.Pod)
		if err == nil {
			return pod, nil
		}
		if webhookTimeout(err) {
			return nil, because(ReasonAdmissionTimeout, fmt.Errorf("creating the run pod in namespace %s: an admission webhook timed out: %w", ns, err))
		}
		cause, remedy := "had no capacity for the run", "Raise the namespace's ResourceQuota, lower the group's max_concurrent_runs, or raise pod_pending_timeout"
		if waitfor.QuotaConflict(err) {
			cause, remedy = "refused the run pod with conflicts of its ResourceQuota (other pods' creates updating it at the same time)",
				"Lower the group's max_concurrent_runs, or raise pod_pending_timeout"
		} else if !waitfor.QuotaExceeded(err) {
			return nil, because(createReason(err), fmt.Errorf("creating the run pod in namespace %s: %w", ns, err))
		}
		r.log("namespace quota refused the run pod; waiting for it to change", map[string]any{"namespace": ns, "reason": err.Error()})
		s.Timeline.Note(StepCreate, "waited for the namespace's ResourceQuota: "+err.Error())
		if werr := room.Wait(pending); werr != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, because(ReasonQuotaExceeded, fmt.Errorf("namespace %s %s within the pending timeout of %s: %w. %s",
				ns, cause, s.PendingTimeout, err, remedy))
		}
	}
}

// createMark is the annotation that tells the pod one createOnce made: a
// random value that nobody can know before the pod exists.
const createMark = "kubeplay.io/create"

// errNameTaken: the chosen name was another pod's; a new one is tried.
var errNameTaken = errors.New("the run pod's name was taken")

// createBackoff spans about 30 s, as deleteBackoff: an API server restart.
var createBackoff = deleteBackoff

// createOnce creates pod, trying again while the API server cannot be
// reached (restarting, or a connection cut): a run not started yet lives
// through what a started one does. The name is chosen here, not by the
// server, so that a create whose connection broke after it was sent is sent
// again under the same name: the server refuses a second pod, and the pod
// of that name is the one made only when it carries this create's mark.
// A pod creator can add pods that copy the labels and the mark, never one of
// that name, so the retry is never given another's pod; a name taken before
// the first create (or by a pod without the mark) is left for a new one.
func (r *Runner) createOnce(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	pod = pod.DeepCopy()
	mark := rand.Text()
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[createMark] = mark
	generated := pod.Name == ""
	name := func() {
		if generated {
			// 13 random characters of base32: the server's generateName
			// takes 5 of a 27-letter alphabet, guessable to a creator.
			pod.Name = pod.GenerateName + strings.ToLower(rand.Text()[:13])
		}
	}
	name()
	pods := r.Kube.CoreV1().Pods(pod.Namespace)
	var created *corev1.Pod
	sent := false
	// A webhook's timeout is the launch's to retry, with a fresh pod; a lost
	// race in quota admission is sent again (nothing was made).
	again := func(err error) bool {
		return ctx.Err() == nil && (errors.Is(err, errNameTaken) || waitfor.QuotaConflict(err) || transient(err) && !webhookTimeout(err))
	}
	send := func() error {
		p, err := pods.Create(ctx, pod, metav1.CreateOptions{})
		if err == nil {
			created = p
			return nil
		}
		if apierrors.IsAlreadyExists(err) {
			if sent {
				got, gerr := pods.Get(ctx, pod.Name, metav1.GetOptions{})
				if gerr != nil {
					return gerr
				}
				if got.Annotations[createMark] == mark {
					created = got
					r.log("run pod found after its create's connection broke", map[string]any{"namespace": pod.Namespace, "pod": got.Name})
					return nil
				}
			}
			if !generated {
				return err
			}
			// Not this create's pod: a new name, sent afresh.
			r.log("a pod of the run pod's name exists; trying another name", map[string]any{"namespace": pod.Namespace, "pod": pod.Name})
			name()
			sent = false
			return fmt.Errorf("%w: %w", errNameTaken, err)
		}
		// A refused connection sent nothing.
		sent = sent || !utilnet.IsConnectionRefused(err)
		if again(err) {
			r.log("creating the run pod failed; trying again", map[string]any{"namespace": pod.Namespace, "error": err.Error()})
		}
		return err
	}
	pace := kubeclient.NewRetry(createBackoff)
	for {
		err := send()
		if err == nil || !pace.AgainIf(ctx, again(err)) {
			return created, err
		}
	}
}

func podListWatch(kube kubernetes.Interface, ns, name string) cache.ListerWatcher {
	return waitfor.Named(kube.CoreV1().Pods(ns), name)
}

// waitRunning watches the pod until its container runs; image and
// configuration errors end the wait at once. A pod the scheduler has not
// placed waits, within the pending timeout, while room on a node, a
// preemption or an autoscaler's new node can place it, and fails once none
// can (see scheduling).
func (r *Runner) waitRunning(ctx context.Context, s Spec, pod *corev1.Pod) (*corev1.Pod, error) {
	pending, cancel := context.WithTimeout(ctx, s.PendingTimeout)
	defer cancel()
	wctx, fail := context.WithCancelCause(pending)
	defer fail(nil)
	sched := &scheduling{r: r, s: s, ctx: wctx, fail: fail, deadline: time.Now().Add(s.PendingTimeout)}
	defer sched.stopAutoscaler()
	var last *corev1.Pod
	scheduled := false
	_, err := waitfor.UntilPresent(wctx, podListWatch(r.Kube, pod.Namespace, pod.Name), &corev1.Pod{},
		func(ev watch.Event) (bool, error) {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				return false, nil
			}
			last = p
			if ev.Type == watch.Deleted || p.DeletionTimestamp != nil {
				return false, because(ReasonPodDeleted, fmt.Errorf("pod %s was deleted before it ran", p.Name))
			}
			if !scheduled && p.Spec.NodeName != "" {
				scheduled = true
				sched.stopAutoscaler()
				s.Timeline.Begin(StepSandbox, time.Now())
				s.event("pod %s scheduled on node %s", p.Name, p.Spec.NodeName)
			}
			done, err := runningOrFailed(p, s.Container)
			if u := (unplaced{}); errors.As(err, &u) {
				sched.observe(p, u)
				return false, nil
			}
			if done {
				s.event("pod %s running", p.Name)
			}
			return done, err
		}, because(ReasonPodDeleted, fmt.Errorf("pod %s was deleted before it ran", pod.Name)))
	if last == nil {
		last = pod
	}
	if f := sched.failure(); f != nil {
		return last, f
	}
	if err != nil {
		if wait.Interrupted(err) || errors.Is(err, context.DeadlineExceeded) {
			if ctx.Err() == nil {
				err = because(ReasonStartTimeout, fmt.Errorf("pod %s did not start within the pending timeout of %s (%s)", last.Name, s.PendingTimeout, describe(last)))
				if last.Spec.NodeName == "" {
					if t := sched.timedOut(last.Name, s.PendingTimeout); t != nil {
						err = t
					}
				}
				if sandboxFailed(ctx, r.Kube, last) {
					// The kubelet could not create the pod's sandbox (network, runtime): another pod may get one.
					err = because(ReasonNodeStartFailed, fmt.Errorf("%w: its sandbox could not be created (%s)", err, reasonSandbox))
				}
				return last, err
			}
		}
		return last, err
	}
	return last, nil
}

func runningOrFailed(p *corev1.Pod, container string) (bool, error) {
	switch p.Status.Phase {
	case corev1.PodFailed, corev1.PodSucceeded:
		err := fmt.Errorf("pod %s ended (%s) before the run: %s", p.Name, p.Status.Phase, describe(p))
		if refusedForRoom(p) {
			return false, because(ReasonUnschedulable, noRoom{err: err, node: p.Spec.NodeName, reason: p.Status.Reason})
		}
		if workerGaveUp(p, container) {
			return false, because(ReasonNodeStartFailed, gaveUp(err))
		}
		if startInterrupted(p, container) {
			return false, because(ReasonNodeStartFailed, interrupted(err))
		}
		if lostPod(p) {
			return false, because(lostReason(p), err)
		}
		if oomKilled(p, container) {
			return false, because(ReasonOOMKilled, err)
		}
		return false, because(ReasonStartFailed, err)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return false, because(ReasonUnschedulable, unplaced{pod: p.Name, message: schedulerSays(c.Message), nominated: p.Status.NominatedNodeName})
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && slices.Contains(waitfor.StartFailures, w.Reason) {
			return false, because(startFailureReason(w.Reason), fmt.Errorf("container %s of pod %s cannot start: %s: %s", cs.Name, p.Name, w.Reason, w.Message))
		}
		if t := cs.State.Terminated; t != nil && cs.Name == container {
			err := fmt.Errorf("container %s of pod %s exited before the run (%s, exit %d): %s", cs.Name, p.Name, t.Reason, t.ExitCode, t.Message)
			if workerGaveUp(p, container) {
				return false, because(ReasonNodeStartFailed, gaveUp(err))
			}
			if startInterrupted(p, container) {
				return false, because(ReasonNodeStartFailed, interrupted(err))
			}
			if t.Reason == "OOMKilled" {
				return false, because(ReasonOOMKilled, err)
			}
			return false, because(ReasonStartFailed, err)
		}
		if cs.Name == container && cs.State.Running != nil {
			return true, nil
		}
	}
	return false, nil
}

// refusedBackoff is the first wait after a kubelet refused a run pod for
// want of room; it doubles with each refusal, up to 16 times.
var refusedBackoff = time.Second

// noRoom: the node's kubelet refused a pod the scheduler bound to it, for
// want of a resource ("OutOfcpu"): the scheduler's view and the kubelet's
// differ for a moment, as after a kubelet restart that admits another pod
// first. Nothing of the pod ran.
type noRoom struct {
	err          error
	node, reason string
}

func (e noRoom) Error() string { return e.err.Error() }
func (e noRoom) Unwrap() error { return e.err }

// refusedForRoom reports a pod that the kubelet's admission failed for a
// resource it lacked (lifecycle's "OutOf" reasons) before any container of
// it started.
func refusedForRoom(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodFailed || !strings.HasPrefix(p.Status.Reason, "OutOf") {
		return false
	}
	for _, cs := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
		if cs.State.Running != nil || cs.State.Terminated != nil || cs.LastTerminationState.Terminated != nil {
			return false
		}
	}
	return true
}

func describe(p *corev1.Pod) string {
	parts := []string{"phase " + string(p.Status.Phase)}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			parts = append(parts, fmt.Sprintf("%s waiting: %s %s", cs.Name, w.Reason, w.Message))
		}
	}
	if p.Status.Reason != "" {
		parts = append(parts, p.Status.Reason+": "+p.Status.Message)
	}
	return strings.Join(parts, "; ")
}

func warningEvents(ctx context.Context, kube kubernetes.Interface, pod *corev1.Pod) []string {
	items, err := podEvents(ctx, kube, pod, fields.OneTermEqualSelector("type", corev1.EventTypeWarning))
	if err != nil {
		return nil
	}
	slices.SortFunc(items, func(a, b corev1.Event) int { return a.LastTimestamp.Compare(b.LastTimestamp.Time) })
	var out []string
	for _, e := range items[max(0, len(items)-3):] {
		out = append(out, e.Reason+": "+e.Message)
	}
	return out
}

// deleteBackoff spans about 30 s, long enough for an API server restart.
var deleteBackoff = wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 9, Cap: 5 * time.Second}

// transient reports errors that an API server restart or overload causes.
func transient(err error) bool {
	return kubeclient.Transient(err) || apierrors.IsInternalError(err)
}

// DeletePod deletes the pod of uid called name and waits, watching, until
// it is gone, so that the quota it held is free when this returns. The
// delete carries a UID precondition: a pod that took the name since is
// another's, and is neither deleted nor waited for. An empty uid (a pod
// kubeplay never read) deletes whatever has the name.
func DeletePod(ctx context.Context, kube kubernetes.Interface, ns, name string, uid types.UID) error {
	if err := requestDelete(ctx, kube, ns, name, uid); err != nil {
		return err
	}
	return WaitPodGone(ctx, kube, ns, name, uid)
}

// WaitPodGone waits, watching, until the pod of uid called name is gone
// (see DeletePod).
func WaitPodGone(ctx context.Context, kube kubernetes.Interface, ns, name string, uid types.UID) error {
	return waitfor.GoneUID(ctx, podListWatch(kube, ns, name), &corev1.Pod{}, uid)
}

// requestDelete deletes the pod of uid called name without waiting for it
// to go; a failed UID precondition means it is gone already. An API server
// that is restarting cannot be watched for its return: the delete is
// retried with backoff while the error is one it can recover from.
func requestDelete(ctx context.Context, kube kubernetes.Interface, ns, name string, uid types.UID) error {
	return retry.OnError(deleteBackoff, transient, func() error {
		err := kube.CoreV1().Pods(ns).Delete(ctx, name, managed.DeleteOptions(uid))
		if apierrors.IsNotFound(err) || uid != "" && apierrors.IsConflict(err) {
			return nil
		}
		return err
	})
}
