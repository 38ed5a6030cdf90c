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
// even that dependency. What Load refuses (no kubeplay labels, another
// type, a short key) catches a mistaken Secret, not a forged one.
//
// A key may carry previous keys (the provider's previous_catalog_keys) after
// a rotation: they never verify a definition or a pod that kubeplay uses,
// and serve only to recognise the pods kubeplay signed before, so that
// they are deleted rather than left as strangers.
package catalogkey

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
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
type Key struct {
	b []byte
	// previous are the keys this one replaced, which only recognise
	// kubeplay's own pods signed before a rotation.
	previous []*Key
}

// Previous gives the keys this one replaced (previous_catalog_keys): a
// signature they verify shows a pod that kubeplay made before the rotation,
// to be deleted, never one to use.
func (k *Key) Previous() []*Key { return k.previous }

// withPrevious is k carrying prev, but for a key equal to k's own.
func (k *Key) withPrevious(prev []*Key) *Key {
	if len(prev) == 0 {
		return k
	}
	c := &Key{b: k.b}
	for _, p := range prev {
		if !bytes.Equal(p.b, k.b) {
			c.previous = append(c.previous, p)
		}
	}
	return c
}

// base64Prefix marks a previous key given as base64, as the key Secret's
// random bytes are (kubectl shows its data so).
const base64Prefix = "base64:"

// ParsePrevious reads a previous key: the key itself, or "base64:" and the
// base64 of its bytes (the key Secret's data.key).
func ParsePrevious(s string) ([]byte, error) {
	if rest, ok := strings.CutPrefix(s, base64Prefix); ok {
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(rest))
		if err != nil {
			return nil, fmt.Errorf("a previous catalog key that starts with %q must be base64: %v", base64Prefix, err)
		}
		s = string(b)
	}
	if len(s) < MinLength {
		return nil, fmt.Errorf("a previous catalog key needs at least %d bytes, got %d", MinLength, len(s))
	}
	return []byte(s), nil
}

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
	previous  []*Key

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

// WithPrevious makes the keys s gives carry prev (each at least MinLength
// bytes), the keys they replaced; it returns s.
func (s *Source) WithPrevious(prev [][]byte) (*Source, error) {
	for i, b := range prev {
		k, err := New(b)
		if err != nil {
			return nil, fmt.Errorf("previous catalog key %d: %w", i+1, err)
		}
		s.previous = append(s.previous, k)
	}
	return s, nil
}

// Configured reports whether the key comes from the configuration.
func (s *Source) Configured() bool { return s.fixed != nil }

// Key returns the key. With create, a missing Secret is created (writers);
// without, a missing Secret is an error that says so (readers).
func (s *Source) Key(ctx context.Context, create bool) (*Key, error) {
	if s.fixed != nil {
		return s.fixed.withPrevious(s.previous), nil
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
	s.key = k.withPrevious(s.previous)
	return s.key, nil
}

// Load reads the key Secret of the catalog in namespace, creating it with a
// random key when create is set and it does not exist. A Secret of the name
// without kubeplay's labels, of another type than Opaque, or whose key is
// too short, is refused. That catches a Secret made by mistake, not one
// forged: labels and type can be copied, so whoever may write Secrets in
// the namespace can replace the key (catalog_key avoids the Secret).
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
	if sec.Type != corev1.SecretTypeOpaque {
		return nil, fmt.Errorf("%w: Secret %s/%s is of type %q, not Opaque, so it is not the key kubeplay made; delete it "+
			"(every catalog definition must then be applied again) or set the provider's catalog_key", ErrRefused, namespace, SecretName, sec.Type)
	}
	k, err := New(sec.Data[SecretKey])
	if err != nil {
		return nil, fmt.Errorf("%w: Secret %s/%s: %v", ErrRefused, namespace, SecretName, err)
	}
	return k, nil
}
