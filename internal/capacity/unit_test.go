// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package capacity

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

// TestMain turns off client-go's watch-list: the fake clientset does not
// send the bookmark that ends its initial events, so the watch-based waits
// of DeleteQuota would never sync against it. The feature gate is read once
// per process, so acceptance tests wait with a list and a watch too, which
// waitfor handles alike.
func TestMain(m *testing.M) {
	os.Setenv("KUBE_FEATURE_WatchListClient", "false")
	os.Exit(m.Run())
}

func TestApplyQuotaFake(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	quotas := kube.CoreV1().ResourceQuotas("runs")
	if err := ApplyQuota(ctx, kube, "g", "runs", Limits{MaxConcurrentRuns: ptr.To[int64](2)}, managed.Owner{}, false); err != nil {
		t.Fatal(err)
	}
	q, err := quotas.Get(ctx, "kubeplay-g", metav1.GetOptions{})
	if err != nil || q.Spec.Hard.Pods().Value() != 2 {
		t.Fatalf("created %+v, %v", q, err)
	}
	// An update sets exactly the group's limits: a limit added by hand goes.
	q.Spec.Hard[corev1.ResourceLimitsCPU] = q.Spec.Hard[corev1.ResourcePods]
	if _, err := quotas.Update(ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := ApplyQuota(ctx, kube, "g", "runs", Limits{MaxCores: "3"}, managed.Owner{}, false); err != nil {
		t.Fatal(err)
	}
	q, _ = quotas.Get(ctx, "kubeplay-g", metav1.GetOptions{})
	if cpu := q.Spec.Hard[corev1.ResourceRequestsCPU]; len(q.Spec.Hard) != 1 || cpu.String() != "3" {
		t.Errorf("updated hard = %v", q.Spec.Hard)
	}
	if err := ApplyQuota(ctx, kube, "g", "runs", Limits{MaxCores: "many"}, managed.Owner{}, false); err == nil {
		t.Error("a malformed max_cores was applied")
	}
	if err := ApplyQuota(ctx, kube, "g", "runs", Limits{}, managed.Owner{}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := quotas.Get(ctx, "kubeplay-g", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("empty limits left the quota: %v", err)
	}
	if err := DeleteQuota(ctx, kube, "g", "runs", managed.Owner{}); err != nil {
		t.Errorf("deleting a quota that is gone: %v", err)
	}
}

func TestNamespaceUsersFake(t *testing.T) {
	pod := func(name, group string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "runs",
			Labels: map[string]string{managed.LabelContainerGroup: group}}}
	}
	other := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "team-limits", Namespace: "runs"}}
	own := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: QuotaName("g"), Namespace: "runs"}}
	kube := fake.NewClientset(pod("run-1", "g"), pod("a", ""), pod("b", "h"), pod("c", ""), pod("d", ""), other, own)
	users, err := NamespaceUsers(context.Background(), kube, "runs", "g")
	if err != nil || len(users) != 2 {
		t.Fatalf("users = %q, %v", users, err)
	}
	if !strings.HasPrefix(users[0], "4 pods that are not this group's runs (") || strings.Count(users[0], ",") != 2 {
		t.Errorf("pods: %q, want 4 counted and 3 named", users[0])
	}
	if users[1] != `ResourceQuota "team-limits"` {
		t.Errorf("quotas: %q", users[1])
	}
}

func TestLedgerEnsureDeleteRelease(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	led := Ledger{Kube: kube, Namespace: "runs", Group: "g"}
	if err := led.Release(ctx, "r1"); err != nil {
		t.Errorf("releasing in a group without a ledger: %v", err)
	}
	if err := led.Ensure(ctx, 3); err != nil {
		t.Fatal(err)
	}
	cms := kube.CoreV1().ConfigMaps("runs")
	cm, err := cms.Get(ctx, LedgerName("g"), metav1.GetOptions{})
	if err != nil || cm.Annotations[AnnotationMaxForks] != "3" || cm.Labels[managed.LabelContainerGroup] != "g" {
		t.Fatalf("ledger = %+v, %v", cm, err)
	}
	// A new limit keeps the claims.
	cm.Data = map[string]string{"r1": `{"forks":2,"expires":"2999-01-01T00:00:00Z"}`}
	cm.Annotations = nil
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := led.Ensure(ctx, 5); err != nil {
		t.Fatal(err)
	}
	cm, _ = cms.Get(ctx, LedgerName("g"), metav1.GetOptions{})
	if cm.Annotations[AnnotationMaxForks] != "5" || cm.Data["r1"] == "" {
		t.Errorf("after a new limit: %+v", cm)
	}
	if err := led.Release(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	if err := led.Release(ctx, "r1"); err != nil {
		t.Errorf("releasing twice: %v", err)
	}
	cm, _ = cms.Get(ctx, LedgerName("g"), metav1.GetOptions{})
	if len(cm.Data) != 0 {
		t.Errorf("claims after the release: %v", cm.Data)
	}
	runs := Ledger{Kube: kube, Namespace: "runs", Group: "g", Kind: Runs}
	if runs.ConfigMapName() != "kubeplay-runs-g" || led.ConfigMapName() != LedgerName("g") {
		t.Errorf("names: %s %s", runs.ConfigMapName(), led.ConfigMapName())
	}
	for _, l := range []Ledger{led, runs} {
		if err := l.Delete(ctx); err != nil {
			t.Errorf("deleting %s: %v", l.ConfigMapName(), err)
		}
	}
	if _, err := cms.Get(ctx, LedgerName("g"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the ledger survived Delete: %v", err)
	}
}

// Acquisitions that need no wait: refusals, a claim that fits, and the
// reaping of a claim past its deadline.
func TestAcquireWithoutWaiting(t *testing.T) {
	ctx := context.Background()
	// Updates conflict on a stale resourceVersion, as the API server's do:
	// the process's copy of the ledger is older than the test's writes.
	kube, _ := rvClientset()
	led := Ledger{Kube: kube, Namespace: "runs", Group: "g", Kind: Runs}
	if _, err := led.Acquire(ctx, "r1", 1, time.Minute); !errors.Is(err, ErrNoLedger) {
		t.Errorf("without a ledger: %v", err)
	}
	if _, err := led.Acquire(ctx, "not a key!", 1, time.Minute); err == nil {
		t.Error("an invalid run id was accepted")
	}
	if _, err := led.Acquire(ctx, "r1", 0, time.Minute); err == nil {
		t.Error("zero forks were accepted")
	}
	if err := led.Ensure(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := led.Acquire(ctx, "r1", 3, time.Minute); err == nil || !strings.Contains(err.Error(), "run slots (max_concurrent_runs)") {
		t.Errorf("more than the limit: %v", err)
	}
	cms := kube.CoreV1().ConfigMaps("runs")
	cm, _ := cms.Get(ctx, "kubeplay-runs-g", metav1.GetOptions{})
	cm.Data = map[string]string{"dead": `{"forks":2,"expires":"2000-01-01T00:00:00Z"}`, "garbage": "{"}
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	g, err := led.Acquire(ctx, "r1", 2, time.Minute)
	if err != nil || g.Waited || len(g.Reaped) != 1 || g.Reaped[0] != "dead" {
		t.Fatalf("grant %+v, %v; want r1 granted at once and the dead claim reaped", g, err)
	}
	cm, _ = cms.Get(ctx, "kubeplay-runs-g", metav1.GetOptions{})
	if _, ok := cm.Data["r1"]; !ok || len(cm.Data) != 1 {
		t.Errorf("ledger after the grant: %v", cm.Data)
	}
	cm.Annotations[AnnotationMaxForks] = "lots"
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := led.Acquire(ctx, "r2", 1, time.Minute); err == nil || !strings.Contains(err.Error(), "no valid kubeplay.io/max-forks") {
		t.Errorf("a ledger without a valid limit: %v", err)
	}
}

// TestReleaseReapsExpired: a release also removes claims past their
// deadline (a killed run's, when the next run did not have to wait for it)
// and keeps live ones.
func TestReleaseReapsExpired(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	led := Ledger{Kube: kube, Namespace: "runs", Group: "g"}
	if err := led.Ensure(ctx, 10); err != nil {
		t.Fatal(err)
	}
	cms := kube.CoreV1().ConfigMaps("runs")
	cm, _ := cms.Get(ctx, LedgerName("g"), metav1.GetOptions{})
	cm.Data = map[string]string{
		"dead": `{"forks":5,"expires":"2000-01-01T00:00:00Z"}`,
		"live": `{"forks":2,"expires":"2999-01-01T00:00:00Z"}`,
		"mine": `{"forks":3,"expires":"2999-01-01T00:00:00Z"}`,
	}
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := led.Release(ctx, "mine"); err != nil {
		t.Fatal(err)
	}
	cm, _ = cms.Get(ctx, LedgerName("g"), metav1.GetOptions{})
	if _, ok := cm.Data["live"]; !ok || len(cm.Data) != 1 {
		t.Errorf("ledger after the release: %v, want only the live claim", cm.Data)
	}
	// A release of a claim that is gone still removes an expired one.
	cm.Data["dead"] = `{"forks":5,"expires":"2000-01-01T00:00:00Z"}`
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := led.Release(ctx, "mine"); err != nil {
		t.Fatal(err)
	}
	cm, _ = cms.Get(ctx, LedgerName("g"), metav1.GetOptions{})
	if _, ok := cm.Data["dead"]; ok {
		t.Errorf("the expired claim survived a release: %v", cm.Data)
	}
}

func TestAppendRecent(t *testing.T) {
	lines := ""
	for i := range MaxRecentRuns + 7 {
		lines = appendRecent(lines, fmt.Sprintf(`{"id":"%d"}`, i))
	}
	got := strings.Split(lines, "\n")
	if len(got) != MaxRecentRuns || got[0] != `{"id":"7"}` || got[len(got)-1] != fmt.Sprintf(`{"id":"%d"}`, MaxRecentRuns+6) {
		t.Errorf("kept %d records, first %s, last %s; want the last %d", len(got), got[0], got[len(got)-1], MaxRecentRuns)
	}
}
