// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
)

func TestRecordOf(t *testing.T) {
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	res := runner.Result{Status: runner.StatusFailed, Reason: runner.ReasonPlaybookFailed, Warm: true,
		FinishedAt: start.Add(3500 * time.Millisecond), Timeline: []runner.Step{
			{Name: runner.StepQueued, Start: start, Duration: 1500 * time.Millisecond},
			{Name: runner.StepClaim, Start: start.Add(1500 * time.Millisecond), Duration: 250 * time.Millisecond},
			{Name: runner.StepPlaybook, Start: start.Add(1750 * time.Millisecond), Duration: 1750 * time.Millisecond},
		}}
	line := recordOf("abc", res)
	var r RunRecord
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	if r.ID != "abc" || r.Status != "failed" || r.Reason != "playbook_failed" || !r.Warm || len(r.Steps) != 3 {
		t.Errorf("record %+v", r)
	}
	if got := r.Seconds(PartQueued...); got != 1.75 {
		t.Errorf("queued %v s, want 1.75", got)
	}
	tl := r.Timeline()
	if !tl[0].Start.Equal(r.Ended.Add(-3500*time.Millisecond)) || tl[2].Duration != 1750*time.Millisecond {
		t.Errorf("timeline %+v", tl)
	}
	if recordOf("x", runner.Result{}) != "" {
		t.Error("a result without a timeline (the run never started) has no record")
	}
}

func TestFigures(t *testing.T) {
	rec := func(warm bool, queued, schedule, image, playbook float64) RunRecord {
		steps := [][2]any{{"queued", queued}, {"create", 0.0}, {"schedule", schedule}, {"sandbox", 0.5}, {"image", image}, {"deliver", 0.0}}
		if playbook >= 0 {
			steps = append(steps, [2]any{"playbook", playbook})
		}
		return RunRecord{Warm: warm, Steps: steps}
	}
	var records []RunRecord
	for i := range 10 {
		records = append(records, rec(i < 3, float64(i), 0.1, 1, 4))
	}
	records = append(records, rec(false, 100, 100, 100, -1)) // never got to its playbook
	f := Figures(records)
	if f.Runs != 10 || f.WarmShare != 0.3 {
		t.Errorf("runs %d, warm share %v; want 10, 0.3", f.Runs, f.WarmShare)
	}
	if f.Queued != (Percentiles{P50: 4, P90: 8}) {
		t.Errorf("queued %+v, want p50 4 (the 5th of 0..9), p90 8 (the 9th)", f.Queued)
	}
	if math.Abs(f.ToStart.P50-(4+0.1+1+0.5)) > 1e-9 || f.Image != (Percentiles{1, 1}) || f.Start != (Percentiles{0.5, 0.5}) {
		t.Errorf("figures %+v", f)
	}
	if (Figures(nil) != StartFigures{}) {
		t.Error("no records, no figures")
	}
}

// FuzzRunRecord: a record, as anyone who may write the ledger may write
// it, decodes or is left out, and sums up without panics or negative time.
func FuzzRunRecord(f *testing.F) {
	f.Add(`{"id":"a","ended":"2026-11-27T12:00:00Z","status":"successful","steps":[["queued",0.5],["playbook",3]]}`)
	f.Add(`{"id":"a","steps":[["queued","x"],[1,2],[],["image",-5],["image",1e308]]}`)
	f.Fuzz(func(t *testing.T, line string) {
		var r RunRecord
		if json.Unmarshal([]byte(line), &r) != nil {
			return
		}
		if s := r.Seconds(PartToStart...); s < 0 || math.IsNaN(s) {
			t.Errorf("%s: %v s", line, s)
		}
		for _, s := range r.Timeline() {
			if s.Duration < 0 {
				t.Errorf("%s: step %s lasts %s", line, s.Name, s.Duration)
			}
		}
		_ = Figures([]RunRecord{r})
	})
}
