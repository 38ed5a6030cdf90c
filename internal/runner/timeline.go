package runner

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// The steps of a run's timeline. Each lasts from when kubeplay saw it
// begin until the next began, so that the steps add up to the run's wall
// time; a step the run did not need is absent (a warm run has no create),
// and a step seen begin and end in one watch event lasts 0 s.
const (
	// StepQueued: rendering the pod, clearing the group's orphaned pods and
	// waiting for the group's capacity (max_concurrent_runs, max_forks).
	StepQueued = "queued"
	// StepNamespace: making a namespace label's run namespace.
	StepNamespace = "namespace"
	// StepClaim: taking a warm pod, or a held node's turn.
	StepClaim = "claim"
	// StepCreate: the pod's create request, with waits for the namespace's
	// ResourceQuota.
	StepCreate = "create"
	// StepSchedule: from the pod's creation until it was bound to a node,
	// with waits for room on a node, a preemption or an autoscaler's node.
	StepSchedule = "schedule"
	// StepSandbox: from the binding until the container ran, but for the
	// image's pull: the pod's sandbox and network, and the container's
	// creation and start.
	StepSandbox = "sandbox"
	// StepImage: the image's pull, as the kubelet's Pulled event gives it,
	// for a pod that took PullCheckAfter or more to start; 0 s, not
	// measured, for a quicker one.
	StepImage = "image"
	// StepDeliver: the exec's start and the bundle's delivery into the pod.
	StepDeliver = "deliver"
	// StepPlaybook: from the bundle's delivery until the run's result came.
	StepPlaybook = "playbook"
	// StepCleanup: from the result until the pod was gone (or its deletion
	// accepted, for a warm pod; or the held node's turn given back).
	StepCleanup = "cleanup"
)

// Steps lists the steps in the order a run goes through them.
var Steps = []string{StepQueued, StepNamespace, StepClaim, StepCreate, StepSchedule, StepSandbox, StepImage,
	StepDeliver, StepPlaybook, StepCleanup}

// Step is one part of a run's time.
type Step struct {
	Name     string
	Start    time.Time
	Duration time.Duration
	// Detail says what the step waited for, when it waited, or which pod
	// it claimed.
	Detail string
}

// Timeline records a run's steps as kubeplay sees them, from the events it
// watches anyway: it asks the cluster nothing of its own. Safe for
// concurrent use: the engine and the runner's watches both mark it. A nil
// timeline records nothing.
type Timeline struct {
	mu    sync.Mutex
	steps []Step
	ended bool
}

// NewTimeline is a timeline whose first step begins at start.
func NewTimeline(first string, start time.Time) *Timeline {
	t := &Timeline{}
	t.Begin(first, start)
	return t
}

// Begin ends the current step at at and begins name there. A nil
// timeline records nothing.
func (t *Timeline) Begin(name string, at time.Time) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return
	}
	if n := len(t.steps); n > 0 && at.Before(t.steps[n-1].Start) {
		at = t.steps[n-1].Start // a mark read before the step began (another goroutine's)
	}
	t.close(at)
	t.steps = append(t.steps, Step{Name: name, Start: at, Duration: -1})
}

// Note sets the current step's detail, when it has none yet and name is
// the current step.
func (t *Timeline) Note(name, detail string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := len(t.steps); n > 0 && t.steps[n-1].Name == name && t.steps[n-1].Detail == "" && !t.ended {
		t.steps[n-1].Detail = detail
	}
}

// Renote sets the current step's detail, replacing the one it has, when
// name is the current step: a wait that learnt more of why it waits.
func (t *Timeline) Renote(name, detail string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := len(t.steps); n > 0 && t.steps[n-1].Name == name && !t.ended {
		t.steps[n-1].Detail = detail
	}
}

// Duration is how long the last step called name lasted, once it ended.
func (t *Timeline) Duration(name string) (time.Duration, bool) {
	if t == nil {
		return 0, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := len(t.steps) - 1; i >= 0; i-- {
		if t.steps[i].Name == name {
			return t.steps[i].Duration, t.steps[i].Duration >= 0
		}
	}
	return 0, false
}

// Split ends the last ended step called name tail earlier (tail is cut to
// the step's length), and puts a step called sub with detail in the time
// it gave up, right after it: the steps still add up.
func (t *Timeline) Split(name, sub string, tail time.Duration, detail string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := len(t.steps) - 1; i >= 0; i-- {
		st := &t.steps[i]
		if st.Name != name || st.Duration < 0 {
			continue
		}
		tail = min(max(tail, 0), st.Duration)
		st.Duration -= tail
		next := Step{Name: sub, Start: st.Start.Add(st.Duration), Duration: tail, Detail: detail}
		t.steps = append(t.steps[:i+1], append([]Step{next}, t.steps[i+1:]...)...)
		return
	}
}

// Started is when the first step began.
func (t *Timeline) Started() time.Time {
	if t == nil {
		return time.Time{}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.steps) == 0 {
		return time.Time{}
	}
	return t.steps[0].Start
}

// Current is the step under way, "" when there is none.
func (t *Timeline) Current() string {
	st, _ := t.CurrentStep()
	return st.Name
}

// CurrentStep is the step under way, its start and detail.
func (t *Timeline) CurrentStep() (Step, bool) {
	if t == nil {
		return Step{}, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := len(t.steps); n > 0 && !t.ended {
		return t.steps[n-1], true
	}
	return Step{}, false
}

// End ends the current step at at and returns the steps; marks after it
// are ignored.
func (t *Timeline) End(at time.Time) []Step {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.ended {
		t.close(at)
		t.ended = true
	}
	out := make([]Step, len(t.steps))
	copy(out, t.steps)
	return out
}

func (t *Timeline) close(at time.Time) {
	if n := len(t.steps); n > 0 && t.steps[n-1].Duration < 0 {
		last := &t.steps[n-1]
		// A clock read before the step began (marks from another goroutine) counts as 0.
		last.Duration = max(0, at.Sub(last.Start))
	}
}

// Summary is steps on one line: "queued 0.0s, create 0.1s, ... (total
// 9.8s)".
func Summary(steps []Step) string {
	if len(steps) == 0 {
		return ""
	}
	parts := make([]string, 0, len(steps))
	var total time.Duration
	for _, s := range steps {
		parts = append(parts, fmt.Sprintf("%s %.1fs", s.Name, s.Duration.Seconds()))
		total += s.Duration
	}
	return fmt.Sprintf("%s (total %.1fs)", strings.Join(parts, ", "), total.Seconds())
}
