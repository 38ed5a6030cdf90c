// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package catalogkey

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
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

// TestLoadRefusesOnlyMistakes: what Load refuses, and what it cannot: a
// Secret with kubeplay's labels copied, of type Opaque, with a long enough
// key, is taken as the key, whoever wrote it (the security model guide says
// so, and recommends catalog_key).
func TestLoadRefusesOnlyMistakes(t *testing.T) {
	ctx := context.Background()
	labels := managed.Labels(managed.LabelComponent, Component)
	for name, c := range map[string]struct {
		sec  corev1.Secret
		want error
	}{
		"no labels":    {corev1.Secret{Type: corev1.SecretTypeOpaque, Data: map[string][]byte{SecretKey: bytes.Repeat([]byte{9}, MinLength)}}, ErrRefused},
		"another type": {corev1.Secret{Type: corev1.SecretTypeBasicAuth, Data: map[string][]byte{SecretKey: bytes.Repeat([]byte{9}, MinLength)}}, ErrRefused},
		"short key":    {corev1.Secret{Type: corev1.SecretTypeOpaque, Data: map[string][]byte{SecretKey: []byte("short")}}, ErrRefused},
		"copied":       {corev1.Secret{Type: corev1.SecretTypeOpaque, Data: map[string][]byte{SecretKey: bytes.Repeat([]byte{9}, MinLength)}}, nil},
	} {
		kube := fake.NewClientset()
		c.sec.Name, c.sec.Namespace = SecretName, "cat"
		if name != "no labels" {
			c.sec.Labels = labels
		}
		if _, err := kube.CoreV1().Secrets("cat").Create(ctx, &c.sec, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		k, err := Load(ctx, kube, "cat", true)
		switch {
		case c.want != nil && !errors.Is(err, c.want):
			t.Errorf("%s: %v, want %v", name, err, c.want)
		case c.want == nil && (err != nil || !bytes.Equal(k.b, c.sec.Data[SecretKey])):
			t.Errorf("%s: %v: a Secret with copied labels is taken as the key; the guide must not say otherwise", name, err)
		}
	}
}

// TestPrevious: a source's keys carry the previous keys, but for the key
// itself; they verify only with Previous, never with the key's Verify.
func TestPrevious(t *testing.T) {
	cur := bytes.Repeat([]byte{1}, MinLength)
	old := []byte("an-old-catalog-key-of-32-bytes-or-more")
	src, err := NewSource(nil, "cat", cur)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.WithPrevious([][]byte{[]byte("short")}); err == nil {
		t.Error("a short previous key was accepted")
	}
	src, _ = NewSource(nil, "cat", cur)
	if src, err = src.WithPrevious([][]byte{old, cur}); err != nil {
		t.Fatal(err)
	}
	k, _ := src.Key(context.Background(), false)
	oldKey, _ := New(old)
	sig := oldKey.Sign("d", []byte("x"))
	if k.Verify(sig, "d", []byte("x")) {
		t.Error("the current key verified the previous key's signature")
	}
	if len(k.Previous()) != 1 || !k.Previous()[0].Verify(sig, "d", []byte("x")) {
		t.Errorf("previous keys %d, want the old key only", len(k.Previous()))
	}
	// The key Secret's random bytes are given as base64.
	raw := bytes.Repeat([]byte{0xff, 0x00}, MinLength/2)
	got, err := ParsePrevious("base64:" + base64.StdEncoding.EncodeToString(raw))
	if err != nil || !bytes.Equal(got, raw) {
		t.Errorf("base64 previous key: %v", err)
	}
	if _, err := ParsePrevious("base64:!!"); err == nil {
		t.Error("bad base64 accepted")
	}
	if _, err := ParsePrevious("base64:" + base64.StdEncoding.EncodeToString([]byte("short"))); err == nil {
		t.Error("a short base64 key accepted")
	}
	if got, err := ParsePrevious(string(old)); err != nil || !bytes.Equal(got, old) {
		t.Errorf("plain previous key: %v", err)
	}
}
