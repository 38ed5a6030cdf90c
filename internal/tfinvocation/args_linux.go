// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package tfinvocation

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// parentArgs reads the command line of process pid.
func parentArgs(pid int) ([]string, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"), nil
}
