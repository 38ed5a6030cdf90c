package runner

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
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

// TestSplitImageWaitsForALateEvent: a run that took over PullCheckAfter to
// start, whose Pulled event the API server shows only after the run's end
// read the events, still gets its image step, from the watch that follows
// the read; a pod whose event never comes gets "not measured" after
// PulledWait, and one whose event is there costs a single read.
func TestSplitImageWaitsForALateEvent(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "run-x", Namespace: "ns", UID: "u1"}}
	pulled := func(name string) *corev1.Event {
		return &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: name, Namespace: "ns"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "run-x", UID: "u1"},
			Reason:         "Pulled",
			Message:        `Successfully pulled image "x" in 3.25s (3.25s including waiting). Image size: 1 bytes.`,
		}
	}
	timeline := func() *Timeline {
		t0 := time.Now().Add(-time.Minute)
		tl := NewTimeline(StepSandbox, t0)
		tl.Begin(StepDeliver, t0.Add(4*time.Second))
		return tl
	}
	image := func(tl *Timeline) Step {
		for _, s := range tl.End(time.Now()) {
			if s.Name == StepImage {
				return s
			}
		}
		t.Fatal("no image step")
		return Step{}
	}
	// kube counts the reads and watches of events, and creates late once
	// the first watch of events is open.
	kube := func(late *corev1.Event, present ...runtime.Object) (*fake.Clientset, *atomic.Int32) {
		kube := fake.NewClientset(present...)
		var requests atomic.Int32
		kube.PrependReactor("list", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
			requests.Add(1)
			return false, nil, nil
		})
		kube.PrependWatchReactor("events", func(a k8stesting.Action) (bool, watch.Interface, error) {
			requests.Add(1)
			w, err := kube.Tracker().Watch(a.GetResource(), a.GetNamespace())
			if err == nil && late != nil {
				if err := kube.Tracker().Add(late); err != nil {
					t.Error(err)
				}
				late = nil
			}
			return true, w, err
		})
		return kube, &requests
	}

	k, _ := kube(pulled("late"))
	tl := timeline()
	(&Runner{Kube: k}).splitImage(t.Context(), tl, pod)
	if s := image(tl); s.Duration != 3250*time.Millisecond || s.Detail != "pulled in 3.25s" {
		t.Errorf("late event: image step %s %q, want 3.25s \"pulled in 3.25s\"", s.Duration, s.Detail)
	}

	k, requests := kube(nil, pulled("there"))
	tl = timeline()
	(&Runner{Kube: k}).splitImage(t.Context(), tl, pod)
	if s := image(tl); s.Detail != "pulled in 3.25s" || requests.Load() != 1 {
		t.Errorf("event there: image step %q after %d requests, want \"pulled in 3.25s\" after 1", s.Detail, requests.Load())
	}

	other := pulled("other")
	other.InvolvedObject.UID = "u0" // an earlier pod of the same name
	k, _ = kube(other)
	tl = timeline()
	start := time.Now()
	(&Runner{Kube: k}).splitImage(t.Context(), tl, pod)
	if s := image(tl); s.Duration != 0 || !strings.HasPrefix(s.Detail, "not measured") || time.Since(start) < PulledWait {
		t.Errorf("no event of the pod: image step %s %q after %s, want 0s not measured after %s",
			s.Duration, s.Detail, time.Since(start), PulledWait)
	}
}
