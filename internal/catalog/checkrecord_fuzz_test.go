// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package catalog

import (
	"encoding/json"
	"testing"
	"time"
)

// FuzzCheckRecord decodes a check record's ConfigMap (name, annotations,
// data) and the index's data from arbitrary strings: the decoders never
// panic, and accept only exactly what kubeplay sealed with the key, for
// that name and times, and not after its expiry.
func FuzzCheckRecord(f *testing.F) {
	_, key := fuzzStore(&testing.T{})
	// Fixed times and documents: the fuzzing engine's workers run this
	// function too, and seal the same records (with other nonces).
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	type rec struct{ name, written, expires string }
	sealed := map[rec]string{}
	indices := map[string]bool{}
	add := func(name, doc string, ttl time.Duration) {
		w, e := now.Format(time.RFC3339), now.Add(ttl).Format(time.RFC3339)
		s, err := key.Seal(domainCheckRecord, []byte(doc), []byte(name), []byte(w), []byte(e))
		if err != nil {
			f.Fatal(err)
		}
		sealed[rec{name, w, e}] = doc
		x := checkIndex{Live: map[string]indexEntry{name: {W: now.Unix(), E: now.Add(ttl).Unix()}},
			Gone: map[string]indexEntry{"kubeplay-check-g": {At: now.Unix(), Why: GoneEvicted}}}
		raw, _ := json.Marshal(x)
		si, err := key.Seal(domainCheckIndex, raw, []byte(CheckIndexName))
		if err != nil {
			f.Fatal(err)
		}
		indices[string(raw)] = true
		f.Add(name, w, e, s, si)
	}
	add("kubeplay-check-a", `{"tasks":[{"host":"t0","diff":"+x"}],"task_count":1}`, time.Hour)
	add("kubeplay-check-b", `{}`, 24*time.Hour)
	add("kubeplay-check-old", `{}`, -time.Hour)
	f.Add("kubeplay-check-a", "", "", "aes256gcm:", "aes256gcm:AAAA")
	f.Add("", "x", "2999-01-01T00:00:00Z", "hmac-sha256:00", "{}")
	f.Fuzz(func(t *testing.T, name, written, expires, data, index string) {
		got, err := openRecord(key, name, map[string]string{checkRecordWritten: written, checkRecordExpires: expires},
			map[string]string{checkRecordData: data}, now)
		if err == nil {
			doc, ok := sealed[rec{name, written, expires}]
			if !ok || string(got.Doc) != doc {
				t.Fatalf("accepted a record kubeplay did not seal: %q %q %q %q", name, written, expires, data)
			}
			if !now.Before(got.Expires) {
				t.Fatalf("accepted an expired record, expiring %s", got.Expires)
			}
		}
		if x, ok := openIndex(key, map[string]string{checkIndexData: index}); ok {
			raw, _ := json.Marshal(x)
			if !indices[string(raw)] {
				t.Fatalf("accepted an index kubeplay did not seal: %q", index)
			}
			x.prune(now)
			_ = x.gone(name, now) // must not panic on any index kubeplay sealed
		}
	})
}
