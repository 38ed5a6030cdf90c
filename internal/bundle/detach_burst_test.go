// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package bundle

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestFollowBurstsByteExact: output that comes in bursts larger than a
// pipe's buffer (70 kB at once, as a task's large result does) is appended
// to its segment while the follower copies it. GNU dd then reads the
// segment in two short reads and warns "partial read ... suggest
// iflag=fullblock" before its byte count: the follower must still count
// the bytes it sent, or it sends them again. The whole output comes once,
// in order, and the container's log has it too.
func TestFollowBurstsByteExact(t *testing.T) {
	log := useContainerLog(t)
	const per, bursts = 10000, 40
	b := Bundle{Command: []string{"sh", "-c", fmt.Sprintf(
		`i=0; while [ $i -lt %d ]; do seq $((i*%d)) $((i*%d+%d)); i=$((i+1)); sleep 0.1; done`, bursts, per, per, per-1)},
		Marker: testMarker}
	var w strings.Builder
	for i := range per * bursts {
		fmt.Fprintf(&w, "%d\n", i)
	}
	want := w.String()
	out, before, r := runOnce(t, &b)
	if out != want {
		i := 0
		for i < len(out) && i < len(want) && out[i] == want[i] {
			i++
		}
		t.Errorf("the follower sent %d bytes, want the output's %d once: they part at byte %d (%q, want %q); result %+v, stderr %q",
			len(out), len(want), i, out[i:min(i+16, len(out))], want[i:min(i+16, len(want))], r, before)
	}
	if got, _ := os.ReadFile(log); string(got) != want {
		t.Errorf("the container's log has %d bytes, want the output's %d", len(got), len(want))
	}
}
