package runner

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/nodefit"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/waitfor"
)

// AutoscalerGrace is how long a run whose pod no node of the cluster can
// hold waits for a cluster autoscaler to answer on the pod before it fails:
// cluster-autoscaler scans every 10 s and posts TriggeredScaleUp or
// NotTriggerScaleUp after its scan, Karpenter batches pending pods for up to
// 10 s before it posts Nominated. No answer in that time is taken as no
// autoscaler. The pending timeout bounds it.
const AutoscalerGrace = 20 * time.Second

// autoscalerGrace is AutoscalerGrace; unit tests shorten it.
var autoscalerGrace = AutoscalerGrace

// scaleUpMemory is how long a scale-up for another pod of the namespace
// counts as an answer: cluster-autoscaler posts nothing on a pod that fits
// a node it is already adding, which may take its max-node-provision-time
// (15 minutes by default) to join.
const scaleUpMemory = 15 * time.Minute

// The events an autoscaler posts on a pending pod.
const (
	eventTriggeredScaleUp  = "TriggeredScaleUp"
	eventNotTriggerScaleUp = "NotTriggerScaleUp"
	eventNominated         = "Nominated"        // Karpenter's TriggeredScaleUp
	eventFailedScheduling  = "FailedScheduling" // Karpenter's NotTriggerScaleUp, from karpenter
	karpenter              = "karpenter"
)

// answer is an autoscaler's word on a pod: it adds a node for it, or will
// not.
type answer struct {
	scaling              bool
	who, reason, message string
	at                   time.Time
	// pod is the pod the answer was for, when another of the namespace.
	pod string
}

func (a answer) String() string {
	return fmt.Sprintf("%s from %s: %s", a.reason, a.who, a.message)
}

// autoscalerAnswer reads e as an autoscaler's answer: cluster-autoscaler's
// TriggeredScaleUp and NotTriggerScaleUp, Karpenter's Nominated and
// FailedScheduling. The scheduler's own FailedScheduling is no answer.
func autoscalerAnswer(e *corev1.Event) (answer, bool) {
	who := e.Source.Component
	if who == "" {
		who = e.ReportingController
	}
	a := answer{who: who, reason: e.Reason, message: e.Message, at: eventTime(e)}
	switch {
	case e.Reason == eventTriggeredScaleUp, who == karpenter && e.Reason == eventNominated:
		a.scaling = true
	case e.Reason == eventNotTriggerScaleUp, who == karpenter && e.Reason == eventFailedScheduling:
	default:
		return answer{}, false
	}
	if a.who == "" {
		a.who = "the cluster autoscaler"
	}
	return a, true
}

// eventTime is when e last happened.
func eventTime(e *corev1.Event) time.Time {
	t := e.CreationTimestamp.Time
	for _, u := range []time.Time{e.FirstTimestamp.Time, e.LastTimestamp.Time, e.EventTime.Time} {
		if u.After(t) {
			t = u
		}
	}
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	return t
}

// latestAnswer is the newest autoscaler answer among events on the pod of
// uid.
func latestAnswer(events []corev1.Event, uid string) (answer, bool) {
	var last answer
	found := false
	for i := range events {
		e := &events[i]
		if string(e.InvolvedObject.UID) != uid {
			continue
		}
		if a, ok := autoscalerAnswer(e); ok && (!found || !a.at.Before(last.at)) {
			last, found = a, true
		}
	}
	return last, found
}

// scheduling follows a run pod that the scheduler has not placed, for
// waitRunning: it tells why the pod waits, once per change, and decides
// whether waiting can help. A pod that room on a node or a preemption will
// place waits; one that no node of the cluster can ever hold waits only
// while an autoscaler says it adds a node: a watch on the pod's events,
// opened only then, looks for its answer for autoscalerGrace, and the run
// fails when the autoscaler says it will not help or says nothing.
type scheduling struct {
	r        *Runner
	s        Spec
	ctx      context.Context
	fail     context.CancelCauseFunc
	deadline time.Time

	// stopAnswers ends the autoscaler watch; nil while none runs. The pod
	// watch's goroutine alone uses it.
	stopAnswers func()

	mu sync.Mutex
	// message is the scheduler's last, once observed; nominated its node
	// for a preemption.
	message, nominated string
	observed           bool
	// never says why no node can hold the pod; nil while one can, or
	// when that cannot be told.
	never *misfit
	// answer is the autoscaler's last answer; nil before any.
	answer *answer
	// eventsErr is why the pod's events could not be watched.
	eventsErr error
	// stopped is set once the autoscaler watch is told to end: it fails
	// the run no more.
	stopped bool
	failed  error
	said    string
}

// observe takes the scheduler's word u on p, from the pod watch.
func (w *scheduling) observe(p *corev1.Pod, u unplaced) {
	if u.nominated != "" {
		w.stopAutoscaler()
		w.mu.Lock()
		defer w.mu.Unlock()
		w.never, w.message, w.nominated, w.observed = nil, u.message, u.nominated, true
		w.report(fmt.Sprintf("pod %s waits for node %s, where the scheduler preempts lower-priority pods to make room: %s", p.Name, u.nominated, u.message),
			fmt.Sprintf("waited for a preemption on node %s: %s", u.nominated, u.message))
		return
	}
	w.mu.Lock()
	same, first, never := w.observed && u.message == w.message && w.nominated == "", !w.observed, w.never
	kindChanged := shortageOnly(u.message) != shortageOnly(w.message)
	w.message, w.nominated, w.observed = u.message, "", true
	w.mu.Unlock()
	if same {
		return
	}
	// The nodes are read for the first message, again while none could
	// hold the pod, and when the scheduler's reasons turn from room to
	// others or back; not as a room wait's counts change.
	if first || never != nil || kindChanged {
		never = w.verdict(p, u.message)
	}
	if never == nil {
		w.stopAutoscaler()
	}
	w.mu.Lock()
	w.never = never
	switch {
	case never != nil && w.answer != nil && w.answer.scaling:
		w.report(fmt.Sprintf("pod %s waits for the node that %s adds: %s (the scheduler: %s)", p.Name, w.answer.who, w.answer.message, u.message), "")
	case never != nil:
		upTo := waitText(autoscalerGrace)
		if w.grace() == 0 {
			upTo = "the pending timeout"
		}
		w.report(fmt.Sprintf("pod %s fits no node of the cluster: %s; waiting up to %s for a cluster autoscaler to add one (the scheduler: %s)",
			p.Name, never.cause, upTo, u.message),
			"waited for a cluster autoscaler: "+never.cause)
	case shortageOnly(u.message):
		w.report(fmt.Sprintf("pod %s waits for room on a node: %s", p.Name, u.message), "waited for room on a node: "+u.message)
	default:
		w.report(fmt.Sprintf("pod %s waits for the scheduler: %s", p.Name, u.message), "waited for the scheduler: "+u.message)
	}
	w.mu.Unlock()
	if never != nil {
		w.startAutoscaler(p)
	}
}

// verdict says why no node can ever hold p, from the nodes, or from the
// scheduler's message when they cannot be read; nil when one can, or when
// that cannot be told.
func (w *scheduling) verdict(p *corev1.Pod, message string) *misfit {
	nodes, err := readNodes(w.ctx, w.r.Kube)
	if err == nil {
		return noNodeFits(p, nodes)
	}
	return unreadNodes(p, message, err)
}

// unreadNodes says, from the scheduler's message alone, why no node can
// hold p, when every node reason is a placement; the nodes could not be
// read (unread).
func unreadNodes(p *corev1.Pod, message string, unread error) *misfit {
	if !placementOnly(message) {
		return nil
	}
	sel := ""
	if s := nodefit.Selector(p); s != "" {
		sel = " (" + s + ")"
	}
	return &misfit{
		cause: fmt.Sprintf("the scheduler finds no node that the pod's node selector, affinity and tolerations%s allow, "+
			"and the nodes could not be read to tell more (%v)", sel, unread),
		remedy: "label a node or add a toleration, correct the node_selector of the run's node label or the group's " +
			"pod_spec_override, or run a cluster autoscaler with a node group that matches",
	}
}

// grace is how long the autoscaler has to answer from now; 0 when the
// pending timeout ends first, which then decides.
func (w *scheduling) grace() time.Duration {
	if autoscalerGrace >= time.Until(w.deadline) {
		return 0
	}
	return autoscalerGrace
}

// waitText is d for people: whole seconds, or milliseconds below one.
func waitText(d time.Duration) string {
	if d >= time.Second {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Millisecond).String()
}

// report tells the action's progress, the log and the timeline why the pod
// waits, when that changed; an empty note leaves the timeline's. Called
// with w.mu held, which keeps the two watches' reports in order.
func (w *scheduling) report(event, note string) {
	if event == w.said {
		return
	}
	w.said = event
	if note != "" {
		w.s.Timeline.Renote(StepSchedule, note)
	}
	w.r.info(event, nil)
	w.s.event("%s", event)
}

// startAutoscaler opens the watch of p's events for an autoscaler's
// answer, unless it is open.
func (w *scheduling) startAutoscaler(p *corev1.Pod) {
	if w.stopAnswers != nil {
		return
	}
	ctx, cancel := context.WithCancel(w.ctx)
	done := make(chan struct{})
	w.mu.Lock()
	w.stopped = false
	w.mu.Unlock()
	w.stopAnswers = func() {
		w.mu.Lock()
		w.stopped = true
		w.mu.Unlock()
		cancel()
		<-done
	}
	go func() {
		defer close(done)
		w.awaitAnswer(ctx, p, w.grace())
	}()
}

// stopAutoscaler ends the autoscaler watch, if one is open, and waits until
// it has.
func (w *scheduling) stopAutoscaler() {
	if w.stopAnswers != nil {
		w.stopAnswers()
		w.stopAnswers = nil
	}
}

// awaitAnswer watches p's events until ctx ends, taking each new answer of
// an autoscaler; at the end of grace with no answer it fails the run.
func (w *scheduling) awaitAnswer(ctx context.Context, p *corev1.Pod, grace time.Duration) {
	opts := metav1.ListOptions{FieldSelector: fields.AndSelectors(
		fields.OneTermEqualSelector("involvedObject.name", p.Name),
		fields.OneTermEqualSelector("involvedObject.uid", string(p.UID)),
	).String()}
	var watchErr error
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		_, watchErr = waitfor.Lists(ctx, w.r.Kube.CoreV1().Events(p.Namespace), opts, func(l *corev1.EventList) (bool, error) {
			return w.take(p, l.Items), nil
		})
	}()
	defer func() { <-watched }()
	ended := watched
	var graceEnd <-chan time.Time
	if grace > 0 {
		timer := time.NewTimer(grace)
		defer timer.Stop()
		graceEnd = timer.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-ended:
			ended = nil
			if watchErr != nil && ctx.Err() == nil {
				w.mu.Lock()
				w.eventsErr = watchErr
				w.mu.Unlock()
				w.r.info("the run pod's events cannot be watched for an autoscaler's answer", map[string]any{"pod": p.Name, "error": watchErr.Error()})
			}
		case <-graceEnd:
			w.graceEnded(ctx, p, grace)
		}
	}
}

// take reads the pod's events for the autoscaler's latest answer; it
// reports true when the answer ends the wait.
func (w *scheduling) take(p *corev1.Pod, events []corev1.Event) bool {
	a, ok := latestAnswer(events, string(p.UID))
	if !ok {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.answer != nil && w.answer.pod == "" && w.answer.reason == a.reason && w.answer.message == a.message {
		return false
	}
	w.answer = &a
	if !a.scaling {
		w.failLocked(w.unschedulable(p.Name, fmt.Sprintf("%s will not add a node for it (%s: %s)", a.who, a.reason, a.message)))
		return true
	}
	w.report(fmt.Sprintf("%s adds a node for pod %s: %s", a.who, p.Name, a.message), "waited for a node the cluster autoscaler added: "+a.String())
	return false
}

// graceEnded fails the run unless an autoscaler answered in time, or
// scaled up lately for another pod of the namespace: cluster-autoscaler
// counts a pod that fits a node it is adding without posting a word on it.
func (w *scheduling) graceEnded(ctx context.Context, p *corev1.Pod, grace time.Duration) {
	w.mu.Lock()
	answered := w.answer != nil
	w.mu.Unlock()
	if answered {
		return
	}
	list, err := w.r.Kube.CoreV1().Events(p.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("reason", eventTriggeredScaleUp).String()})
	var sibling *answer
	if err == nil {
		for i := range list.Items {
			e := &list.Items[i]
			a, ok := autoscalerAnswer(e)
			if ok && a.scaling && e.InvolvedObject.UID != p.UID && time.Since(a.at) < scaleUpMemory && (sibling == nil || a.at.After(sibling.at)) {
				a.pod = e.InvolvedObject.Name
				sibling = &a
			}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if ctx.Err() != nil || w.answer != nil {
		return
	}
	if sibling != nil {
		w.answer = sibling
		w.report(fmt.Sprintf("%s scaled up for pod %s of namespace %s %s ago (%s); pod %s waits for that node",
			sibling.who, sibling.pod, p.Namespace, time.Since(sibling.at).Round(time.Second), sibling.message, p.Name),
			"waited for a node the cluster autoscaler added for another pod: "+sibling.String())
		return
	}
	why := fmt.Sprintf("no cluster autoscaler answered within %s (no %s or %s event on the pod)", waitText(grace), eventTriggeredScaleUp, eventNominated)
	if w.eventsErr != nil {
		why = fmt.Sprintf("the pod's events, where a cluster autoscaler answers, could not be watched (%v: the credential needs list "+
			"and watch on events)", w.eventsErr)
	}
	w.failLocked(w.unschedulable(p.Name, why))
}

// failLocked ends the wait with err, unless the autoscaler watch was told
// to stop (the pod was placed meanwhile). Called with w.mu held.
func (w *scheduling) failLocked(err error) {
	if w.stopped || w.failed != nil {
		return
	}
	w.failed = err
	w.fail(err)
}

// failure is the error the autoscaler watch ended the wait with, if it did.
func (w *scheduling) failure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}

// unschedulable is the run's error for a pod that no node can hold, with
// why waiting does not help. Called with w.mu held.
func (w *scheduling) unschedulable(pod, why string) error {
	cause, remedy := "", "correct the pod's node selector, affinity, tolerations or requests, or the autoscaler's node groups"
	if w.never != nil {
		cause, remedy = w.never.cause+", and ", w.never.remedy
	}
	return because(ReasonUnschedulable, fmt.Errorf("pod %s cannot be scheduled (%s): %s%s. To run it, %s. The scheduler says: %s",
		pod, corev1.PodReasonUnschedulable, cause, why, remedy, w.message))
}

// timedOut is the error of a pod that was not scheduled within the pending
// timeout, or nil when the scheduler never said why.
func (w *scheduling) timedOut(pod string, pending time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.never != nil && w.answer == nil:
		return w.unschedulable(pod, fmt.Sprintf("no cluster autoscaler answered within the pending timeout of %s", pending))
	case w.answer != nil && w.answer.scaling:
		return because(ReasonCapacityTimeout, fmt.Errorf("pod %s was not scheduled within the pending timeout of %s while %s added "+
			"a node for it (%s). Raise pod_pending_timeout if the autoscaler's nodes take longer to join, or see why the node "+
			"did not join. The scheduler says: %s", pod, pending, w.answer.who, w.answer.message, w.message))
	case shortageOnly(w.message):
		return because(ReasonCapacityTimeout, fmt.Errorf("pod %s found no room on a node within the pending timeout of %s: %s. Raise "+
			"pod_pending_timeout, lower the group's max_concurrent_runs or its pods' requests, add nodes, or give its pods a "+
			"priorityClassName (pod_spec_override) so that the scheduler places them ahead of pods of lower priority, preempting them if needed", pod, pending, w.message))
	case w.observed:
		return because(ReasonCapacityTimeout, fmt.Errorf("pod %s was not scheduled within the pending timeout of %s: %s. Raise "+
			"pod_pending_timeout, or see what keeps the pod off the nodes that could hold it (kubectl describe pod)", pod, pending, w.message))
	}
	return nil
}
