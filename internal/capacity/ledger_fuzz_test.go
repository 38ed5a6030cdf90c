// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package capacity

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

const fuzzOwner = "0123456789abcdef0123456789abcdef"

// FuzzLedgerDecode: whatever a writer of the group's namespace puts in a
// ConfigMap of the ledger's name, decoding never panics, and accepts only a
// ledger with kubeplay's labels for the group and the group's own owner id,
// whose every entry holds at least one fork until some time, and whose
// claims never add up past the limit.
func FuzzLedgerDecode(f *testing.F) {
	entry := func(forks int64, at string) string {
		return `{"forks":` + jsonInt(forks) + `,"expires":"` + at + `"}`
	}
	seeds := []struct {
		managedBy, group, owner, max, data string
		limit                              int64
	}{
		{"kubeplay", "g", fuzzOwner, "4", `{"run-1":` + quote(entry(2, "2030-01-01T00:00:00Z")) + `}`, 0},
		{"kubeplay", "g", fuzzOwner, "4", `{}`, 3},
		{"kubeplay", "g", "fedcba9876543210fedcba9876543210", "4", `{}`, 0}, // another definition's
		{"kubeplay", "g", "", "4", `{}`, 0},                                 // from before owner ids
		{"kubeplay", "other", fuzzOwner, "4", `{}`, 0},
		{"helm", "g", fuzzOwner, "4", `{}`, 0},
		{"kubeplay", "g", fuzzOwner, "-1", `{}`, 0},
		{"kubeplay", "g", fuzzOwner, "9223372036854775807", `{"a":` + quote(entry(9223372036854775807, "2030-01-01T00:00:00Z")) +
			`,"b":` + quote(entry(9223372036854775807, "2030-01-01T00:00:00Z")) + `}`, 0},
		{"kubeplay", "g", fuzzOwner, "2", `{"x":"{\"forks\":-5,\"expires\":\"2030-01-01T00:00:00Z\"}","y":"not json","z":"{}"}`, 0},
		{"kubeplay", "g", fuzzOwner, "2", `not a map`, 0},
		{"kubeplay", "g", fuzzOwner + " ", "2", `{}`, 0},
	}
	for _, s := range seeds {
		f.Add(s.managedBy, s.group, s.owner, s.max, s.data, s.limit)
	}
	f.Fuzz(func(t *testing.T, managedBy, group, owner, maxForks, data string, limit int64) {
		var entries map[string]string
		_ = json.Unmarshal([]byte(data), &entries)
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "kubeplay-forks-g", Namespace: "runs",
				Labels:      map[string]string{managed.LabelManagedBy: managedBy, managed.LabelContainerGroup: group},
				Annotations: map[string]string{managed.AnnotationOwnerID: owner, AnnotationMaxForks: maxForks}},
			Data: entries,
		}
		if owner == "" {
			delete(cm.Annotations, managed.AnnotationOwnerID)
		}
		l := Ledger{Namespace: "runs", Group: "g", Limit: limit, Owner: managed.Owner{ID: fuzzOwner}}
		got, decoded, err := l.decode(cm)
		if err != nil {
			return
		}
		if owner != fuzzOwner || managedBy != managed.ManagedByValue || group != "g" {
			t.Fatalf("accepted a ledger of owner %q, managed-by %q, group %q", owner, managedBy, group)
		}
		if decoded < 1 {
			t.Fatalf("accepted a limit of %d", decoded)
		}
		for k, e := range got {
			if !e.valid() {
				t.Fatalf("accepted the invalid entry %q: %+v", k, e)
			}
		}
		if n := used(got, decoded); n < 0 || n > decoded {
			t.Fatalf("claims add up to %d of %d", n, decoded)
		}
		// A ledger of the group without an owner id is the legacy group's
		// only.
		legacy := Ledger{Namespace: "runs", Group: "g", Limit: limit}
		if _, _, err := legacy.decode(cm); err == nil {
			t.Fatal("a group without an owner id accepted a ledger that carries one")
		}
	})
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }
