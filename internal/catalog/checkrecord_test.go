// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package catalog

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

// A check record reads back as written; an edited, renamed or expired
// record is not trusted; a write sweeps expired records; a delete of a
// missing record is no error.
func TestCheckRecord(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	s := keyedStore(t, kube, "k")
	cms := kube.CoreV1().ConfigMaps(ns)
	if _, err := s.GetCheckRecord(ctx, "kubeplay-check-a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing record: %v", err)
	}
	if err := s.PutCheckRecord(ctx, "kubeplay-check-a", []byte(`{"x":1}`), time.Hour); err != nil {
		t.Fatal(err)
	}
	if doc, err := s.GetCheckRecord(ctx, "kubeplay-check-a"); err != nil || string(doc) != `{"x":1}` {
		t.Fatalf("read back %q, %v", doc, err)
	}
	// Written again: replaced.
	if err := s.PutCheckRecord(ctx, "kubeplay-check-a", []byte(`{"x":2}`), time.Hour); err != nil {
		t.Fatal(err)
	}
	if doc, err := s.GetCheckRecord(ctx, "kubeplay-check-a"); err != nil || string(doc) != `{"x":2}` {
		t.Fatalf("replaced record %q, %v", doc, err)
	}
	// Edited, or copied under another name: refused.
	cm, _ := cms.Get(ctx, "kubeplay-check-a", metav1.GetOptions{})
	cm.Data[checkRecordData] = `{"x":3}`
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetCheckRecord(ctx, "kubeplay-check-a"); !errors.Is(err, ErrTampered) {
		t.Errorf("edited record: %v", err)
	}
	if err := s.PutCheckRecord(ctx, "kubeplay-check-b", []byte(`{}`), time.Hour); err != nil {
		t.Fatal(err)
	}
	cm, _ = cms.Get(ctx, "kubeplay-check-b", metav1.GetOptions{})
	cm.Name, cm.ResourceVersion = "kubeplay-check-c", ""
	if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetCheckRecord(ctx, "kubeplay-check-c"); !errors.Is(err, ErrTampered) {
		t.Errorf("renamed record: %v", err)
	}
	// Expired: not found, and swept by the next write.
	if err := s.PutCheckRecord(ctx, "kubeplay-check-old", []byte(`{}`), -time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetCheckRecord(ctx, "kubeplay-check-old"); !errors.Is(err, ErrNotFound) {
		t.Errorf("expired record: %v", err)
	}
	if err := s.PutCheckRecord(ctx, "kubeplay-check-b", []byte(`{}`), time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get(ctx, "kubeplay-check-old", metav1.GetOptions{}); err == nil {
		t.Error("the expired record was not swept")
	}
	// Deleted; deleting again is no error.
	for range 2 {
		if err := s.DeleteCheckRecord(ctx, "kubeplay-check-b"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.GetCheckRecord(ctx, "kubeplay-check-b"); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleted record: %v", err)
	}
}

// A ConfigMap of a record's name that kubeplay did not make is neither
// replaced nor deleted, and the sweep leaves such ConfigMaps alone even
// with the record's label and an expiry passed.
func TestCheckRecordNotOwned(t *testing.T) {
	ctx := context.Background()
	foreign := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels:      map[string]string{managed.LabelComponent: ComponentCheckRecord},
			Annotations: map[string]string{checkRecordExpires: "2000-01-01T00:00:00Z"}},
			Data: map[string]string{"keep": "me"}}
	}
	s, kube := newStore(foreign("kubeplay-check-x"), foreign("kubeplay-check-y"))
	if err := s.EnsureNamespace(ctx); err != nil { // the key Secret
		t.Fatal(err)
	}
	var no *managed.NotOwnedError
	if err := s.PutCheckRecord(ctx, "kubeplay-check-x", []byte(`{}`), time.Hour); !errors.As(err, &no) {
		t.Errorf("replacing a foreign ConfigMap: %v", err)
	}
	if err := s.DeleteCheckRecord(ctx, "kubeplay-check-y"); err != nil {
		t.Fatal(err)
	}
	if err := s.PutCheckRecord(ctx, "kubeplay-check-z", []byte(`{}`), time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"kubeplay-check-x", "kubeplay-check-y"} {
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || cm.Data["keep"] != "me" {
			t.Errorf("foreign ConfigMap %s: %v, %v", name, err, cm)
		}
	}
}
