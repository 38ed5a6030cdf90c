// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/nodefit"
)

// TestCapacityWarning: each finding of the node capacity check is one
// warning, at the attribute to change, with the numbers and the remedy.
func TestCapacityWarning(t *testing.T) {
	nodeA := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: k8sresource.MustParse("2"), corev1.ResourceMemory: k8sresource.MustParse("4Gi"), corev1.ResourcePods: k8sresource.MustParse("110"),
	}}}
	nodeB := *nodeA.DeepCopy()
	nodeB.Name = "node-b"
	runPod := func(cpu string, selector map[string]string) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: selector, Containers: []corev1.Container{{Name: "worker",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: k8sresource.MustParse(cpu), corev1.ResourceMemory: k8sresource.MustParse("64Mi")}}}}}}
	}
	group := func(runs *int64, warm int64) catalog.Group {
		return catalog.Group{Name: "g", MaxConcurrentRuns: runs, WarmPods: warm, PodPendingTimeout: "5m"}
	}
	cases := []struct {
		name    string
		g       catalog.Group
		pod     *corev1.Pod
		nodes   []corev1.Node
		summary string // "": no warning
		at      path.Path
		detail  []string
	}{
		{name: "over one node", g: group(ptr.To[int64](20), 0), pod: runPod("250m", nil), nodes: []corev1.Node{nodeA},
			summary: "Run Pods Exceed Node Capacity", at: path.Root("max_concurrent_runs"),
			detail: []string{"max_concurrent_runs = 20 run pods each requesting cpu 250m, memory 64Mi; the 1 node of https://h they " +
				"can land on (node-a: cpu 2 allocatable, room for 8) holds at most 8 at once, ignoring what else runs there.",
				"up to pod_pending_timeout (5m)", "cluster autoscaler or Karpenter", "Lower max_concurrent_runs, lower the pod's requests, or add nodes."}},
		{name: "over two nodes", g: group(ptr.To[int64](5), 0), pod: runPod("1", nil), nodes: []corev1.Node{nodeB, nodeA},
			summary: "Run Pods Exceed Node Capacity", at: path.Root("max_concurrent_runs"),
			detail: []string{"the 2 nodes of https://h they can land on (node-a: cpu 2 allocatable, room for 2; node-b: cpu 2 allocatable, " +
				"room for 2) hold at most 4 at once"}},
		{name: "within", g: group(ptr.To[int64](8), 0), pod: runPod("250m", nil), nodes: []corev1.Node{nodeA}},
		{name: "warm pods count", g: group(ptr.To[int64](6), 3), pod: runPod("250m", nil), nodes: []corev1.Node{nodeA},
			summary: "Run Pods Exceed Node Capacity", at: path.Root("max_concurrent_runs"),
			detail: []string{"max_concurrent_runs = 6 run pods and warm_pods = 3 warm pods, 9 pods each requesting", "at most 8 at once"}},
		{name: "warm pods alone", g: group(nil, 10), pod: runPod("250m", nil), nodes: []corev1.Node{nodeA},
			summary: "Run Pods Exceed Node Capacity", at: path.Root("warm_pods"),
			detail: []string{"warm_pods = 10 warm pods each requesting", "Lower warm_pods"}},
		{name: "unlimited", g: group(nil, 0), pod: runPod("1", nil), nodes: []corev1.Node{nodeA}},
		{name: "no node matches", g: group(nil, 0), pod: runPod("250m", map[string]string{"kubeplay.test/capacity": "none"}),
			nodes: []corev1.Node{nodeA}, summary: "No Node Can Take Run Pods", at: path.Root("pod_spec_override"),
			detail: []string{`No node of https://h (1 in all) can take the run pods of container group "g": 1 does not ` +
				"match the pod's nodeSelector kubeplay.test/capacity=none.", "add one that matches", "in pod_spec_override"}},
		{name: "no node at all", g: group(ptr.To[int64](1), 0), pod: runPod("250m", nil),
			summary: "No Node Can Take Run Pods", at: path.Root("pod_spec_override"), detail: []string{"has no node"}},
		{name: "larger than any node", g: group(ptr.To[int64](1), 0), pod: runPod("4", nil), nodes: []corev1.Node{nodeA},
			summary: "Run Pod Larger Than Any Node", at: path.Root("pod_spec_override"),
			detail: []string{`The run pod of container group "g" requests cpu 4 (node node-a allocates 2), so no node it can land on (1 node) can ever hold it`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := capacityWarning(c.g, "https://h", nodefit.Hold(c.pod, c.nodes))
			if c.summary == "" {
				if d != nil {
					t.Fatalf("got %q: %s", d.Summary(), d.Detail())
				}
				return
			}
			if d == nil {
				t.Fatal("no warning")
			}
			wp, _ := d.(diag.DiagnosticWithPath)
			if d.Severity() != diag.SeverityWarning || d.Summary() != c.summary || wp == nil || !wp.Path().Equal(c.at) {
				t.Fatalf("got %v %q at %v, want a warning %q at %v", d.Severity(), d.Summary(), wp, c.summary, c.at)
			}
			for _, w := range c.detail {
				if !strings.Contains(d.Detail(), w) {
					t.Errorf("detail %q lacks %q", d.Detail(), w)
				}
			}
		})
	}
}

// TestCapacityChanged: the check runs on create and when what it reads
// changes, not on a plan that changes something else.
func TestCapacityChanged(t *testing.T) {
	state := containerGroupModel{Credential: types.StringValue("c"), MaxConcurrentRuns: types.Int64Value(5),
		WarmPods: types.Int64Value(0), RenderedPod: types.StringValue("pod"), Image: types.StringValue("i")}
	if !capacityChanged(true, containerGroupModel{}, state, "pod") {
		t.Error("create: no check")
	}
	for name, change := range map[string]func(*containerGroupModel){
		"credential":          func(m *containerGroupModel) { m.Credential = types.StringNull() },
		"max_concurrent_runs": func(m *containerGroupModel) { m.MaxConcurrentRuns = types.Int64Value(6) },
		"warm_pods":           func(m *containerGroupModel) { m.WarmPods = types.Int64Value(1) },
	} {
		plan := state
		change(&plan)
		if !capacityChanged(false, state, plan, "pod") {
			t.Errorf("%s changed: no check", name)
		}
	}
	if !capacityChanged(false, state, state, "other pod") {
		t.Error("rendered_pod changed: no check")
	}
	plan := state
	plan.MaxForks = types.Int64Value(3)
	if capacityChanged(false, state, plan, "pod") {
		t.Error("max_forks changed: checked")
	}
}

// planDiagnostics records the diagnostics that the provider returns when it
// plans container groups: terraform-plugin-testing shows a test errors but
// not warnings. Each Terraform command starts a provider server from
// factories, so the record spans the commands of a step.
type planDiagnostics struct {
	mu    sync.Mutex
	diags []*tfprotov6.Diagnostic
}

func (p *planDiagnostics) factories() map[string]func() (tfprotov6.ProviderServer, error) {
	return map[string]func() (tfprotov6.ProviderServer, error){
		"kubeplay": func() (tfprotov6.ProviderServer, error) {
			s, err := testAccProtoV6ProviderFactories["kubeplay"]()
			return &recordingServer{ProviderServer: s, rec: p}, err
		},
	}
}

func (p *planDiagnostics) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.diags = nil
}

// with returns the recorded diagnostics whose summary is one of summaries.
func (p *planDiagnostics) with(summaries ...string) []*tfprotov6.Diagnostic {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*tfprotov6.Diagnostic
	for _, d := range p.diags {
		if slices.Contains(summaries, d.Summary) {
			out = append(out, d)
		}
	}
	return out
}

type recordingServer struct {
	tfprotov6.ProviderServer
	rec *planDiagnostics
}

func (s *recordingServer) PlanResourceChange(ctx context.Context, req *tfprotov6.PlanResourceChangeRequest) (*tfprotov6.PlanResourceChangeResponse, error) {
	resp, err := s.ProviderServer.PlanResourceChange(ctx, req)
	if resp != nil && req.TypeName == "kubeplay_container_group" {
		s.rec.mu.Lock()
		s.rec.diags = append(s.rec.diags, resp.Diagnostics...)
		s.rec.mu.Unlock()
	}
	return resp, err
}

var capacitySummaries = []string{"Run Pods Exceed Node Capacity", "No Node Can Take Run Pods",
	"Run Pod Larger Than Any Node", "Node Capacity Not Checked"}

// expectCapacityWarning is a plan check that the plans of the step so far
// warned summary at attribute at, with each of detail in the warning; with
// summary "", that they gave none of the capacity check's diagnostics.
type expectCapacityWarning struct {
	rec     *planDiagnostics
	summary string
	at      string
	detail  []string
}

func (e expectCapacityWarning) CheckPlan(_ context.Context, _ plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	got := e.rec.with(capacitySummaries...)
	if e.summary == "" {
		for _, d := range got {
			resp.Error = errors.Join(resp.Error, fmt.Errorf("unexpected %s %q: %s", d.Severity, d.Summary, d.Detail))
		}
		return
	}
	if len(got) == 0 {
		resp.Error = fmt.Errorf("no %q warning", e.summary)
		return
	}
	for _, d := range got {
		at := ""
		if d.Attribute != nil {
			at = d.Attribute.String()
		}
		if d.Severity != tfprotov6.DiagnosticSeverityWarning || d.Summary != e.summary || !strings.Contains(at, e.at) {
			resp.Error = errors.Join(resp.Error, fmt.Errorf("got %s %q at %s, want a warning %q at %s: %s", d.Severity, d.Summary, at, e.summary, e.at, d.Detail))
			continue
		}
		for _, w := range e.detail {
			if !strings.Contains(d.Detail, w) {
				resp.Error = errors.Join(resp.Error, fmt.Errorf("warning %q lacks %q", d.Detail, w))
			}
		}
	}
}

// nodeRoomForCPU is how many pods of 1 CPU and 100Mi the test cluster's
// nodes that take the default run pod hold, and the names of those nodes.
func nodeRoomForCPU(t *testing.T, e *testEnv) (int64, []string) {
	nodes, err := e.kube.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var room int64
	var names []string
	for _, n := range nodes.Items {
		if n.Spec.Unschedulable || slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Effect != corev1.TaintEffectPreferNoSchedule }) {
			continue
		}
		a := n.Status.Allocatable
		holds := min(a.Cpu().MilliValue()/1000, a.Memory().Value()/(100<<20), a.Pods().Value())
		room += holds
		names = append(names, fmt.Sprintf("%s: cpu %s allocatable, room for %d", n.Name, a.Cpu(), holds))
	}
	return room, names
}

// TestAccContainerGroup_nodeCapacity plans a group whose max_concurrent_runs
// of 1-CPU pods exceeds what the test cluster's nodes hold: the plan warns
// with the numbers, at max_concurrent_runs. A plan that changes nothing asks
// again nothing; a group the nodes can hold, and one whose nodeSelector
// matches no node, are planned too.
func TestAccContainerGroup_nodeCapacity(t *testing.T) {
	e := newTestEnv(t)
	room, nodes := nodeRoomForCPU(t, e)
	if room == 0 || room >= 5 {
		t.Skipf("the test needs nodes that hold 1 to 4 pods of 1 CPU; these hold %d", room)
	}
	name, ns := randName("cap"), randName("kp-cap")
	t.Cleanup(func() { e.deleteNamespace(ns) })
	cfg := func(runs int64, override string) string {
		return groupConfig(e, fmt.Sprintf("  name                = %q\n  namespace           = %q\n  manage_namespace    = true\n"+
			"  image               = %q\n  max_concurrent_runs = %d\n  pod_spec_override   = <<-EOT\n%s  EOT\n",
			name, ns, acctest.TestImage(), runs, override))
	}
	const oneCPU = "    spec:\n      containers:\n      - name: worker\n        resources:\n          requests:\n            cpu: \"1\"\n"
	const nowhere = oneCPU + "      nodeSelector:\n        kubeplay.test/capacity: none\n"
	rec := &planDiagnostics{}
	none := expectCapacityWarning{rec: rec}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: rec.factories(),
		Steps: []resource.TestStep{
			{
				PreConfig: rec.reset,
				Config:    cfg(5, oneCPU),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(groupAddr, plancheck.ResourceActionCreate),
					expectCapacityWarning{rec: rec, summary: "Run Pods Exceed Node Capacity", at: "max_concurrent_runs", detail: []string{
						"max_concurrent_runs = 5 run pods each requesting cpu 1, memory 100Mi; the ",
						fmt.Sprintf("they can land on (%s) ", strings.Join(nodes, "; ")),
						fmt.Sprintf(" at most %d at once, ignoring what else runs there.", room),
						"a cluster autoscaler or Karpenter may add nodes", "Lower max_concurrent_runs",
					}},
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(groupAddr, tfjsonpath.New("max_concurrent_runs"), knownvalue.Int64Exact(5)),
				},
			},
			{
				// Nothing changed: the nodes are not read again.
				PreConfig: rec.reset,
				Config:    cfg(5, oneCPU),
				PlanOnly:  true,
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{
					plancheck.ExpectEmptyPlan(), none,
				}},
			},
			{
				// As many runs as the nodes hold: no warning.
				PreConfig:          rec.reset,
				Config:             cfg(room, oneCPU),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(groupAddr, plancheck.ResourceActionUpdate), none,
				}},
			},
			{
				PreConfig:          rec.reset,
				Config:             cfg(room, nowhere),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{
					expectCapacityWarning{rec: rec, summary: "No Node Can Take Run Pods", at: "pod_spec_override", detail: []string{
						"can take the run pods of container group " + strconv.Quote(name),
						"match the pod's nodeSelector kubeplay.test/capacity=none.",
					}},
				}},
			},
		},
	})
}
