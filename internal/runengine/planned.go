// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"k8s.io/client-go/rest"
)

// Target is where a run's pod goes and what it is, as a plan shows it
// (the run's planned_targets) and apply compares it: the API server and the
// CA of the group's credential, which decide which cluster receives the
// bundle and its secrets, and the pod. "" in a planned Target is a value
// the plan did not know, which is not compared.
type Target struct {
	Group string
	// Server is the API server's URL as the credential gives it.
	Server string
	// CASHA256 is CAFingerprint of the credential's CA.
	CASHA256  string
	PodSHA256 string
	// Pod is the pod as YAML, when known, for a diff of it.
	Pod string
}

// The CA fingerprints of a credential without a CA of its own.
const (
	// CASystem: the host's system roots verify the API server.
	CASystem = "system"
	// CAInsecure: the API server is not verified (insecure-skip-tls-verify).
	CAInsecure = "insecure"
)

// ClusterOf is the server and CA fingerprint of a client configuration:
// the hex SHA-256 of its PEM CA bundle, CASystem or CAInsecure; "" for a
// CA file that cannot be read (client-go fails on it too). It reads no
// cluster: what it compares is what the clients would trust.
func ClusterOf(cfg *rest.Config) (server, ca string) {
	if cfg == nil {
		return "", ""
	}
	switch {
	case cfg.Insecure:
		ca = CAInsecure
	case len(cfg.CAData) > 0:
		ca = sha256Hex(cfg.CAData)
	case cfg.CAFile != "":
		// Only the provider's own connection has one: kubeconfigs from
		// cluster data may not name files (kubeclient.CheckUntrusted).
		if b, err := os.ReadFile(cfg.CAFile); err == nil {
			ca = sha256Hex(b)
		}
	default:
		ca = CASystem
	}
	return cfg.Host, ca
}

// PodSHA256 is the digest of a rendered pod's YAML.
func PodSHA256(pod string) string {
	if pod == "" {
		return ""
	}
	return sha256Hex([]byte(pod))
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// PlanMismatchError: the run's target at apply (its group's cluster or
// pod) is not the one the plan showed (Request.Planned), so nothing of the
// run was created, claimed or sent. Its group, credential or node label
// changed between plan and apply; the catalog's signatures do not catch a
// change made by someone who holds the key, this does.
type PlanMismatchError struct {
	Group string
	// Cluster: the server or CA differs, not only the pod.
	Cluster bool
	// Diff is a unified diff from the planned target to the one at apply,
	// then of the pods when the planned pod's YAML is known.
	Diff string
}

func (e *PlanMismatchError) Error() string {
	if e.Cluster {
		return fmt.Sprintf("the cluster of container group %q (its credential's server or CA) is not the one the plan "+
			"showed (planned_targets):\n%s", e.Group, e.Diff)
	}
	return fmt.Sprintf("the run's pod in container group %q is not the pod the plan showed (rendered_pod, "+
		"planned_targets):\n%s", e.Group, e.Diff)
}

// checkPlanned compares the target at apply with the planned one; a nil
// plan, or a value the plan did not know, checks nothing.
func checkPlanned(planned *Target, actual Target) error {
	if planned == nil {
		return nil
	}
	// What the plan did not know reads as what apply found.
	p := *planned
	fill := func(v *string, at string) {
		if *v == "" {
			*v = at
		}
	}
	fill(&p.Server, actual.Server)
	fill(&p.CASHA256, actual.CASHA256)
	if p.PodSHA256 == "" && p.Pod != "" {
		p.PodSHA256 = PodSHA256(p.Pod)
	}
	fill(&p.PodSHA256, actual.PodSHA256)
	cluster := p.Server != actual.Server || p.CASHA256 != actual.CASHA256
	if !cluster && p.PodSHA256 == actual.PodSHA256 {
		return nil
	}
	diff := unifiedDiff(targetText(actual.Group, p), targetText(actual.Group, actual), "planned", "apply")
	if p.Pod != "" && p.Pod != actual.Pod {
		diff += "\n" + unifiedDiff(p.Pod, actual.Pod, "planned pod", "pod at apply")
	}
	return &PlanMismatchError{Group: actual.Group, Cluster: cluster, Diff: diff}
}

// targetText is a target as the lines of its planned_targets element.
func targetText(group string, t Target) string {
	return fmt.Sprintf("container_group: %s\nserver: %s\nca_sha256: %s\npod_sha256: %s\n", group, t.Server, t.CASHA256, t.PodSHA256)
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
