// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package catalogkey

import (
	"bytes"
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestSignVerify(t *testing.T) {
	k, err := New(bytes.Repeat([]byte{1}, MinLength))
	if err != nil {
		t.Fatal(err)
	}
	other, _ := New(bytes.Repeat([]byte{2}, MinLength))
	sig := k.Sign("group", []byte("a"), []byte("bc"))
	if !Signed(sig) || !k.Verify(sig, "group", []byte("a"), []byte("bc")) {
		t.Fatalf("own signature %q not verified", sig)
	}
	for name, ok := range map[string]bool{
		"other parts":  k.Verify(sig, "group", []byte("ab"), []byte("c")),
		"other domain": k.Verify(sig, "label", []byte("a"), []byte("bc")),
		"other key":    other.Verify(sig, "group", []byte("a"), []byte("bc")),
	} {
		if ok {
			t.Errorf("%s: verified", name)
		}
	}
	if _, err := New([]byte("short")); err == nil {
		t.Error("a 5-byte key was accepted")
	}
}

// Load creates one key and then keeps returning it; a Secret kubeplay did
// not make is refused. The fake clientset stands in for plain get and create.
func TestLoad(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	if _, err := Load(ctx, kube, "cat", false); err == nil {
		t.Fatal("a reader got a key that does not exist")
	}
	k1, err := Load(ctx, kube, "cat", true)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := Load(ctx, kube, "cat", false)
	if err != nil || !bytes.Equal(k1.b, k2.b) {
		t.Fatalf("second load: %v, same key %v", err, err == nil && bytes.Equal(k1.b, k2.b))
	}
	forged := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: SecretName, Namespace: "other"},
		Data: map[string][]byte{SecretKey: bytes.Repeat([]byte{9}, MinLength)}}
	if _, err := kube.CoreV1().Secrets("other").Create(ctx, forged, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(ctx, kube, "other", true); !errors.Is(err, ErrRefused) {
		t.Errorf("a Secret without kubeplay's labels: %v", err)
	}
	src, err := NewSource(kube, "cat", bytes.Repeat([]byte{3}, MinLength))
	if err != nil || !src.Configured() {
		t.Fatalf("configured source: %v", err)
	}
	if k, _ := src.Key(ctx, false); k.Verify(k1.Sign("d"), "d") {
		t.Error("a configured key verified the Secret key's signature")
	}
}
