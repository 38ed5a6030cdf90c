// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import "github.com/kubeplay/terraform-provider-kubeplay/internal/inflight"

// active counts the runs of this process inside Engine.Run, so that a
// provider whose Terraform died can wait for their clean-up before it exits.
var active = &inflight.Gate{}

// Idle returns a channel that is closed once no run of this process is in
// Engine.Run (at once when none is).
func Idle() <-chan struct{} { return active.Idle() }
