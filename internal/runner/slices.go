// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
)

// MinSliceOutput is the least output a slice keeps, whatever the run's
// output limit divided by its slices.
const MinSliceOutput = 4096

// SliceOutputLimit is what each of n slices keeps of its output so that
// their whole is within limit, but for MinSliceOutput each.
func SliceOutputLimit(limit, n int) int {
	if n <= 1 {
		return limit
	}
	return max(limit/n, MinSliceOutput)
}

// SliceHeader is the line that opens a slice's part of a sliced run's
// output.
func SliceHeader(slice, of int, r Result) string {
	end := r.Status
	if r.Reason != "" {
		end += ", " + string(r.Reason)
	}
	where := ""
	if r.PodName != "" {
		where = " in pod " + r.PodName
		if r.NodeName != "" {
			where += " on node " + r.NodeName
		}
	}
	return fmt.Sprintf("=== slice %d/%d%s: %s (exit code %d) ===", slice, of, where, end, r.ExitCode)
}

// MergeSlices makes one result of a sliced run's slices, given in slice
// order. The status is the worst of theirs (canceled, then error, then
// failed); the reason is theirs when every slice that did not succeed
// ended for the same one, else ReasonSlicesMixed, and ReasonHostsChanged
// (status error) when slices saw different host lists. Hosts, counts and
// failed tasks add up (a host is in one slice only); the artifacts are
// the slices' objects merged key by key in slice order, a later slice's
// value replacing an earlier one's, as AWX merges a sliced job's; the
// output is each slice's, in slice order, after its SliceHeader.
func MergeSlices(rs []Result) Result {
	if len(rs) == 1 {
		return rs[0]
	}
	m := Result{Status: StatusSuccessful, Hosts: map[string]bundle.HostStats{}, FailedHosts: map[string]bundle.HostStats{},
		StartedAt: rs[0].StartedAt, FinishedAt: rs[0].FinishedAt, ResultAt: rs[0].ResultAt}
	rank := map[string]int{StatusSuccessful: 0, StatusFailed: 1, StatusError: 2, StatusCanceled: 3}
	var (
		out       strings.Builder
		reasons   []Reason
		artifacts = map[string]json.RawMessage{}
		last      = -1
		digests   = map[string]bool{}
	)
	for i, r := range rs {
		if rank[r.Status] > rank[m.Status] {
			m.Status = r.Status
		}
		if r.Status != StatusSuccessful {
			if r.Reason != "" && !slices.Contains(reasons, r.Reason) {
				reasons = append(reasons, r.Reason)
			}
			if m.ExitCode == 0 {
				m.ExitCode, m.Err = r.ExitCode, r.Err
				if r.Message != "" {
					m.Message = fmt.Sprintf("slice %d/%d: %s", i+1, len(rs), r.Message)
				}
			}
		}
		if r.HostList {
			digests[r.HostsSHA256] = true
			m.HostList, m.HostsTotal, m.HostsSHA256 = true, max(m.HostsTotal, r.HostsTotal), r.HostsSHA256
			m.SliceHosts += r.SliceHosts
		}
		maps.Copy(m.Hosts, r.Hosts)
		maps.Copy(m.FailedHosts, r.FailedHosts)
		m.NotOKHosts = append(m.NotOKHosts, r.NotOKHosts...)
		m.HostCount += r.HostCount
		addCounts(&m.HostCounts, r.HostCounts)
		m.FailedTasks = append(m.FailedTasks, r.FailedTasks...)
		m.FailedTaskCount += r.FailedTaskCount
		mergeArtifacts(artifacts, r.Artifacts)
		m.Events = append(m.Events, r.Events...)
		m.PodKept = m.PodKept || r.PodKept
		m.LaunchAttempts += r.LaunchAttempts
		if r.StartedAt.Before(m.StartedAt) {
			m.StartedAt = r.StartedAt
		}
		if !r.FinishedAt.Before(m.FinishedAt) {
			m.FinishedAt, m.ResultAt, last = r.FinishedAt, r.ResultAt, i
		}
		m.Warm = m.Warm || r.Warm
		out.WriteString(SliceHeader(i+1, len(rs), r) + "\n")
		out.WriteString(r.Output)
		if r.Output != "" && !strings.HasSuffix(r.Output, "\n") {
			out.WriteByte('\n')
		}
	}
	// The run's pod and timeline are its first slice's and its longest's:
	// slice_results has each.
	m.PodName, m.NodeName = rs[0].PodName, rs[0].NodeName
	if last >= 0 {
		m.Timeline = rs[last].Timeline
	}
	keepFirstHosts(m.Hosts, bundle.MaxHosts)
	keepFirstHosts(m.FailedHosts, bundle.MaxFailedHosts)
	m.FailedTasks = m.FailedTasks[:min(len(m.FailedTasks), bundle.MaxFailedTasks)]
	m.Artifacts = artifactsJSON(artifacts)
	m.Output = out.String()
	switch {
	case len(digests) > 1:
		m.Status, m.Reason = StatusError, ReasonHostsChanged
		m.Message = "the slices saw different host lists: the inventory changed while they started, so hosts may " +
			"have been left out or run twice; slice_results gives each slice's host count"
	case m.Status == StatusSuccessful:
	case len(reasons) == 1:
		m.Reason = reasons[0]
	default:
		m.Reason = ReasonSlicesMixed
	}
	return m
}

func addCounts(c *bundle.HostCounts, d bundle.HostCounts) {
	c.OK, c.Changed, c.Failed, c.Unreachable = c.OK+d.OK, c.Changed+d.Changed, c.Failed+d.Failed, c.Unreachable+d.Unreachable
	c.Rescued, c.Ignored = c.Rescued+d.Rescued, c.Ignored+d.Ignored
}

// keepFirstHosts keeps the first n hosts by name.
func keepFirstHosts(hosts map[string]bundle.HostStats, n int) {
	if len(hosts) <= n {
		return
	}
	for _, h := range slices.Sorted(maps.Keys(hosts))[n:] {
		delete(hosts, h)
	}
}

// mergeArtifacts adds doc's members to into; a doc that is not a JSON
// object (the empty one included) adds nothing.
func mergeArtifacts(into map[string]json.RawMessage, doc string) {
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(doc), &m) != nil {
		return
	}
	maps.Copy(into, m)
}

func artifactsJSON(m map[string]json.RawMessage) string {
	if len(m) == 0 {
		return ""
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(m) != nil {
		return ""
	}
	return strings.TrimSuffix(b.String(), "\n")
}
