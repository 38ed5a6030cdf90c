// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

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
	pod, err := podspec.ToYAML(want)
	if err != nil {
		t.Fatal(err)
	}
	req.Planned = &Target{Pod: pod}
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
	x := Target{Group: "g", Server: "https://a", CASHA256: CASystem, Pod: "x", PodSHA256: PodSHA256("x")}
	if checkPlanned(nil, x) != nil || checkPlanned(&Target{}, x) != nil || checkPlanned(&x, x) != nil {
		t.Error("an unknown or equal plan refused")
	}
}

// checkPlanned compares the cluster (server, CA fingerprint) as well as the
// pod, by digest when the plan has no YAML of it (a group of several), and
// only what the plan knew (issue 40).
func TestCheckPlannedTarget(t *testing.T) {
	at := Target{Group: "g", Server: "https://10.0.0.1:6443", CASHA256: sha256Hex([]byte("ca")), Pod: "a: 1\n", PodSHA256: PodSHA256("a: 1\n")}
	for _, c := range []struct {
		name    string
		planned Target
		cluster bool
		diff    string
	}{
		{name: "server", planned: Target{Server: "https://10.0.0.2:6443", CASHA256: at.CASHA256, PodSHA256: at.PodSHA256},
			cluster: true, diff: "-server: https://10.0.0.2:6443\n+server: https://10.0.0.1:6443\n"},
		{name: "ca", planned: Target{Server: at.Server, CASHA256: CASystem, PodSHA256: at.PodSHA256},
			cluster: true, diff: "-ca_sha256: system\n+ca_sha256: " + at.CASHA256 + "\n"},
		{name: "pod digest", planned: Target{Server: at.Server, CASHA256: at.CASHA256, PodSHA256: PodSHA256("a: 2\n")},
			diff: "-pod_sha256: " + PodSHA256("a: 2\n") + "\n+pod_sha256: " + at.PodSHA256 + "\n"},
		{name: "pod yaml", planned: Target{Pod: "a: 2\n"}, diff: "-a: 2\n+a: 1\n"},
		{name: "server, cluster unknown", planned: Target{Server: "https://evil:6443"}, cluster: true, diff: "+server: https://10.0.0.1:6443\n"},
	} {
		err := checkPlanned(&c.planned, at)
		var pm *PlanMismatchError
		if !errors.As(err, &pm) || pm.Group != "g" || pm.Cluster != c.cluster || !strings.Contains(pm.Diff, c.diff) {
			t.Errorf("%s: %v, want a mismatch (cluster %v) with %q", c.name, err, c.cluster, c.diff)
		}
	}
	for _, known := range []Target{{Server: at.Server}, {CASHA256: at.CASHA256}, {PodSHA256: at.PodSHA256}, {Pod: at.Pod}} {
		if err := checkPlanned(&known, at); err != nil {
			t.Errorf("%+v: %v", known, err)
		}
	}
}

func TestClusterOf(t *testing.T) {
	if s, ca := ClusterOf(&rest.Config{Host: "https://h"}); s != "https://h" || ca != CASystem {
		t.Errorf("system roots: %s %s", s, ca)
	}
	if _, ca := ClusterOf(&rest.Config{Host: "https://h", TLSClientConfig: rest.TLSClientConfig{Insecure: true}}); ca != CAInsecure {
		t.Errorf("insecure: %s", ca)
	}
	if _, ca := ClusterOf(&rest.Config{Host: "https://h", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("pem")}}); ca != sha256Hex([]byte("pem")) {
		t.Errorf("CA data: %s", ca)
	}
	f := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(f, []byte("pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ca := ClusterOf(&rest.Config{Host: "https://h", TLSClientConfig: rest.TLSClientConfig{CAFile: f}}); ca != sha256Hex([]byte("pem")) {
		t.Errorf("CA file: %s", ca)
	}
}

// Each group of a multi-group run is held to its own planned target: the
// second group's pod or cluster changed since the plan stops the run before
// any pod or claim exists, though the first group is as planned; the
// targets at apply are returned one per candidate (issue 40).
func TestPlaceHoldsEveryGroupToItsTarget(t *testing.T) {
	f := newFake(t)
	runs, _ := f.ledger(capacity.Runs, 1), f.ledger(capacity.Forks, 10)
	g1, g2 := limitedGroup(10), limitedGroup(10)
	g2.Name = "g2"
	req := request(g1)
	planned := func(g Group) *Target {
		pod, err := RenderPod(g, nil, RunInfo{Name: req.Name}, PodDeadline(req.Timeout))
		if err != nil {
			t.Fatal(err)
		}
		y, _ := podspec.ToYAML(pod)
		server, ca := ClusterOf(f.e.clients.Config)
		return &Target{Group: g.Name, Server: server, CASHA256: ca, PodSHA256: PodSHA256(y)}
	}
	p1, p2 := planned(g1), planned(g2)
	changed := g2
	changed.Pod.Image = "evil.example/root:latest"
	moved := *p2
	moved.Server = "https://elsewhere:6443"
	for _, c := range []struct {
		name    string
		g2      Group
		p2      *Target
		cluster bool
	}{{"pod", changed, p2, false}, {"server", g2, &moved, true}} {
		cands := []Candidate{{Engine: f.e, Group: g1, Planned: p1}, {Engine: f.e, Group: c.g2, Planned: c.p2}}
		_, _, err := Place(t.Context(), req, cands)
		var pm *PlanMismatchError
		if !errors.As(err, &pm) || pm.Group != "g2" || pm.Cluster != c.cluster {
			t.Fatalf("%s: err = %v, want a *PlanMismatchError for g2", c.name, err)
		}
	}
	if n := f.count("create", "pods"); n != 0 {
		t.Errorf("%d pods created", n)
	}
	if c := claims(t, runs); len(c) != 0 {
		t.Errorf("claims taken: %v", c)
	}
	out, _, err := Place(t.Context(), req, []Candidate{{Engine: f.e, Group: g1, Planned: p1}, {Engine: f.e, Group: g2, Planned: p2}})
	if err != nil {
		t.Fatalf("as planned: %v", err)
	}
	if len(out.Targets) != 2 || out.Targets[1].Group != "g2" || out.Targets[1].PodSHA256 != p2.PodSHA256 || out.Targets[0].Server != "https://fake" {
		t.Errorf("targets at apply: %+v", out.Targets)
	}
}
