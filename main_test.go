// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package main

import "testing"

func TestLogsDiscarded(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want bool
	}{
		{nil, true},
		{[]string{"PATH=/bin", "TF_IN_AUTOMATION=1"}, true},
		{[]string{"TF_LOG="}, true},
		{[]string{"TF_LOG=TRACE"}, false},
		{[]string{"TF_LOG_PROVIDER=debug"}, false},
		{[]string{"TF_LOG_PROVIDER_KUBEPLAY=info"}, false},
		{[]string{"TF_LOG_SDK_FRAMEWORK=trace"}, false},
		{[]string{"TF_LOG_PATH=/tmp/tf.log"}, false},
	} {
		if got := logsDiscarded(tc.env); got != tc.want {
			t.Errorf("logsDiscarded(%q) = %v, want %v", tc.env, got, tc.want)
		}
	}
}
