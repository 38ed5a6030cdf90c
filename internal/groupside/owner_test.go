// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package groupside

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/capacity"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podsecurity"
)

const (
	idA = "0123456789abcdef0123456789abcdef"
	idB = "fedcba9876543210fedcba9876543210"
)

// deploy is group "deploy" on namespace "runs" of the definition with id
// in catalog namespace catalog.
func deploy(id, catalog string, manage bool) Spec {
	return Spec{Name: "deploy", Namespace: "runs", ManageNamespace: manage, MaxForks: ptr(2),
		Limits:           capacity.Limits{MaxConcurrentRuns: ptr(3)},
		PodSecurityLevel: podsecurity.Restricted,
		Owner:            managed.Owner{ID: id, Kind: "container group", Name: "deploy", Catalog: catalog}}
}

// TestSecondDefinitionNeitherAdoptsNorDeletes: two definitions of group
// "deploy" on one namespace, in two catalogs. The second neither relabels
// nor deletes what the first made, and its error names the first.
func TestSecondDefinitionNeitherAdoptsNorDeletes(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	a, b := deploy(idA, "team-a", true), deploy(idB, "team-b", true)
	b.PodSecurityLevel = podsecurity.Privileged
	if _, err := Ensure(ctx, kube, a); err != nil {
		t.Fatal(err)
	}
	ns, _ := kube.CoreV1().Namespaces().Get(ctx, "runs", metav1.GetOptions{})
	if id, who := managed.OwnerOf(ns); id != idA || !strings.Contains(who, `"team-a"`) {
		t.Fatalf("namespace owner = %q, %q; want A's id and catalog", id, who)
	}
	for _, check := range []func() error{
		func() error { return MayManage(ctx, kube, b) },
		func() error { _, err := Ensure(ctx, kube, b); return err },
	} {
		var other *managed.OwnedByOtherError
		if err := check(); !errors.As(err, &other) || other.OtherID != idA || !strings.Contains(err.Error(), `container group "deploy" of catalog namespace "team-a"`) {
			t.Fatalf("B on A's namespace: %v; want an OwnedByOtherError naming A", err)
		}
	}
	ns, _ = kube.CoreV1().Namespaces().Get(ctx, "runs", metav1.GetOptions{})
	if ns.Labels[podsecurity.EnforceLabel] != podsecurity.Restricted {
		t.Errorf("B rewrote A's enforce label: %v", ns.Labels)
	}
	if err := Remove(ctx, kube, b); err != nil {
		t.Fatalf("Remove B: %v", err)
	}
	if _, err := kube.CoreV1().Namespaces().Get(ctx, "runs", metav1.GetOptions{}); err != nil {
		t.Fatalf("B's destroy deleted A's namespace: %v", err)
	}
	// Not managing the namespace, B still may not take A's quota or ledgers.
	b.ManageNamespace = false
	var other *managed.OwnedByOtherError
	if _, err := Ensure(ctx, kube, b); !errors.As(err, &other) {
		t.Errorf("B over A's quota: %v; want an OwnedByOtherError", err)
	}
	if err := Remove(ctx, kube, b); err != nil {
		t.Fatalf("Remove B: %v", err)
	}
	if _, err := kube.CoreV1().ResourceQuotas("runs").Get(ctx, capacity.QuotaName("deploy"), metav1.GetOptions{}); err != nil {
		t.Errorf("B's destroy deleted A's quota: %v", err)
	}
	for _, kind := range []string{capacity.Forks, capacity.Runs} {
		led := capacity.Ledger{Namespace: "runs", Group: "deploy", Kind: kind}
		if _, err := kube.CoreV1().ConfigMaps("runs").Get(ctx, led.ConfigMapName(), metav1.GetOptions{}); err != nil {
			t.Errorf("B's destroy deleted A's %s ledger: %v", kind, err)
		}
	}
	// A's own destroy removes its namespace.
	if err := Remove(ctx, kube, a); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Namespaces().Get(ctx, "runs", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("A's destroy left its namespace: %v", err)
	}
}

// TestLegacyObjectsAdoptedOnce: objects from before owner ids (labels, no
// id) belong to a definition from before owner ids; a new definition does
// not take them, one that adopts does, and then they are its alone.
func TestLegacyObjectsAdoptedOnce(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	legacy := deploy("", "", true)
	if _, err := Ensure(ctx, kube, legacy); err != nil {
		t.Fatal(err)
	}
	if err := MayManage(ctx, kube, legacy); err != nil {
		t.Errorf("the legacy definition may not manage its own namespace: %v", err)
	}
	fresh := deploy(idB, "team-b", true)
	var other *managed.OwnedByOtherError
	if err := MayManage(ctx, kube, fresh); !errors.As(err, &other) || other.OtherID != "" || !strings.Contains(err.Error(), "before owner ids") {
		t.Fatalf("a new definition on a legacy namespace: %v; want an OwnedByOtherError", err)
	}
	adopting := deploy(idA, "team-a", true)
	adopting.Adopt = true
	if _, err := Ensure(ctx, kube, adopting); err != nil {
		t.Fatalf("adopting: %v", err)
	}
	ns, _ := kube.CoreV1().Namespaces().Get(ctx, "runs", metav1.GetOptions{})
	q, _ := kube.CoreV1().ResourceQuotas("runs").Get(ctx, capacity.QuotaName("deploy"), metav1.GetOptions{})
	cm, _ := kube.CoreV1().ConfigMaps("runs").Get(ctx, capacity.LedgerName("deploy"), metav1.GetOptions{})
	for _, o := range []metav1.Object{ns, q, cm} {
		if id, _ := managed.OwnerOf(o); id != idA {
			t.Errorf("%s after adoption has owner id %q, want %q", o.GetName(), id, idA)
		}
	}
	// Adopted once: another adopter, or the legacy definition, is refused.
	again := deploy(idB, "team-b", true)
	again.Adopt = true
	if err := MayManage(ctx, kube, again); !errors.As(err, &other) || other.OtherID != idA {
		t.Errorf("a second adoption: %v; want an OwnedByOtherError naming A", err)
	}
	if _, err := Ensure(ctx, kube, legacy); !errors.As(err, &other) {
		t.Errorf("the legacy definition after adoption: %v; want an OwnedByOtherError", err)
	}
}

// TestForeignNamespaceStaysExistsError: a namespace kubeplay did not make
// is still NamespaceExistsError.
func TestForeignNamespaceStaysExistsError(t *testing.T) {
	kube := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "runs"}})
	var exists *NamespaceExistsError
	if err := MayManage(context.Background(), kube, deploy(idA, "c", true)); !errors.As(err, &exists) {
		t.Errorf("MayManage on a foreign namespace: %v; want NamespaceExistsError", err)
	}
}

// TestOrphan: objects that a deleted definition of the same name in the
// same catalog (by its namespace's UID) left are offered to the new one;
// another catalog's, or a catalog namespace of the same name elsewhere,
// are not.
func TestOrphan(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	old := deploy(idA, "team-a", true)
	old.Owner.CatalogUID = "uid-a"
	if _, err := Ensure(ctx, kube, old); err != nil {
		t.Fatal(err)
	}
	again := deploy("", "team-a", true)
	again.Owner.CatalogUID = "uid-a"
	if got := Orphan(ctx, kube, again); got != idA {
		t.Errorf("Orphan in the same catalog = %q, want %q", got, idA)
	}
	elsewhere := deploy("", "team-a", true)
	elsewhere.Owner.CatalogUID = "uid-other-cluster"
	if got := Orphan(ctx, kube, elsewhere); got != "" {
		t.Errorf("Orphan for a same-named catalog on another cluster = %q, want none", got)
	}
	other := deploy("", "team-b", true)
	other.Owner.CatalogUID = "uid-a"
	if got := Orphan(ctx, kube, other); got != "" {
		t.Errorf("Orphan for another catalog namespace = %q, want none", got)
	}
	quotaOnly := deploy("", "team-a", false)
	quotaOnly.Owner.CatalogUID = "uid-a"
	if got := Orphan(ctx, kube, quotaOnly); got != idA {
		t.Errorf("Orphan by the quota = %q, want %q", got, idA)
	}
}
