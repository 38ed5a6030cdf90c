// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/capacity"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/outputtail"
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

// TestRecentRunsSanitized (#40): records that whoever may write a group's
// ledger wrote reach terraform query's display names. A record whose id is
// not a run id is left out, and said why; escape sequences that JSON
// decodes into a record's strings arrive as visible text.
func TestRecentRunsSanitized(t *testing.T) {
	kube := fake.NewClientset()
	g := Group{Name: "g", Namespace: "runs"}
	l := capacity.Ledger{Kube: kube, Namespace: g.Namespace, Group: g.Name, Kind: capacity.Runs}
	if err := l.Ensure(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	cm, err := kube.CoreV1().ConfigMaps(g.Namespace).Get(t.Context(), l.ConfigMapName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Annotations[capacity.AnnotationRecentRuns] = strings.Join([]string{
		`{"id":"0123456789abcdef","ended":"2026-11-27T12:00:00Z","status":"successful\u001b]8;;https://x.example/\u0007",` +
			`"reason":"[red]\u009b2J\u202e","steps":[["queued\u001b[2J",1],["playbook",2]]}`,
		`{"id":"\u001b[31mforged","ended":"2026-11-27T12:00:01Z","status":"successful","steps":[["playbook",1]]}`,
		`{"id":"0123456789ABCDEF","status":"successful","steps":[["playbook",1]]}`,
		`{"id":"../../x","status":"successful","steps":[["playbook",1]]}`,
		`not json`,
	}, "\n")
	if _, err := kube.CoreV1().ConfigMaps(g.Namespace).Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	records, dropped, err := RecentRuns(t.Context(), kube, g)
	if err != nil {
		t.Fatal(err)
	}
	if len(records) != 1 || records[0].ID != "0123456789abcdef" {
		t.Fatalf("records %+v; want only the one with a run id", records)
	}
	if len(dropped) != 4 || !strings.Contains(dropped[0].Error(), `run id "\x1b[31mforged" is not 16 lowercase hex digits`) {
		t.Errorf("dropped %v; want the 4 others, each said why", dropped)
	}
	r := records[0]
	name, _ := r.step(0)
	for _, s := range []string{r.Status, r.Reason, name} {
		if !safeText(s) {
			t.Errorf("%q reaches a terminal as it is", s)
		}
	}
	if want := "successful␛]8;;https://x.example/␇"; r.Status != want {
		t.Errorf("status %q, want %q", r.Status, want)
	}
}

// safeText reports whether s holds no control character, bidirectional
// override or colorstring code.
func safeText(s string) bool {
	for _, r := range s {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) {
			return false
		}
	}
	return utf8.ValidString(s) && !strings.Contains(s, "[red]") && outputtail.Sanitize(s) == s
}

// FuzzRunRecord: a record, as anyone who may write the ledger may write
// it, decodes or is left out, and what decodes has a run id and safe text,
// and sums up without panics or negative time.
func FuzzRunRecord(f *testing.F) {
	f.Add(`{"id":"0123456789abcdef","ended":"2026-11-27T12:00:00Z","status":"successful","steps":[["queued",0.5],["playbook",3]]}`)
	f.Add(`{"id":"0123456789abcdef","status":"\u001b[2J","reason":"[red]","steps":[["queued","x"],[1,2],[],["image",-5],["image",1e308]]}`)
	f.Add(`{"id":"a","steps":[["queued","x"],[1,2],[],["image",-5],["image",1e308]]}`)
	f.Fuzz(func(t *testing.T, line string) {
		r, err := ParseRunRecord(line)
		if err != nil {
			return
		}
		if !ValidID(r.ID) {
			t.Errorf("%s: id %q", line, r.ID)
		}
		for i := range r.Steps {
			if name, _ := r.step(i); !safeText(name) {
				t.Errorf("%s: step %q", line, name)
			}
		}
		if !safeText(r.Status) || !safeText(r.Reason) {
			t.Errorf("%s: status %q, reason %q", line, r.Status, r.Reason)
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
