// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
)

// TestSchedulingDescription: the documented wait for an autoscaler's
// answer is the runner's.
func TestSchedulingDescription(t *testing.T) {
	want := fmt.Sprintf("for up to %d seconds", int(runner.AutoscalerGrace.Seconds()))
	if !strings.Contains(schedulingDescription, want) {
		t.Errorf("the Scheduling paragraph does not say %q", want)
	}
	for _, r := range runner.Reasons {
		if r.Reason == runner.ReasonUnschedulable && !strings.Contains(r.Meaning, fmt.Sprintf("%d seconds", int(runner.AutoscalerGrace.Seconds()))) {
			t.Errorf("%s says not the grace: %s", r.Reason, r.Meaning)
		}
	}
}
