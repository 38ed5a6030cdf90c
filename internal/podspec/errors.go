// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package podspec

import (
	"errors"
	"fmt"
)

// ErrNoContainers: the pod, once rendered, has no container, so a run has
// nowhere to exec. RenderGroup returns it (wrapped) when the override removes
// every container, and ParsePodSpec when a verbatim spec has none.
var ErrNoContainers = errors.New("the pod has no container; its first container hosts the run")

// Input names which of a pod's inputs an error is about.
type Input string

// The inputs of a rendered pod.
const (
	InputGroupLabels   Input = "the container group's labels"
	InputOverride      Input = "the pod override"
	InputLabelLabels   Input = "the node label's labels"
	InputDynamicLabels Input = "the node label's dynamic labels"
)

// ReservedLabelError: an input sets one of the labels kubeplay finds its pods
// by to another value than kubeplay's.
type ReservedLabelError struct {
	Input      Input
	Key, Value string
	// Want is the value kubeplay sets.
	Want string
}

func (e *ReservedLabelError) Error() string {
	return fmt.Sprintf("%s set label %q to %q, but that label is kubeplay's own and must be %q; remove it",
		e.Input, e.Key, e.Value, e.Want)
}
