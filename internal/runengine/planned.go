// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"fmt"
	"strings"
)

// PlanMismatchError: the run's pod as rendered at apply is not the pod the
// plan showed (Request.Planned), so nothing of the run was created, claimed
// or sent. Its group or node label changed between plan and apply; the
// catalog's signatures do not catch a change made by someone who holds the
// key, this does.
type PlanMismatchError struct {
	Group string
	// Diff is a unified diff from the planned pod to the pod at apply.
	Diff string
}

func (e *PlanMismatchError) Error() string {
	return fmt.Sprintf("the run's pod in container group %q is not the pod the plan showed (rendered_pod):\n%s", e.Group, e.Diff)
}

// checkPlanned compares the pod rendered at apply with the planned one; ""
// planned (unknown at plan) checks nothing.
func checkPlanned(group, planned, rendered string) error {
	if planned == "" || planned == rendered {
		return nil
	}
	return &PlanMismatchError{Group: group, Diff: unifiedDiff(planned, rendered, "planned", "apply")}
}

// diffContext is how many unchanged lines a hunk shows around a change.
const diffContext = 2

// unifiedDiff is a compact unified diff of two texts by lines: the pods a
// plan shows are some dozens of lines, so a plain LCS table is cheap.
func unifiedDiff(a, b, nameA, nameB string) string {
	x, y := strings.Split(strings.TrimSuffix(a, "\n"), "\n"), strings.Split(strings.TrimSuffix(b, "\n"), "\n")
	if len(x)*len(y) > 1<<22 {
		return fmt.Sprintf("--- %s\n+++ %s\n(%d and %d lines; too long to compare line by line)\n", nameA, nameB, len(x), len(y))
	}
	// lcs[i][j] is the length of the longest common subsequence of x[i:] and y[j:].
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type line struct {
		op   byte // ' ', '-' or '+'
		text string
		i, j int // positions in x and y before this line
	}
	var script []line
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			script = append(script, line{' ', x[i], i, j})
			i, j = i+1, j+1
		case j < len(y) && (i == len(x) || lcs[i][j+1] > lcs[i+1][j]):
			script = append(script, line{'+', y[j], i, j})
			j++
		default:
			script = append(script, line{'-', x[i], i, j})
			i++
		}
	}
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", nameA, nameB)
	for k := 0; k < len(script); {
		if script[k].op == ' ' {
			k++
			continue
		}
		// A hunk: from diffContext lines before this change to diffContext
		// lines after the last change that is at most 2*diffContext away.
		start, end := max(0, k-diffContext), k
		for end < len(script) {
			if script[end].op != ' ' {
				end++
				continue
			}
			run := end
			for run < len(script) && script[run].op == ' ' {
				run++
			}
			if run == len(script) || run-end > 2*diffContext {
				end = min(len(script), end+diffContext)
				break
			}
			end = run
		}
		var na, nb int
		for _, l := range script[start:end] {
			if l.op != '+' {
				na++
			}
			if l.op != '-' {
				nb++
			}
		}
		fmt.Fprintf(&out, "@@ -%d,%d +%d,%d @@\n", script[start].i+1, na, script[start].j+1, nb)
		for _, l := range script[start:end] {
			out.WriteByte(l.op)
			out.WriteString(l.text)
			out.WriteByte('\n')
		}
		k = end
	}
	return out.String()
}
