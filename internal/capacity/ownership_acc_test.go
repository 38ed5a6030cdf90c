// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package capacity

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
)

// replacingKube replaces a ConfigMap with another of the same name and
// labels just before each delete goes out.
type replacingKube struct {
	kubernetes.Interface
	replace func(ctx context.Context, ns, name string)
}

func (k replacingKube) CoreV1() corev1client.CoreV1Interface {
	return replacingCore{k.Interface.CoreV1(), k.replace}
}

type replacingCore struct {
	corev1client.CoreV1Interface
	replace func(ctx context.Context, ns, name string)
}

func (c replacingCore) ConfigMaps(ns string) corev1client.ConfigMapInterface {
	return replacingConfigMaps{c.CoreV1Interface.ConfigMaps(ns), ns, c.replace}
}

type replacingConfigMaps struct {
	corev1client.ConfigMapInterface
	ns      string
	replace func(ctx context.Context, ns, name string)
}

func (c replacingConfigMaps) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	c.replace(ctx, c.ns, name)
	return c.ConfigMapInterface.Delete(ctx, name, opts)
}

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
	wrapped := replacingKube{kube, func(ctx context.Context, ns, name string) {
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
