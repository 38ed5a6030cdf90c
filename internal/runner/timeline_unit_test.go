package runner

import (
	"testing"
	"time"
)

func TestTimeline(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tl := NewTimeline(StepQueued, at(0))
	tl.Begin(StepCreate, at(100))
	tl.Note(StepCreate, "launch attempt 2")
	tl.Note(StepCreate, "ignored: the step has a detail")
	tl.Note(StepQueued, "ignored: not the current step")
	tl.Begin(StepSandbox, at(300))
	tl.Begin(StepDeliver, at(200)) // a mark from before the step began counts from its start
	steps := tl.End(at(1000))
	tl.Begin(StepCleanup, at(2000)) // after the end: ignored
	want := []Step{
		{StepQueued, at(0), 100 * time.Millisecond, ""}, {StepCreate, at(100), 200 * time.Millisecond, "launch attempt 2"},
		{StepSandbox, at(300), 0, ""}, {StepDeliver, at(300), 700 * time.Millisecond, ""},
	}
	if len(steps) != len(want) {
		t.Fatalf("steps %+v, want %+v", steps, want)
	}
	for i := range want {
		if steps[i] != want[i] {
			t.Errorf("step %d: %+v, want %+v", i, steps[i], want[i])
		}
	}
	if got, want := Summary(steps), "queued 0.1s, create 0.2s, sandbox 0.0s, deliver 0.7s (total 1.0s)"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
}

// TestTimelineAddsUp: whatever the marks, the steps add up to the time
// from the first mark to the end, and each starts where the one before
// ended.
func TestTimelineAddsUp(t *testing.T) {
	t0 := time.Now()
	tl := NewTimeline(StepQueued, t0)
	tl.Begin(StepCreate, t0.Add(10*time.Millisecond))
	tl.Begin(StepSandbox, t0.Add(40*time.Millisecond))
	tl.Begin(StepDeliver, t0.Add(2540*time.Millisecond))
	tl.Split(StepSandbox, StepImage, 2*time.Second, "pulled in 2s")
	tl.Split(StepDeliver, StepImage, time.Hour, "cut to the step") // an open step is not split
	tl.Begin(StepPlaybook, t0.Add(2600*time.Millisecond))
	steps := tl.End(t0.Add(7 * time.Second))
	var sum time.Duration
	for i, s := range steps {
		sum += s.Duration
		if i > 0 && !s.Start.Equal(steps[i-1].Start.Add(steps[i-1].Duration)) {
			t.Errorf("step %s starts at %s, the one before ends at %s", s.Name, s.Start, steps[i-1].Start.Add(steps[i-1].Duration))
		}
	}
	if sum != 7*time.Second {
		t.Errorf("steps add up to %s, want 7s: %+v", sum, steps)
	}
	names := []string{StepQueued, StepCreate, StepSandbox, StepImage, StepDeliver, StepPlaybook}
	for i, n := range names {
		if steps[i].Name != n {
			t.Fatalf("steps %+v, want %v", steps, names)
		}
	}
	if steps[2].Duration != 500*time.Millisecond || steps[3].Duration != 2*time.Second {
		t.Errorf("sandbox %s, image %s; want 500ms, 2s", steps[2].Duration, steps[3].Duration)
	}
	var none *Timeline
	none.Begin(StepQueued, t0)
	if none.End(t0) != nil || none.Current() != "" {
		t.Error("a nil timeline records nothing")
	}
}

func TestPulledIn(t *testing.T) {
	for _, c := range []struct {
		msg              string
		took             time.Duration
		present, matched bool
	}{
		{`Successfully pulled image "127.0.0.1:5000/a/b:v1" in 6.16s (6.16s including waiting). Image size: 7340032 bytes.`, 6160 * time.Millisecond, false, true},
		{`Successfully pulled image "a:v1" in 262ms (262ms including waiting)`, 262 * time.Millisecond, false, true},
		{`Successfully pulled image "a:v1" in 1m2.5s. Image size: 1 bytes.`, 62500 * time.Millisecond, false, true},
		{`Container image "kubeplay.test/ee:v1" already present on machine`, 0, true, true},
		{`Container image "x" already present on machine and can be accessed by the pod`, 0, true, true},
		{`Pulling image "a:v1"`, 0, false, false},
		{`Successfully pulled image "a" in forever (x)`, 0, false, false},
	} {
		took, present, ok := pulledIn(c.msg)
		if took != c.took || present != c.present || ok != c.matched {
			t.Errorf("pulledIn(%q) = %s, %v, %v; want %s, %v, %v", c.msg, took, present, ok, c.took, c.present, c.matched)
		}
	}
}

func FuzzPulledIn(f *testing.F) {
	f.Add(`Successfully pulled image "a:v1" in 6.16s (6.16s including waiting). Image size: 1 bytes.`)
	f.Add(`Container image "a" already present on machine`)
	f.Fuzz(func(t *testing.T, msg string) {
		if took, present, ok := pulledIn(msg); took < 0 || present && took != 0 || !ok && (took != 0 || present) {
			t.Errorf("pulledIn(%q) = %s, %v, %v", msg, took, present, ok)
		}
	})
}
