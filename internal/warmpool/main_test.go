// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package warmpool

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	// See package runnertest: the fake clientset has no streaming lists.
	_ = os.Setenv("KUBE_FEATURE_WatchListClient", "false")
	os.Exit(m.Run())
}
