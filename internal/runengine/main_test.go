// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	// client-go's fake clientset has no streaming lists, and waitfor's
	// ListerWatchers do not tell the reflector so: list, then watch.
	_ = os.Setenv("KUBE_FEATURE_WatchListClient", "false")
	os.Exit(m.Run())
}
