// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package catalogkey

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// sealPrefix marks a sealed value and its scheme, so that a later scheme
// can be told apart.
const sealPrefix = "aes256gcm:"

// ErrNotSealed: a sealed value does not open with the key, its domain and
// its associated data: it was edited, made under another key or name, or
// is not a sealed value at all.
var ErrNotSealed = errors.New("not sealed with the catalog key")

// sealer is the AEAD of domain: its key is derived from k (HKDF-SHA256,
// the domain as info), so that no two domains, nor the signatures, share
// a key.
func (k *Key) sealer(domain string) (cipher.AEAD, error) {
	dk, err := hkdf.Key(sha256.New, k.b, nil, "kubeplay-seal:"+domain, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(dk)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// aad frames parts as Sign does: no two lists of parts give the same data.
func aad(parts [][]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = fmt.Appendf(b, "%d:", len(p))
		b = append(b, p...)
	}
	return b
}

// Seal encrypts plain with AES-256-GCM under a key of domain derived from
// k, with a random nonce, and authenticates it together with parts (which
// it does not hide). The result is printable.
func (k *Key) Seal(domain string, plain []byte, parts ...[]byte) (string, error) {
	a, err := k.sealer(domain)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, a.NonceSize(), a.NonceSize()+len(plain)+a.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	return sealPrefix + base64.StdEncoding.EncodeToString(a.Seal(nonce, nonce, plain, aad(parts))), nil
}

// Open returns what Seal sealed in domain with parts; ErrNotSealed when
// sealed does not open so.
func (k *Key) Open(domain, sealed string, parts ...[]byte) ([]byte, error) {
	b64, ok := strings.CutPrefix(sealed, sealPrefix)
	if !ok {
		return nil, ErrNotSealed
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(b64)
	if err != nil {
		return nil, ErrNotSealed
	}
	a, err := k.sealer(domain)
	if err != nil {
		return nil, err
	}
	if len(raw) < a.NonceSize()+a.Overhead() {
		return nil, ErrNotSealed
	}
	plain, err := a.Open(nil, raw[:a.NonceSize()], raw[a.NonceSize():], aad(parts))
	if err != nil {
		return nil, ErrNotSealed
	}
	return plain, nil
}
