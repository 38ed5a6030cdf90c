// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

// Package catalogkey holds the key with which kubeplay signs what it writes
// and later trusts: catalog definitions (their digest annotation), warm pods
// and held-node pods. A plain digest shows accidental edits only, since
// anyone who can edit an object can compute it again; an HMAC needs the key.
//
// The key is the provider's catalog_key when the configuration sets one, or
// else a Secret that kubeplay creates once in the catalog namespace. Whoever
// can read that Secret can sign, and whoever can create or update Secrets
// there can plant or replace it (labels can be copied), so the catalog
// namespace's Secrets must be readable and writable only by the identities
// that run kubeplay (the security model guide says so); catalog_key removes
// even that dependency.
package catalogkey

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

const (
	// SecretName is the Secret in the catalog namespace that holds the key
	// when the configuration gives none.
	SecretName = "kubeplay-catalog-key"
	// SecretKey is the Secret's data key.
	SecretKey = "key"
	// Component is the Secret's managed.LabelComponent.
	Component = "catalog-key"
	// MinLength is the shortest key accepted, in bytes.
	MinLength = 32
	// prefix marks a signature made with a key; a value without it is
	// a plain digest from before kubeplay signed.
	prefix = "hmac-sha256:"
)

// ErrRefused: the key Secret exists but kubeplay cannot trust it.
var ErrRefused = errors.New("catalog key refused")

// ErrMissing: there is no key Secret (and the key is not configured), so
// nothing in the catalog can be verified.
var ErrMissing = errors.New("catalog key missing")

// Key signs and verifies. The zero value is not usable; use New or Load.
type Key struct{ b []byte }

// New returns a key of b, which must be at least MinLength bytes.
func New(b []byte) (*Key, error) {
	if len(b) < MinLength {
		return nil, fmt.Errorf("a catalog key needs at least %d bytes, got %d", MinLength, len(b))
	}
	return &Key{b: append([]byte(nil), b...)}, nil
}

// Sign returns the signature of parts in domain, which keeps signatures of
// one kind of thing from being replayed as another.
func (k *Key) Sign(domain string, parts ...[]byte) string {
	m := hmac.New(sha256.New, k.b)
	// Length prefixes: no two lists of parts share a signature.
	fmt.Fprintf(m, "%d:%s", len(domain), domain)
	for _, p := range parts {
		fmt.Fprintf(m, "%d:", len(p))
		m.Write(p)
	}
	return prefix + hex.EncodeToString(m.Sum(nil))
}

// Verify reports whether sig is the signature of parts in domain, in
// constant time.
func (k *Key) Verify(sig, domain string, parts ...[]byte) bool {
	return hmac.Equal([]byte(sig), []byte(k.Sign(domain, parts...)))
}

// Signed reports whether v has the form of a signature (as opposed to a
// plain digest written before kubeplay signed).
func Signed(v string) bool { return strings.HasPrefix(v, prefix) }

// Source gives a catalog's key, loading it once.
type Source struct {
	kube      kubernetes.Interface
	namespace string
	fixed     *Key

	mu  sync.Mutex
	key *Key
}

// NewSource returns the key source of the catalog in namespace on kube. A
// non-empty configured key is used as it is, and the Secret is never read.
func NewSource(kube kubernetes.Interface, namespace string, configured []byte) (*Source, error) {
	s := &Source{kube: kube, namespace: namespace}
	if len(configured) > 0 {
		k, err := New(configured)
		if err != nil {
			return nil, err
		}
		s.fixed = k
	}
	return s, nil
}

// Configured reports whether the key comes from the configuration.
func (s *Source) Configured() bool { return s.fixed != nil }

// Key returns the key. With create, a missing Secret is created (writers);
// without, a missing Secret is an error that says so (readers).
func (s *Source) Key(ctx context.Context, create bool) (*Key, error) {
	if s.fixed != nil {
		return s.fixed, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.key != nil {
		return s.key, nil
	}
	k, err := Load(ctx, s.kube, s.namespace, create)
	if err != nil {
		return nil, err
	}
	s.key = k
	return k, nil
}

// Load reads the key Secret of the catalog in namespace, creating it with a
// random key when create is set and it does not exist. A Secret of the name
// that kubeplay did not make, or whose key is too short, is refused: a key
// chosen by someone else signs nothing.
func Load(ctx context.Context, kube kubernetes.Interface, namespace string, create bool) (*Key, error) {
	secrets := kube.CoreV1().Secrets(namespace)
	sec, err := secrets.Get(ctx, SecretName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && create {
		b := make([]byte, MinLength)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		want := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: SecretName, Namespace: namespace,
				Labels: managed.Labels(managed.LabelComponent, Component)},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{SecretKey: b},
		}
		sec, err = secrets.Create(ctx, want, metav1.CreateOptions{FieldManager: managed.FieldManager})
		if apierrors.IsAlreadyExists(err) {
			// Another process made it first: use theirs.
			sec, err = secrets.Get(ctx, SecretName, metav1.GetOptions{})
		}
	}
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: the catalog key Secret %s/%s does not exist: kubeplay creates it with the first "+
			"definition it writes to the catalog, or set the provider's catalog_key", ErrMissing, namespace, SecretName)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the catalog key Secret %s/%s: %w", namespace, SecretName, err)
	}
	if !managed.Owns(sec, managed.LabelComponent, Component) {
		return nil, fmt.Errorf("%w: Secret %s/%s lacks kubeplay's labels, so it is not the key kubeplay made; delete it "+
			"(every catalog definition must then be applied again) or set the provider's catalog_key", ErrRefused, namespace, SecretName)
	}
	k, err := New(sec.Data[SecretKey])
	if err != nil {
		return nil, fmt.Errorf("%w: Secret %s/%s: %v", ErrRefused, namespace, SecretName, err)
	}
	return k, nil
}
