// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

//go:build !linux

package tfinvocation

import (
	"github.com/shirou/gopsutil/v4/process"
)

// parentArgs reads the command line of process pid: kern.procargs2 on
// macOS and the BSDs, the process's PEB on Windows.
func parentArgs(pid int) ([]string, error) {
	p, err := process.NewProcess(int32(pid)) //nolint:gosec // a pid fits
	if err != nil {
		return nil, err
	}
	return p.CmdlineSlice()
}
