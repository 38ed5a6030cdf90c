// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runner

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
)

func sliceResult(status string, reason Reason, exit int, hosts map[string]bundle.HostStats, artifacts, output string) Result {
	r := Result{Status: status, Reason: reason, ExitCode: exit, Hosts: hosts, FailedHosts: map[string]bundle.HostStats{},
		Artifacts: artifacts, Output: output, PodName: "p-" + status, NodeName: "n", LaunchAttempts: 1,
		StartedAt: time.Unix(100, 0), FinishedAt: time.Unix(200, 0)}
	for h, s := range hosts {
		r.HostCount++
		addCounts(&r.HostCounts, countsOf(s))
		if s.NotOK() {
			r.FailedHosts[h] = s
			r.NotOKHosts = append(r.NotOKHosts, h)
		}
	}
	return r
}

func countsOf(s bundle.HostStats) bundle.HostCounts {
	switch s.Outcome() {
	case bundle.OutcomeFailed:
		return bundle.HostCounts{Failed: 1}
	case bundle.OutcomeUnreachable:
		return bundle.HostCounts{Unreachable: 1}
	case bundle.OutcomeChanged:
		return bundle.HostCounts{Changed: 1}
	}
	return bundle.HostCounts{OK: 1}
}

func TestMergeSlices(t *testing.T) {
	ok, failed := bundle.HostStats{OK: 1}, bundle.HostStats{OK: 1, Failed: 1}
	a := sliceResult(StatusSuccessful, "", 0, map[string]bundle.HostStats{"h1": ok, "h3": ok}, `{"a":1,"b":{"x":1}}`, "one\n")
	b := sliceResult(StatusFailed, ReasonPlaybookFailed, 2, map[string]bundle.HostStats{"h2": failed}, `{"b":2}`, "two")
	c := sliceResult(StatusError, ReasonEvicted, -1, nil, "", "")
	c.FinishedAt = time.Unix(300, 0)
	c.Timeline = []Step{{Name: StepQueued}}

	m := MergeSlices([]Result{a, b, c})
	if m.Status != StatusError || m.Reason != ReasonSlicesMixed || m.ExitCode != 2 {
		t.Errorf("status %s, reason %s, exit %d; want error, slices_mixed, 2 (the first unsuccessful slice's)", m.Status, m.Reason, m.ExitCode)
	}
	if m.HostCount != 3 || m.HostCounts != (bundle.HostCounts{OK: 2, Failed: 1}) || len(m.Hosts) != 3 || len(m.FailedHosts) != 1 {
		t.Errorf("hosts %d %+v %v %v", m.HostCount, m.HostCounts, m.Hosts, m.FailedHosts)
	}
	if fmt.Sprint(m.NotOKHosts) != "[h2]" {
		t.Errorf("not ok hosts %v", m.NotOKHosts)
	}
	if m.Artifacts != `{"a":1,"b":2}` {
		t.Errorf("artifacts %s: want the slices' merged key by key, the later slice's value winning", m.Artifacts)
	}
	if m.LaunchAttempts != 3 || m.PodName != a.PodName || len(m.Timeline) != 1 || !m.FinishedAt.Equal(time.Unix(300, 0)) {
		t.Errorf("attempts %d, pod %s, timeline %v, finished %v", m.LaunchAttempts, m.PodName, m.Timeline, m.FinishedAt)
	}
	want := "=== slice 1/3 in pod p-successful on node n: successful (exit code 0) ===\none\n" +
		"=== slice 2/3 in pod p-failed on node n: failed, playbook_failed (exit code 2) ===\ntwo\n" +
		"=== slice 3/3 in pod p-error on node n: error, evicted (exit code -1) ===\n"
	if m.Output != want {
		t.Errorf("output:\n%s\nwant:\n%s", m.Output, want)
	}

	// One reason among the unsuccessful slices is the run's.
	if m := MergeSlices([]Result{a, b}); m.Status != StatusFailed || m.Reason != ReasonPlaybookFailed {
		t.Errorf("status %s, reason %s; want failed, playbook_failed", m.Status, m.Reason)
	}
	if m := MergeSlices([]Result{a, a}); m.Status != StatusSuccessful || m.Reason != "" || m.ExitCode != 0 {
		t.Errorf("status %s, reason %s, exit %d; want successful", m.Status, m.Reason, m.ExitCode)
	}
	// Canceled wins over everything.
	if m := MergeSlices([]Result{b, sliceResult(StatusCanceled, ReasonCanceled, -1, nil, "", "")}); m.Status != StatusCanceled {
		t.Errorf("status %s, want canceled", m.Status)
	}
}

// TestMergeSlicesHostsChanged: slices that saw different host lists make
// the run an error, whatever their own ends.
func TestMergeSlicesHostsChanged(t *testing.T) {
	a := sliceResult(StatusSuccessful, "", 0, nil, "", "")
	b := a
	a.HostList, a.HostsSHA256, a.HostsTotal, a.SliceHosts = true, strings.Repeat("a", 64), 10, 5
	b.HostList, b.HostsSHA256, b.HostsTotal, b.SliceHosts = true, strings.Repeat("b", 64), 11, 6
	if m := MergeSlices([]Result{a, b}); m.Status != StatusError || m.Reason != ReasonHostsChanged {
		t.Errorf("status %s, reason %s; want error, hosts_changed", m.Status, m.Reason)
	}
	b.HostsSHA256 = a.HostsSHA256
	if m := MergeSlices([]Result{a, b}); m.Status != StatusSuccessful || m.SliceHosts != 11 {
		t.Errorf("status %s, slice hosts %d; want successful, 11", m.Status, m.SliceHosts)
	}
}

func TestSliceOutputLimit(t *testing.T) {
	for _, c := range []struct{ limit, n, want int }{{65536, 1, 65536}, {65536, 4, 16384}, {65536, 100, MinSliceOutput}} {
		if got := SliceOutputLimit(c.limit, c.n); got != c.want {
			t.Errorf("SliceOutputLimit(%d, %d) = %d, want %d", c.limit, c.n, got, c.want)
		}
	}
}

// FuzzMergeSlices: whatever the slices' results (statuses, reasons, host
// names, artifacts documents, outputs, digests), the merge does not panic,
// adds their hosts up, is successful only when every slice is and they saw
// one host list, and lays their outputs out in slice order.
func FuzzMergeSlices(f *testing.F) {
	f.Add([]byte{0, 1, 2}, "h1,h2", `{"a":1}`, "out\n", "aa")
	f.Add([]byte{1, 1}, "", "not json", "", "")
	f.Add([]byte{3, 0, 2, 1}, "x,,y", `{"b":{"c":[1]}}`, "\x1b[31m", "ab")
	statuses := []string{StatusSuccessful, StatusFailed, StatusError, StatusCanceled}
	reasons := []Reason{"", ReasonPlaybookFailed, ReasonEvicted, ReasonCanceled}
	f.Fuzz(func(t *testing.T, kinds []byte, hosts, artifacts, output, digests string) {
		if len(kinds) < 2 || len(kinds) > 20 {
			return
		}
		names := strings.Split(hosts, ",")
		rs := make([]Result, len(kinds))
		allOK, sum := true, int64(0)
		seen := map[string]bool{}
		for i, k := range kinds {
			st := statuses[int(k)%len(statuses)]
			r := Result{Status: st, Reason: reasons[int(k)%len(reasons)], Hosts: map[string]bundle.HostStats{},
				Artifacts: artifacts, Output: output}
			for j, n := range names {
				if j%len(kinds) == i {
					r.Hosts[n+fmt.Sprint(i)] = bundle.HostStats{OK: 1}
					r.HostCount++
				}
			}
			if i < len(digests) {
				r.HostList, r.HostsSHA256 = true, string(digests[i])
				seen[r.HostsSHA256] = true
			}
			sum += r.HostCount
			allOK = allOK && st == StatusSuccessful
			rs[i] = r
		}
		m := MergeSlices(rs)
		if m.HostCount != sum {
			t.Errorf("host count %d, want %d", m.HostCount, sum)
		}
		if ok := m.Status == StatusSuccessful; ok != (allOK && len(seen) <= 1) {
			t.Errorf("status %s with slices all successful %v and %d host lists", m.Status, allOK, len(seen))
		}
		at := 0
		for i := range rs {
			h := fmt.Sprintf("=== slice %d/%d", i+1, len(rs))
			j := strings.Index(m.Output[at:], h)
			if j < 0 {
				t.Fatalf("no header %q after byte %d", h, at)
			}
			at += j + len(h)
		}
	})
}
