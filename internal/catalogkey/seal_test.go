// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package catalogkey

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// A sealed value opens only with its key, domain and parts, unedited, and
// does not show what it holds.
func TestSealOpen(t *testing.T) {
	k, _ := New(bytes.Repeat([]byte{1}, MinLength))
	other, _ := New(bytes.Repeat([]byte{2}, MinLength))
	plain := []byte("host t0: +token=hunter2")
	sealed, err := k.Seal("rec", plain, []byte("name"), []byte("exp"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(sealed, "hunter2") || !strings.HasPrefix(sealed, sealPrefix) {
		t.Fatalf("sealed value %q", sealed)
	}
	if got, err := k.Open("rec", sealed, []byte("name"), []byte("exp")); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("opened %q, %v", got, err)
	}
	if again, _ := k.Seal("rec", plain, []byte("name"), []byte("exp")); again == sealed {
		t.Error("two seals of one value are equal: the nonce is not random")
	}
	// One byte of the ciphertext flipped.
	b := []byte(sealed)
	i := len(sealPrefix) + 20
	b[i] ^= 'A' ^ 'B'
	if b[i] == sealed[i] {
		b[i] ^= 1
	}
	for name, c := range map[string]struct {
		k      *Key
		domain string
		sealed string
		parts  [][]byte
	}{
		"other key":    {other, "rec", sealed, [][]byte{[]byte("name"), []byte("exp")}},
		"other domain": {k, "idx", sealed, [][]byte{[]byte("name"), []byte("exp")}},
		"other name":   {k, "rec", sealed, [][]byte{[]byte("nam"), []byte("eexp")}},
		"other expiry": {k, "rec", sealed, [][]byte{[]byte("name"), []byte("exp2")}},
		"no parts":     {k, "rec", sealed, nil},
		"edited":       {k, "rec", string(b), [][]byte{[]byte("name"), []byte("exp")}},
		"cut":          {k, "rec", sealed[:len(sealed)-8], [][]byte{[]byte("name"), []byte("exp")}},
		"no prefix":    {k, "rec", strings.TrimPrefix(sealed, sealPrefix), [][]byte{[]byte("name"), []byte("exp")}},
		"empty":        {k, "rec", sealPrefix, [][]byte{[]byte("name"), []byte("exp")}},
	} {
		if got, err := c.k.Open(c.domain, c.sealed, c.parts...); !errors.Is(err, ErrNotSealed) || got != nil {
			t.Errorf("%s: opened %q, %v", name, got, err)
		}
	}
}
