// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package capacity

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
)

// TestAccLedgerDeleteLeavesReplacement: a ledger replaced between Delete's
// read and its delete stays; the API server refuses the UID precondition.
func TestAccLedgerDeleteLeavesReplacement(t *testing.T) {
	kube := ownClient(t, accConfig(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := acctest.Namespace(t, kube, "kp-ledger-uid")
	led := Ledger{Kube: kube, Namespace: ns, Group: "g"}
	if err := led.Ensure(ctx, 2); err != nil {
		t.Fatal(err)
	}
	var replacement *corev1.ConfigMap
	wrapped := acctest.ReplacingKube{Interface: kube, Replace: func(ctx context.Context, ns, name string) {
		cms := kube.CoreV1().ConfigMaps(ns)
		old, err := cms.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("reading %s before replacing it: %v", name, err)
		}
		if err := cms.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		replacement, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: old.Labels,
			Annotations: old.Annotations}, Data: map[string]string{"newer": "claims"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}}
	if err := (Ledger{Kube: wrapped, Namespace: ns, Group: "g"}).Delete(ctx); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if replacement == nil {
		t.Fatal("Delete deleted nothing")
	}
	got, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, led.ConfigMapName(), metav1.GetOptions{})
	if err != nil || got.UID != replacement.UID {
		t.Fatalf("the replacement ledger was deleted (err=%v)", err)
	}
}
