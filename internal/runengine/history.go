// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/capacity"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/outputtail"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
)

// RunRecord is what a group's ledger keeps of one ended run (see
// capacity.AnnotationRecentRuns): no output, no messages, nothing secret.
// Whoever may write the ledger may write records too: they inform people,
// and decide nothing.
type RunRecord struct {
	ID     string    `json:"id"`
	Ended  time.Time `json:"ended"`
	Status string    `json:"status"`
	Reason string    `json:"reason,omitempty"`
	Warm   bool      `json:"warm,omitempty"`
	// Steps are the run's timeline as [name, seconds] pairs, in order.
	Steps [][2]any `json:"steps"`
}

// recordOf is res as a record, "" when it has no timeline.
func recordOf(id string, res runner.Result) string {
	if len(res.Timeline) == 0 {
		return ""
	}
	r := RunRecord{ID: id, Ended: res.FinishedAt.UTC().Truncate(time.Second), Status: res.Status, Reason: string(res.Reason), Warm: res.Warm}
	for _, s := range res.Timeline {
		r.Steps = append(r.Steps, [2]any{s.Name, math.Round(s.Duration.Seconds()*1000) / 1000})
	}
	b, err := json.Marshal(r)
	if err != nil {
		return ""
	}
	return string(b)
}

// maxStep bounds a step's seconds as a record gives them (a year): a
// record is anyone's who may write the ledger.
const maxStep = 365 * 24 * 3600.0

// step is the record's step i, its seconds within [0, maxStep].
func (r RunRecord) step(i int) (string, float64) {
	name, _ := r.Steps[i][0].(string)
	secs, _ := r.Steps[i][1].(float64)
	return name, min(max(secs, 0), maxStep)
}

// Seconds is the time the record's steps named took, added up.
func (r RunRecord) Seconds(steps ...string) float64 {
	var sum float64
	for i := range r.Steps {
		if name, secs := r.step(i); slices.Contains(steps, name) {
			sum += secs
		}
	}
	return sum
}

// Timeline is the record's steps, started at its end less their sum.
func (r RunRecord) Timeline() []runner.Step {
	var total time.Duration
	steps := make([]runner.Step, 0, len(r.Steps))
	for i := range r.Steps {
		name, secs := r.step(i)
		d := time.Duration(secs * float64(time.Second))
		steps = append(steps, runner.Step{Name: name, Duration: d})
		total += d
	}
	at := r.Ended.Add(-total)
	for i := range steps {
		steps[i].Start = at
		at = at.Add(steps[i].Duration)
	}
	return steps
}

// ValidID reports whether id has the form NewID gives run ids: 16
// lowercase hex digits.
func ValidID(id string) bool {
	if len(id) != 16 {
		return false
	}
	for _, c := range []byte(id) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ParseRunRecord decodes one line of a ledger's records. Whoever may write
// the ledger may write the line, and its text reaches terminals (terraform
// query's display names): a record whose id is not a run id is refused,
// and every string it holds is sanitized.
func ParseRunRecord(line string) (RunRecord, error) {
	var r RunRecord
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		return RunRecord{}, fmt.Errorf("not a run record: %w", err)
	}
	if !ValidID(r.ID) {
		return RunRecord{}, fmt.Errorf("run id %q is not 16 lowercase hex digits", r.ID)
	}
	r.Status, r.Reason = oneLine(r.Status), oneLine(r.Reason)
	for i := range r.Steps {
		if name, ok := r.Steps[i][0].(string); ok {
			r.Steps[i][0] = oneLine(name)
		}
	}
	return r, nil
}

// oneLine is s sanitized for a terminal, its tabs and newlines shown too:
// a record's text is one line of a display name.
func oneLine(s string) string {
	return strings.NewReplacer("\n", "\u240a", "\t", "\u2409").Replace(outputtail.Sanitize(s))
}

// RecentRuns reads the records of g's last runs from its ledgers (runs and
// forks), newest first. A record ParseRunRecord refuses is left out, and
// why is in dropped, for the caller to log.
func RecentRuns(ctx context.Context, kube kubernetes.Interface, g Group) (out []RunRecord, dropped []error, err error) {
	seen := map[string]bool{}
	var errs []error
	for _, kind := range []string{capacity.Runs, capacity.Forks} {
		lines, err := capacity.Ledger{Kube: kube, Namespace: g.Namespace, Group: g.Name, Kind: kind, Owner: managed.Owner{ID: g.OwnerID}}.RecentRuns(ctx)
		errs = append(errs, err)
		for _, l := range lines {
			r, err := ParseRunRecord(l)
			if err != nil {
				dropped = append(dropped, fmt.Errorf("%s ledger of group %s: %w", kind, g.Name, err))
				continue
			}
			if seen[r.ID] {
				continue
			}
			seen[r.ID] = true
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(a, b RunRecord) int { return b.Ended.Compare(a.Ended) })
	return out, dropped, errors.Join(errs...)
}

// The parts of a run's time to start, as its timeline's steps.
var (
	PartQueued     = []string{runner.StepQueued, runner.StepNamespace, runner.StepClaim}
	PartScheduling = []string{runner.StepCreate, runner.StepSchedule}
	PartImage      = []string{runner.StepImage}
	PartStart      = []string{runner.StepSandbox, runner.StepDeliver}
	// PartToStart is everything before the playbook.
	PartToStart = slices.Concat(PartQueued, PartScheduling, PartImage, PartStart)
)

// Percentiles are the median and the 90th percentile of some seconds.
type Percentiles struct{ P50, P90 float64 }

// StartFigures sum up how a group's recent runs got to their playbooks.
type StartFigures struct {
	// Runs counts the records the figures cover: runs that got to their
	// playbook (a run that failed before has no time to start).
	Runs                                      int
	ToStart, Queued, Scheduling, Image, Start Percentiles
	// WarmShare is the share of Runs that ran in a warm pod.
	WarmShare float64
}

// Figures sums records up.
func Figures(records []RunRecord) StartFigures {
	var to, q, sch, img, st []float64
	warm := 0
	for _, r := range records {
		if !slices.ContainsFunc(r.Steps, func(s [2]any) bool { return s[0] == runner.StepPlaybook }) {
			continue
		}
		to, q = append(to, r.Seconds(PartToStart...)), append(q, r.Seconds(PartQueued...))
		sch, img, st = append(sch, r.Seconds(PartScheduling...)), append(img, r.Seconds(PartImage...)), append(st, r.Seconds(PartStart...))
		if r.Warm {
			warm++
		}
	}
	f := StartFigures{Runs: len(to), ToStart: percentiles(to), Queued: percentiles(q), Scheduling: percentiles(sch),
		Image: percentiles(img), Start: percentiles(st)}
	if f.Runs > 0 {
		f.WarmShare = float64(warm) / float64(f.Runs)
	}
	return f
}

// percentiles by the nearest-rank method: the smallest value with at
// least p percent of the values at or below it.
func percentiles(v []float64) Percentiles {
	if len(v) == 0 {
		return Percentiles{}
	}
	s := slices.Clone(v)
	slices.SortFunc(s, cmp.Compare[float64])
	rank := func(p float64) float64 {
		i := int(math.Ceil(p/100*float64(len(s)))) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return Percentiles{P50: rank(50), P90: rank(90)}
}
