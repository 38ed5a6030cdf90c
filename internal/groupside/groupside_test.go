// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package groupside

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/capacity"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podsecurity"
)

// TestMain turns off client-go's watch-list: the fake clientset does not
// send the bookmark that ends its initial events, so waitfor's waits, which
// Remove uses, would never sync against it.
func TestMain(m *testing.M) {
	os.Setenv("KUBE_FEATURE_WatchListClient", "false")
	os.Exit(m.Run())
}

// runsNamespace is the namespace "runs" with labels.
func runsNamespace(labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "runs", Labels: labels}}
}

func forbid(kube *fake.Clientset, verb, resource string) {
	kube.PrependReactor(verb, resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "", errors.New("pod-manager only"))
	})
}

// writes lists the create, update, patch and delete actions, as "verb resource".
func writes(kube *fake.Clientset) []string {
	var out []string
	for _, a := range kube.Actions() {
		switch a.GetVerb() {
		case "create", "update", "patch", "delete":
			out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
		}
	}
	return out
}

func ptr(v int64) *int64 { return &v }

// A group with no limits needs nothing but pods: a credential with seed
// 001's pod-manager Role, which may not read namespaces or ConfigMaps, works.
func TestPodsOnlyToleratesForbidden(t *testing.T) {
	kube := fake.NewClientset()
	forbid(kube, "get", "namespaces")
	forbid(kube, "delete", "configmaps")
	out, err := Ensure(context.Background(), kube, Spec{Name: "g", Namespace: "runs"})
	if err != nil || out != PodsOnly {
		t.Fatalf("Ensure = %v, %v; want PodsOnly", out, err)
	}
	if w := writes(kube); len(w) != 0 {
		t.Errorf("a pods-only group wrote %v", w)
	}
	// Readable namespace, but the ledgers may not be deleted: still fine.
	kube = fake.NewClientset(runsNamespace(nil))
	forbid(kube, "delete", "configmaps")
	forbid(kube, "get", "resourcequotas")
	forbid(kube, "delete", "resourcequotas")
	if out, err := Ensure(context.Background(), kube, Spec{Name: "g", Namespace: "runs"}); err != nil || out != Ready {
		t.Fatalf("Ensure = %v, %v; want Ready", out, err)
	}
}

// The same refusal fails a group that needs the namespace.
func TestForbiddenFailsAGroupWithLimits(t *testing.T) {
	kube := fake.NewClientset()
	forbid(kube, "get", "namespaces")
	_, err := Ensure(context.Background(), kube, Spec{Name: "g", Namespace: "runs", MaxForks: ptr(3)})
	var ne *NamespaceError
	if !errors.As(err, &ne) || ne.Op != OpRead || !apierrors.IsForbidden(err) {
		t.Fatalf("err = %v, want a NamespaceError reading", err)
	}
	if !strings.Contains(err.Error(), `reading namespace "runs"`) {
		t.Errorf("error = %q", err)
	}
}

func TestNamespaceAdoptionRefused(t *testing.T) {
	kube := fake.NewClientset(runsNamespace(map[string]string{"app": "web"}))
	_, err := Ensure(context.Background(), kube, Spec{Name: "g", Namespace: "runs", ManageNamespace: true})
	var ee *NamespaceExistsError
	if !errors.As(err, &ee) || ee.Namespace != "runs" || ee.Group != "g" {
		t.Fatalf("err = %v, want NamespaceExistsError", err)
	}
	if w := writes(kube); len(w) != 0 {
		t.Errorf("a refused adoption wrote %v", w)
	}
	// Another group's namespace is not adopted either; the group's own is kept.
	kube = fake.NewClientset(runsNamespace(managed.Labels(managed.LabelContainerGroup, "other")))
	if _, err := Ensure(context.Background(), kube, Spec{Name: "g", Namespace: "runs", ManageNamespace: true}); !errors.As(err, &ee) {
		t.Errorf("another group's namespace: %v", err)
	}
	kube = fake.NewClientset(runsNamespace(managed.Labels(managed.LabelContainerGroup, "g")))
	if out, err := Ensure(context.Background(), kube, Spec{Name: "g", Namespace: "runs", ManageNamespace: true}); err != nil || out != Ready {
		t.Errorf("the group's own namespace: %v, %v", out, err)
	}
}

func TestMissingNamespace(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	_, err := Ensure(ctx, kube, Spec{Name: "g", Namespace: "runs", MaxForks: ptr(2)})
	var me *NamespaceMissingError
	if !errors.As(err, &me) || me.Namespace != "runs" {
		t.Fatalf("err = %v, want NamespaceMissingError", err)
	}
	if out, err := Ensure(ctx, kube, Spec{Name: "g", Namespace: "runs"}); err != nil || out != NamespaceAbsent {
		t.Fatalf("pods-only group: %v, %v; want NamespaceAbsent", out, err)
	}
	if w := writes(kube); len(w) != 0 {
		t.Errorf("wrote %v", w)
	}
	forbid(kube, "create", "namespaces")
	_, err = Ensure(ctx, kube, Spec{Name: "g", Namespace: "runs", ManageNamespace: true})
	var ne *NamespaceError
	if !errors.As(err, &ne) || ne.Op != OpCreate {
		t.Errorf("creating refused: %v", err)
	}
}

func TestEnsureAndRemove(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	s := Spec{Name: "g", Namespace: "runs", ManageNamespace: true, MaxForks: ptr(4),
		Limits: capacity.Limits{MaxConcurrentRuns: ptr(2), MaxCores: "2"}}
	if out, err := Ensure(ctx, kube, s); err != nil || out != Ready {
		t.Fatalf("Ensure = %v, %v", out, err)
	}
	core := kube.CoreV1()
	ns, err := core.Namespaces().Get(ctx, "runs", metav1.GetOptions{})
	if err != nil || ns.Labels[managed.LabelContainerGroup] != "g" || ns.Labels[managed.LabelManagedBy] != managed.ManagedByValue {
		t.Fatalf("namespace = %+v, %v", ns, err)
	}
	if q, err := core.ResourceQuotas("runs").Get(ctx, capacity.QuotaName("g"), metav1.GetOptions{}); err != nil || q.Spec.Hard.Pods().Value() != 2 {
		t.Errorf("quota = %+v, %v", q, err)
	}
	for _, name := range []string{capacity.LedgerName("g"), "kubeplay-runs-g"} {
		if _, err := core.ConfigMaps("runs").Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("ledger %s: %v", name, err)
		}
	}
	if m := Missing(ctx, kube, s); len(m) != 0 {
		t.Errorf("missing right after Ensure: %v", m)
	}
	// Limits dropped: the ledgers go.
	s.MaxForks, s.Limits.MaxConcurrentRuns = nil, nil
	if _, err := Ensure(ctx, kube, s); err != nil {
		t.Fatal(err)
	}
	if cms, _ := core.ConfigMaps("runs").List(ctx, metav1.ListOptions{}); len(cms.Items) != 0 {
		t.Errorf("ledgers left: %d", len(cms.Items))
	}
	if err := Remove(ctx, kube, s); err != nil {
		t.Fatal(err)
	}
	if _, err := core.Namespaces().Get(ctx, "runs", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the managed namespace survived Remove: %v", err)
	}
	if m := Missing(ctx, kube, s); !slices.Equal(m, []string{"namespace runs"}) {
		t.Errorf("missing = %v", m)
	}
}

func TestRemoveUnmanaged(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset(runsNamespace(nil))
	s := Spec{Name: "g", Namespace: "runs", MaxForks: ptr(1), Limits: capacity.Limits{MaxConcurrentRuns: ptr(1)}}
	if _, err := Ensure(ctx, kube, s); err != nil {
		t.Fatal(err)
	}
	if err := Remove(ctx, kube, s); err != nil {
		t.Fatal(err)
	}
	core := kube.CoreV1()
	if _, err := core.Namespaces().Get(ctx, "runs", metav1.GetOptions{}); err != nil {
		t.Errorf("an unmanaged namespace was deleted: %v", err)
	}
	if qs, _ := core.ResourceQuotas("runs").List(ctx, metav1.ListOptions{}); len(qs.Items) != 0 {
		t.Errorf("quota left")
	}
	if cms, _ := core.ConfigMaps("runs").List(ctx, metav1.ListOptions{}); len(cms.Items) != 0 {
		t.Errorf("ledgers left")
	}
	if m := Missing(ctx, kube, s); len(m) != 2 {
		t.Errorf("missing = %v, want the quota and the forks ledger", m)
	}
	// A pods-only group touches nothing.
	kube = fake.NewClientset()
	if err := Remove(ctx, kube, Spec{Name: "g", Namespace: "runs"}); err != nil || len(kube.Actions()) != 0 {
		t.Errorf("pods-only Remove: %v, actions %v", err, kube.Actions())
	}
	// Failures say what failed.
	kube = fake.NewClientset(runsNamespace(managed.Labels(managed.LabelContainerGroup, "g")))
	if _, err := Ensure(ctx, kube, s); err != nil {
		t.Fatal(err)
	}
	forbid(kube, "delete", "configmaps")
	var le *LedgerError
	if err := Remove(ctx, kube, s); !errors.As(err, &le) || le.Op != OpDelete || le.Kind != capacity.Runs {
		t.Errorf("err = %v, want a LedgerError deleting the runs ledger", err)
	}
	if _, err := Ensure(ctx, kube, s); err != nil {
		t.Fatal(err)
	}
	forbid(kube, "delete", "resourcequotas")
	var qe *QuotaError
	if err := Remove(ctx, kube, s); !errors.As(err, &qe) || qe.Op != OpDelete {
		t.Errorf("err = %v, want a QuotaError", err)
	}
	forbid(kube, "delete", "namespaces")
	var ne *NamespaceError
	if err := Remove(ctx, kube, Spec{Name: "g", Namespace: "runs", ManageNamespace: true}); !errors.As(err, &ne) || ne.Op != OpDelete {
		t.Errorf("err = %v, want a NamespaceError deleting", err)
	}
}

func TestEnsureErrors(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset(runsNamespace(nil))
	forbid(kube, "create", "resourcequotas")
	var qe *QuotaError
	_, err := Ensure(ctx, kube, Spec{Name: "g", Namespace: "runs", Limits: capacity.Limits{MaxCores: "1"}})
	if !errors.As(err, &qe) || qe.Op != OpWrite || qe.Name != "kubeplay-g" || !strings.Contains(err.Error(), "writing ResourceQuota runs/kubeplay-g") {
		t.Errorf("err = %v", err)
	}
	kube = fake.NewClientset(runsNamespace(nil))
	forbid(kube, "create", "configmaps")
	var le *LedgerError
	_, err = Ensure(ctx, kube, Spec{Name: "g", Namespace: "runs", MaxForks: ptr(2)})
	if !errors.As(err, &le) || le.Kind != capacity.Forks || le.Name != capacity.LedgerName("g") {
		t.Errorf("err = %v, want a LedgerError on the forks ledger", err)
	}
	_, err = Ensure(ctx, kube, Spec{Name: "g", Namespace: "runs", Limits: capacity.Limits{MaxConcurrentRuns: ptr(2)}})
	if !errors.As(err, &le) || le.Kind != capacity.Runs || le.Name != "kubeplay-runs-g" {
		t.Errorf("err = %v, want a LedgerError on the runs ledger", err)
	}
}

func TestSharing(t *testing.T) {
	ctx := context.Background()
	web := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "runs"}}
	run := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "run-1", Namespace: "runs",
		Labels: map[string]string{managed.LabelContainerGroup: "g"}}}
	kube := fake.NewClientset(runsNamespace(nil), web, run)
	s := Spec{Name: "g", Namespace: "runs"}
	others := []Spec{s, {Name: "h", Namespace: "runs"}, {Name: "i", Namespace: "elsewhere"}}
	users, err := Sharing(ctx, kube, s, others)
	if err != nil || len(users) != 2 || users[0] != `container group "h"` || !strings.Contains(users[1], "(web)") {
		t.Errorf("users = %q, %v", users, err)
	}
	forbid(kube, "list", "pods")
	users, err = Sharing(ctx, kube, s, others)
	if err == nil || len(users) != 1 {
		t.Errorf("with pods unreadable: %q, %v; want the other group and the error", users, err)
	}
}

// A managed namespace carries the PodSecurity enforce labels of the group's
// level, follows a change of level and keeps other labels; a namespace the
// group does not manage is never relabelled.
func TestNamespacePodSecurityLabels(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	s := Spec{Name: "g", Namespace: "runs", ManageNamespace: true}
	if _, err := Ensure(ctx, kube, s); err != nil {
		t.Fatal(err)
	}
	labels := func() map[string]string {
		ns, err := kube.CoreV1().Namespaces().Get(ctx, "runs", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return ns.Labels
	}
	if l := labels(); l[podsecurity.EnforceLabel] != podsecurity.Default || l[podsecurity.EnforceVersionLabel] != "latest" ||
		l[managed.LabelContainerGroup] != "g" {
		t.Fatalf("created namespace labels = %v", l)
	}
	if m := Missing(ctx, kube, s); len(m) != 0 {
		t.Errorf("missing right after Ensure: %v", m)
	}
	if w := writes(kube); slices.Contains(w, "patch namespaces") {
		t.Errorf("a fresh namespace was patched: %v", w)
	}
	ns, _ := kube.CoreV1().Namespaces().Get(ctx, "runs", metav1.GetOptions{})
	ns.Labels["team"] = "ci"
	if _, err := kube.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.PodSecurityLevel = podsecurity.Restricted
	want := "label pod-security.kubernetes.io/enforce=restricted of namespace runs"
	if m := Missing(ctx, kube, s); !slices.Equal(m, []string{want}) {
		t.Errorf("missing after a change of level = %v, want [%s]", m, want)
	}
	if _, err := Ensure(ctx, kube, s); err != nil {
		t.Fatal(err)
	}
	if l := labels(); l[podsecurity.EnforceLabel] != podsecurity.Restricted || l["team"] != "ci" || l[managed.LabelContainerGroup] != "g" {
		t.Errorf("relabelled namespace labels = %v", l)
	}
	if m := Missing(ctx, kube, s); len(m) != 0 {
		t.Errorf("missing after relabelling: %v", m)
	}
	// Ensure again: nothing to change, nothing written.
	kube.ClearActions()
	if _, err := Ensure(ctx, kube, s); err != nil {
		t.Fatal(err)
	}
	if w := writes(kube); slices.Contains(w, "patch namespaces") {
		t.Errorf("an up-to-date namespace was patched: %v", w)
	}

	// Not managed: the namespace is the user's, whatever the level.
	kube = fake.NewClientset(runsNamespace(map[string]string{"app": "web"}))
	u := Spec{Name: "g", Namespace: "runs", PodSecurityLevel: podsecurity.Restricted, MaxForks: ptr(1)}
	if _, err := Ensure(ctx, kube, u); err != nil {
		t.Fatal(err)
	}
	if w := writes(kube); slices.Contains(w, "patch namespaces") || slices.Contains(w, "update namespaces") {
		t.Errorf("an unmanaged namespace was relabelled: %v", w)
	}
	if m := Missing(ctx, kube, u); len(m) != 0 {
		t.Errorf("an unmanaged namespace's labels reported missing: %v", m)
	}
}
