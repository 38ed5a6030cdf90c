// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/capacity"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

// ledgerMap is a group's ledger ConfigMap with a claim per run key that
// expires at the given offset from now.
func ledgerMap(group, kind string, now time.Time, claims map[string]time.Duration) *corev1.ConfigMap {
	l := capacity.Ledger{Namespace: "runs", Group: group, Kind: kind}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: l.ConfigMapName(), Namespace: "runs",
		Labels: managed.Labels(managed.LabelContainerGroup, group)}, Data: map[string]string{}}
	for key, d := range claims {
		cm.Data[key] = fmt.Sprintf(`{"forks":1,"expires":%q}`, now.Add(d).Format(time.RFC3339Nano))
	}
	return cm
}

// TestRunPodsLiveness: a pod whose run renews its claim is live; one whose
// claim expired or is gone, or that ended, is orphaned; without a ledger a
// running pod's liveness is unknown.
func TestRunPodsLiveness(t *testing.T) {
	now := time.Now()
	deleting := runPod("deleting", "runs", "g", corev1.PodRunning, time.Second)
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	dryRun := runPod("dry", "runs", "g", corev1.PodRunning, time.Second)
	dryRun.Labels[managed.LabelRun] = "dry-run"
	objs := []runtime.Object{
		runPod("live", "runs", "g", corev1.PodRunning, time.Second),
		runPod("expired", "runs", "g", corev1.PodRunning, time.Second),
		runPod("unclaimed", "runs", "g", corev1.PodRunning, time.Second),
		runPod("ended", "runs", "g", corev1.PodFailed, time.Second),
		deleting, dryRun,
		runPod("nolimit", "runs", "h", corev1.PodRunning, time.Second),
		ledgerMap("g", capacity.Runs, now, map[string]time.Duration{"live-create": 20 * time.Second, "expired-create": -time.Second, "ended-create": time.Minute}),
	}
	kube := fake.NewClientset(objs...)
	g := Group{Name: "g", Namespace: "runs", MaxConcurrentRuns: ptr.To[int64](2), MaxForks: ptr.To[int64](4)}
	pods, err := RunPods(context.Background(), kube, g, now)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Liveness{}
	for _, p := range pods {
		got[p.RunID] = p.Liveness
	}
	want := map[string]Liveness{"live": Live, "expired": Orphaned, "unclaimed": Orphaned, "ended": Orphaned, "deleting": Deleting}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("liveness %v, want %v", got, want)
	}
	pods, err = RunPods(context.Background(), kube, Group{Name: "h", Namespace: "runs"}, now)
	if err != nil || len(pods) != 1 || pods[0].Liveness != Running {
		t.Errorf("a group without ledgers: %+v, %v; want one pod of unknown liveness (running)", pods, err)
	}
}

// A pod's phase is any text its status writer sets: terraform query shows
// only the API's phases, anything else as Unknown.
func TestRunPodsPhaseIsTheAPIs(t *testing.T) {
	forged := runPod("forged", "runs", "g", corev1.PodPhase("Running\x1b]8;;https://example.com\x07"), time.Second)
	kube := fake.NewClientset(forged, runPod("ok", "runs", "g", corev1.PodSucceeded, time.Second))
	pods, err := RunPods(context.Background(), kube, Group{Name: "g", Namespace: "runs"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]corev1.PodPhase{}
	for _, p := range pods {
		got[p.RunID] = p.Phase
	}
	if got["forged"] != corev1.PodUnknown || got["ok"] != corev1.PodSucceeded {
		t.Errorf("phases %q, want forged Unknown and ok Succeeded", got)
	}
}
