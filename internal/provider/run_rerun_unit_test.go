// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"errors"
	"testing"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
)

// TestRerunKeeps: only a run whose every host reported how it ended narrows
// the next run; one that may have left hosts unrun does not.
func TestRerunKeeps(t *testing.T) {
	for status, want := range map[string]bool{runner.StatusSuccessful: true, runner.StatusFailed: true,
		runner.StatusError: false, runner.StatusCanceled: false} {
		if got := rerunKeeps(runner.Result{Status: status, NotOKHosts: []string{"h1"}}); got != want {
			t.Errorf("status %s: keeps %v, want %v", status, got, want)
		}
	}
}

// TestDecodeRerunRefuses: a record that is not a gzip'd list of sorted
// hosts of a run kubeplay wrote is tampered.
func TestDecodeRerunRefuses(t *testing.T) {
	good, err := gzipJSON(rerunDoc{RunID: "0123456789abcdef", Hosts: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if doc, err := decodeRerun(good); err != nil || len(doc.Hosts) != 2 {
		t.Fatalf("a good record: %v, %v", doc, err)
	}
	unsorted, _ := gzipJSON(rerunDoc{RunID: "0123456789abcdef", Hosts: []string{"b", "a"}})
	badID, _ := gzipJSON(rerunDoc{RunID: "x", Hosts: []string{"a"}})
	for name, raw := range map[string][]byte{"not gzip": []byte("{}"), "unsorted": unsorted, "bad id": badID} {
		if _, err := decodeRerun(raw); !errors.Is(err, catalog.ErrTampered) {
			t.Errorf("%s: %v, want ErrTampered", name, err)
		}
	}
}
