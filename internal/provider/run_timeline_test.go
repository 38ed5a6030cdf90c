// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
)

// TestAccRun_timelineImagePull: a run whose image the node does not have
// yet shows the pull in its timeline. The image is a copy of the test image
// that a registry on 127.0.0.1 serves under a repository of its own (with a
// top layer of its own), each blob download held back pullDelay. The first
// run's pull, from the pod's binding until its container ran, lasts at
// least pullDelay, and the registry served blobs; a second run of the same
// image finds it on the node: that time is short and the registry sees no
// request. For both, the steps add up to the time from started_at to
// finished_at.
//
// The pull is in the sandbox step, not the image step: the kubelet creates
// the sandbox, pulls the image and starts the container in one pass of its
// pod worker, and reports the pod's status (PodReadyToStartContainers, the
// sandbox step's end) only after it, with the container running. So the
// image step lasts about 0 s whether or not the node pulled, and the test
// measures sandbox + image (pullSeconds).
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
	succeeded := func(addr string) []statecheck.StateCheck {
		return []statecheck.StateCheck{
			statecheck.ExpectKnownValue(addr, tfjsonpath.New("status"), knownvalue.StringExact(runner.StatusSuccessful)),
			statecheck.ExpectKnownValue(addr, tfjsonpath.New("status_reason"), knownvalue.Null()),
			statecheck.ExpectKnownValue(addr, tfjsonpath.New("exit_code"), knownvalue.Int64Exact(0)),
		}
	}
	var blobs, manifests int64 // the registry's counts after the first run
	var cold float64           // the first run's pullSeconds
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{
			{
				Config:            group + run("cold"),
				ConfigStateChecks: succeeded("kubeplay_run.cold"),
				Check: resource.ComposeAggregateTestCheckFunc(
					func(s *terraform.State) error {
						tl, err := runTimeline(s, "kubeplay_run.cold")
						if err != nil {
							return err
						}
						cold = tl.pullSeconds()
						t.Logf("first run (pull): %s", tl)
						blobs, manifests = img.BlobGets(), img.ManifestRequests()
						t.Logf("registry: %d blob downloads, %d manifest requests", blobs, manifests)
						if blobs == 0 || manifests == 0 {
							return fmt.Errorf("the registry served %d blobs and %d manifests: the node did not pull %s", blobs, manifests, img.Ref)
						}
						// Each download waited pullDelay; the time also holds the sandbox, the unpack and the start.
						if cold < pullDelay.Seconds()-0.1 {
							return fmt.Errorf("sandbox + image %.3fs, want at least the registry's delay %s: %s", cold, pullDelay, tl)
						}
						return tl.checkTotal()
					},
					e.checkNoRunPods(ns),
				),
			},
			{
				// The image is on the node now: the second run does not pull.
				Config: group + run("cold") + run("warm"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("kubeplay_run.cold", plancheck.ResourceActionNoop),
					plancheck.ExpectResourceAction("kubeplay_run.warm", plancheck.ResourceActionCreate),
				}},
				ConfigStateChecks: succeeded("kubeplay_run.warm"),
				Check: resource.ComposeAggregateTestCheckFunc(
					func(s *terraform.State) error {
						tl, err := runTimeline(s, "kubeplay_run.warm")
						if err != nil {
							return err
						}
						warm := tl.pullSeconds()
						t.Logf("second run (image present): %s", tl)
						t.Logf("sandbox + image: %.3fs pulling, %.3fs with the image present", cold, warm)
						if b, m := img.BlobGets(), img.ManifestRequests(); b != blobs || m != manifests {
							return fmt.Errorf("the registry served %d more blobs and %d more manifests for the second run, want none",
								b-blobs, m-manifests)
						}
						// No download to wait for: clearly shorter than one.
						if warm >= pullDelay.Seconds() {
							return fmt.Errorf("sandbox + image %.3fs with the image on the node, want under the registry's delay %s: %s",
								warm, pullDelay, tl)
						}
						return tl.checkTotal()
					},
					e.checkNoRunPods(ns),
				),
			},
		},
	})
}

// timeline is a run's timeline as its state has it, with the run's
// started_at and finished_at.
type timeline struct {
	steps             []timelineStep
	started, finished time.Time
}

type timelineStep struct {
	step    string
	seconds float64
}

// runTimeline reads the timeline of the run at addr from the state.
func runTimeline(s *terraform.State, addr string) (timeline, error) {
	rs, ok := s.RootModule().Resources[addr]
	if !ok {
		return timeline{}, fmt.Errorf("%s is not in the state", addr)
	}
	a := rs.Primary.Attributes
	var tl timeline
	var err error
	if tl.started, err = time.Parse(time.RFC3339, a["started_at"]); err != nil {
		return tl, fmt.Errorf("%s started_at: %w", addr, err)
	}
	if tl.finished, err = time.Parse(time.RFC3339, a["finished_at"]); err != nil {
		return tl, fmt.Errorf("%s finished_at: %w", addr, err)
	}
	n, err := strconv.Atoi(a["timeline.#"])
	if err != nil {
		return tl, fmt.Errorf("%s timeline.#: %w", addr, err)
	}
	for i := range n {
		step := timelineStep{step: a[fmt.Sprintf("timeline.%d.step", i)]}
		if step.seconds, err = strconv.ParseFloat(a[fmt.Sprintf("timeline.%d.seconds", i)], 64); err != nil {
			return tl, fmt.Errorf("%s timeline.%d.seconds: %w", addr, i, err)
		}
		tl.steps = append(tl.steps, step)
	}
	for _, step := range []string{runner.StepSandbox, runner.StepImage} {
		if tl.count(step) != 1 {
			return tl, fmt.Errorf("%s: want one %s step: %s", addr, step, tl)
		}
	}
	return tl, nil
}

// pullSeconds is the time from the pod's binding until its container ran,
// which holds the image's pull: the sandbox and image steps (see
// TestAccRun_timelineImagePull).
func (tl timeline) pullSeconds() float64 {
	return tl.seconds(runner.StepSandbox) + tl.seconds(runner.StepImage)
}

// seconds is the length of the step called name (all of them added).
func (tl timeline) seconds(name string) float64 {
	var sum float64
	for _, s := range tl.steps {
		if s.step == name {
			sum += s.seconds
		}
	}
	return sum
}

func (tl timeline) count(name string) int {
	var n int
	for _, s := range tl.steps {
		if s.step == name {
			n++
		}
	}
	return n
}

// checkTotal: the steps add up to finished_at - started_at. Those two have
// second precision (each cut, so their difference is within 1 s of the
// run's time) and each step is cut to the millisecond.
func (tl timeline) checkTotal() error {
	var sum float64
	for _, s := range tl.steps {
		sum += s.seconds
	}
	wall := tl.finished.Sub(tl.started).Seconds()
	if tolerance := 1 + 0.001*float64(len(tl.steps)+1); math.Abs(sum-wall) > tolerance {
		return fmt.Errorf("the steps add up to %.3fs, finished_at - started_at is %.0fs (%s to %s): want them within %.3fs: %s",
			sum, wall, tl.started.Format(time.RFC3339), tl.finished.Format(time.RFC3339), tolerance, tl)
	}
	return nil
}

func (tl timeline) String() string {
	parts := make([]string, 0, len(tl.steps))
	var sum float64
	for _, s := range tl.steps {
		parts = append(parts, fmt.Sprintf("%s %.3fs", s.step, s.seconds))
		sum += s.seconds
	}
	return fmt.Sprintf("%s (total %.3fs)", strings.Join(parts, ", "), sum)
}
