// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"errors"
	"strings"
	"testing"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/capacity"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
)

// A run whose pod is not the planned one creates, claims and sends
// nothing; one whose pod is runs (finding 2, "what runs is what the plan
// showed").
func TestRunRefusesAPodOtherThanPlanned(t *testing.T) {
	f := newFake(t)
	runs, _ := f.ledger(capacity.Runs, 1), f.ledger(capacity.Forks, 10)
	req := request(limitedGroup(10))
	// The plan saw the group's pod; the group's image changed since.
	want, err := RenderPod(req.Group, nil, RunInfo{Name: req.Name}, PodDeadline(req.Timeout))
	if err != nil {
		t.Fatal(err)
	}
	if req.Planned, err = podspec.ToYAML(want); err != nil {
		t.Fatal(err)
	}
	req.Group.Pod.Image = "evil.example/root:latest"
	for _, cands := range [][]Candidate{{{Engine: f.e, Group: req.Group}}, {{Engine: f.e, Group: req.Group}, {Engine: f.e, Group: req.Group}}} {
		_, _, err = Place(t.Context(), req, cands)
		var pm *PlanMismatchError
		if !errors.As(err, &pm) || pm.Group != "g" {
			t.Fatalf("%d candidates: err = %v, want *PlanMismatchError", len(cands), err)
		}
		if !strings.Contains(pm.Diff, "\n-    image: img:1\n+    image: evil.example/root:latest\n") {
			t.Errorf("diff:\n%s", pm.Diff)
		}
	}
	if n := f.count("create", "pods"); n != 0 {
		t.Errorf("%d pods created", n)
	}
	if c := claims(t, runs); len(c) != 0 {
		t.Errorf("claims taken: %v", c)
	}
	// The pod as planned runs.
	req.Group = limitedGroup(10)
	if _, err := f.e.Run(t.Context(), req); err != nil {
		t.Fatalf("the planned pod: %v", err)
	}
	if n := f.count("create", "pods"); n == 0 {
		t.Error("the planned pod was not created")
	}
}

func TestUnifiedDiff(t *testing.T) {
	a := "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n"
	b := "a\nb\nC\nd\ne\nf\ng\nh\ni\nj\nk\n"
	got := unifiedDiff(a, b, "planned", "apply")
	want := "--- planned\n+++ apply\n@@ -1,5 +1,5 @@\n a\n b\n-c\n+C\n d\n e\n@@ -9,2 +9,3 @@\n i\n j\n+k\n"
	if got != want {
		t.Errorf("diff:\n%s\nwant:\n%s", got, want)
	}
	if checkPlanned("g", "", "x") != nil || checkPlanned("g", "x", "x") != nil {
		t.Error("an unknown or equal plan refused")
	}
}
