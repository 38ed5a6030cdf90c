// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"testing"
	"time"

	tfjson "github.com/hashicorp/terraform-json"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
)

// timelineOf checks a run's recorded timeline, from its attributes as
// terraform show -json gives them: its steps are want, in order (any, for
// nil), and they
// add up to the run's wall time (from the first step's start, which is
// started_at, to finished_at) within 1 s, the precision of finished_at.
// It returns the steps' seconds by name (a repeated step adds up).
func timelineOf(attrs map[string]any, want []string) (map[string]float64, error) {
	raw, ok := attrs["timeline"].([]any)
	if !ok || len(raw) == 0 {
		return nil, fmt.Errorf("the run has no timeline: %v", attrs["timeline"])
	}
	var names []string
	seconds := map[string]float64{}
	var sum float64
	var first time.Time
	for i, r := range raw {
		s, _ := r.(map[string]any)
		name, _ := s["step"].(string)
		f, err := jsonSeconds(s["seconds"])
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", i, err)
		}
		if f < 0 {
			return nil, fmt.Errorf("step %s lasted %v s", name, f)
		}
		if i == 0 {
			at, _ := s["started_at"].(string)
			if first, err = time.Parse(time.RFC3339Nano, at); err != nil {
				return nil, fmt.Errorf("step %s: started_at %q: %w", name, at, err)
			}
		}
		names = append(names, name)
		seconds[name] += f
		sum += f
	}
	if want != nil && !slices.Equal(names, want) {
		return seconds, fmt.Errorf("timeline steps %v, want %v", names, want)
	}
	started, err1 := time.Parse(time.RFC3339, fmt.Sprint(attrs["started_at"]))
	finished, err2 := time.Parse(time.RFC3339, fmt.Sprint(attrs["finished_at"]))
	if err1 != nil || err2 != nil {
		return seconds, fmt.Errorf("started_at %v, finished_at %v", attrs["started_at"], attrs["finished_at"])
	}
	if !started.Equal(first.Truncate(time.Second)) {
		return seconds, fmt.Errorf("started_at %s is not the first step's start %s", started, first)
	}
	wall := finished.Sub(first).Seconds()
	if math.Abs(wall-sum) > 1 {
		return seconds, fmt.Errorf("the steps add up to %.3f s, the run took %.3f s (%s to %s)", sum, wall, first, finished)
	}
	return seconds, nil
}

// expectTimeline is a state check of timelineOf; then, if set, checks the
// steps' seconds.
type expectTimeline struct {
	addr  string
	steps []string
	then  func(seconds map[string]float64) error
}

var _ statecheck.StateCheck = expectTimeline{}

func (c expectTimeline) CheckState(_ context.Context, req statecheck.CheckStateRequest, resp *statecheck.CheckStateResponse) {
	attrs, err := resourceValues(req.State, c.addr)
	if err == nil {
		var seconds map[string]float64
		if seconds, err = timelineOf(attrs, c.steps); err == nil && c.then != nil {
			err = c.then(seconds)
		}
	}
	resp.Error = err
}

// resourceValues are the root module resource addr's attributes in state.
func resourceValues(state *tfjson.State, addr string) (map[string]any, error) {
	if state == nil || state.Values == nil || state.Values.RootModule == nil {
		return nil, fmt.Errorf("no state")
	}
	for _, r := range state.Values.RootModule.Resources {
		if r.Address == addr {
			return r.AttributeValues, nil
		}
	}
	return nil, fmt.Errorf("%s is not in the state", addr)
}

// coldSteps are a run's steps in a fresh pod of a group without limits.
var coldSteps = []string{"queued", "create", "schedule", "sandbox", "image", "deliver", "playbook", "cleanup"}

// warmSteps are a run's steps in a warm pod of a group with max_concurrent_runs.
var warmSteps = []string{"queued", "claim", "deliver", "playbook", "cleanup"}

// runState is the kubeplay_run "r" of a fault row's directory as terraform
// show -json gives it, tainted or not; nil when the state has none.
func (s *signalEnv) runState(t *testing.T) map[string]any {
	t.Helper()
	cmd := terraformCommand(s.terraformBin, s.cliConfig, s.dir, nil, "show", "-json", "-no-color")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("terraform show -json: %v", err)
	}
	var state tfjson.State
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(&state); err != nil {
		t.Fatalf("terraform show -json: %v", err)
	}
	attrs, err := resourceValues(&state, "kubeplay_run.r")
	if err != nil {
		return nil
	}
	return attrs
}

// expectRecord checks that the row's run is in the state with status and
// reason (nil for none), and a timeline that adds up to its wall time.
func (s *signalEnv) expectRecord(t *testing.T, status string, reason any) {
	t.Helper()
	attrs := s.runState(t)
	if attrs == nil {
		t.Errorf("the run is not in the state; want it recorded as %s (%v)", status, reason)
		return
	}
	if attrs["status"] != status || attrs["status_reason"] != reason {
		t.Errorf("the run is recorded as %v (%v), want %s (%v)", attrs["status"], attrs["status_reason"], status, reason)
	}
	seconds, err := timelineOf(attrs, nil)
	if err != nil {
		t.Error(err)
	}
	t.Logf("the run's timeline: %v", seconds)
}

// TestAccRun_timelineImagePull: a run whose image the node does not have
// yet shows the pull in its timeline's image step. The image is a copy of
// the test image that a registry on 127.0.0.1 serves under a repository of
// its own (with a top layer of its own), each blob download held back
// pullDelay. The first run's image step lasts at least pullDelay and says
// "pulled in", and the registry served blobs; a second run of the same
// image finds it on the node: its image step is short and the registry
// sees no request. Both timelines add up to the runs' wall time.
func TestAccRun_timelineImagePull(t *testing.T) {
	e := newTestEnv(t)
	const pullDelay = 3 * time.Second
	img := acctest.ServeTestImage(t, pullDelay)
	ns := e.namespace("kp-pull")
	group := e.providerBlock() + fmt.Sprintf(`
resource "kubeplay_container_group" "g" {
  name      = %q
  namespace = %q
  image     = %q
}
`, randName("grp"), ns, img.Ref)
	run := func(name string) string {
		return fmt.Sprintf(`
resource "kubeplay_run" %q {
  container_group = kubeplay_container_group.g.name
  command         = ["true"]
}
`, name)
	}
	succeeded := func(addr string, then func(map[string]float64) error) []statecheck.StateCheck {
		return []statecheck.StateCheck{
			statecheck.ExpectKnownValue(addr, tfjsonpath.New("status"), knownvalue.StringExact(runner.StatusSuccessful)),
			statecheck.ExpectKnownValue(addr, tfjsonpath.New("status_reason"), knownvalue.Null()),
			expectTimeline{addr: addr, steps: coldSteps, then: then},
		}
	}
	var blobs, manifests int64 // the registry's counts after the first run
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{
			{
				Config: group + run("cold"),
				ConfigStateChecks: append(succeeded("kubeplay_run.cold", func(secs map[string]float64) error {
					blobs, manifests = img.BlobGets(), img.ManifestRequests()
					t.Logf("first run (pull): %v; registry: %d blob downloads, %d manifest requests", secs, blobs, manifests)
					if blobs == 0 || manifests == 0 {
						return fmt.Errorf("the registry served %d blobs and %d manifests: the node did not pull %s", blobs, manifests, img.Ref)
					}
					if secs["image"] < pullDelay.Seconds()-0.1 {
						return fmt.Errorf("image step %.3fs, want at least the registry's delay %s: %v", secs["image"], pullDelay, secs)
					}
					return nil
				}), statecheck.ExpectKnownValue("kubeplay_run.cold", tfjsonpath.New("timeline").AtSliceIndex(4).AtMapKey("detail"),
					knownvalue.StringRegexp(regexp.MustCompile(`^pulled in \d`)))),
				Check: e.checkNoRunPods(ns),
			},
			{
				// The image is on the node now: the second run does not pull.
				Config: group + run("cold") + run("warm"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("kubeplay_run.cold", plancheck.ResourceActionNoop),
					plancheck.ExpectResourceAction("kubeplay_run.warm", plancheck.ResourceActionCreate),
				}},
				ConfigStateChecks: succeeded("kubeplay_run.warm", func(secs map[string]float64) error {
					t.Logf("second run (image present): %v", secs)
					if b, m := img.BlobGets(), img.ManifestRequests(); b != blobs || m != manifests {
						return fmt.Errorf("the registry served %d more blobs and %d more manifests for the second run, want none",
							b-blobs, m-manifests)
					}
					if secs["image"] >= 1 {
						return fmt.Errorf("image step %.3fs with the image on the node, want under 1 s: %v", secs["image"], secs)
					}
					return nil
				}),
				Check: e.checkNoRunPods(ns),
			},
		},
	})
}

// jsonSeconds is a number as terraform show -json (json.Number, decoded
// with UseNumber) or a state file (float64) gives it.
func jsonSeconds(v any) (float64, error) {
	switch n := v.(type) {
	case json.Number:
		return n.Float64()
	case float64:
		return n, nil
	}
	return 0, fmt.Errorf("no seconds: %v", v)
}
