// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

// Package podsecurity holds run pods to a Kubernetes Pod Security Standard
// level with the checks of the upstream PodSecurity admission plugin
// (k8s.io/pod-security-admission), so that a pod the API server would
// refuse in a namespace enforcing that level is refused before it is made.
package podsecurity

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// Levels of the Pod Security Standards.
const (
	Privileged = string(api.LevelPrivileged)
	Baseline   = string(api.LevelBaseline)
	Restricted = string(api.LevelRestricted)
)

// Default is the level of a group that sets none: baseline refuses what
// lets a pod take its node (privileged containers, host namespaces, host
// paths and ports, added capabilities) while the default run pod, whose
// execution environments run as root, passes it; restricted would refuse
// that pod.
const Default = Baseline

// Levels are the valid levels, from the least to the most restrictive.
var Levels = []string{Privileged, Baseline, Restricted}

// Namespace labels of the PodSecurity admission plugin.
const (
	EnforceLabel        = api.EnforceLevelLabel
	EnforceVersionLabel = api.EnforceVersionLabel
)

// ErrInvalidLevel: a level that is none of Levels.
var ErrInvalidLevel = errors.New("invalid pod security level")

// Violation is one failed check: the library's forbidden reason, such as
// "privileged" or "hostPath volumes", and its detail, such as the
// containers or volumes at fault (may be empty).
type Violation struct {
	Reason string
	Detail string
}

func (v Violation) String() string {
	if v.Detail == "" {
		return v.Reason
	}
	return v.Reason + " (" + v.Detail + ")"
}

// ViolationError: a pod fails checks of Level.
type ViolationError struct {
	Level      string
	Violations []Violation
}

// Error reads as the API server's refusal does.
func (e *ViolationError) Error() string {
	parts := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		parts[i] = v.String()
	}
	return fmt.Sprintf("violates PodSecurity %q: %s", e.Level+":"+api.VersionLatest, strings.Join(parts, ", "))
}

// Level returns level, or Default for "" (groups stored before levels
// existed); ErrInvalidLevel for anything else.
func Level(level string) (string, error) {
	if level == "" {
		return Default, nil
	}
	if _, err := api.ParseLevel(level); err != nil {
		return "", fmt.Errorf("%w %q: %v", ErrInvalidLevel, level, err)
	}
	return level, nil
}

// NamespaceLabels are the labels that make the API server enforce level on
// every pod of a namespace; nil for an invalid level.
func NamespaceLabels(level string) map[string]string {
	l, err := Level(level)
	if err != nil {
		return nil
	}
	return map[string]string{EnforceLabel: l, EnforceVersionLabel: api.VersionLatest}
}

// LabelPrefix starts every label of the PodSecurity admission plugin.
const LabelPrefix = "pod-security.kubernetes.io/"

// ModeLabels are NamespaceLabels plus the warn and audit modes at the same
// level: a refused pod is refused, a workload whose pods would be is warned
// about when it is made, and both are audited. nil for an invalid level.
func ModeLabels(level string) map[string]string {
	l, err := Level(level)
	if err != nil {
		return nil
	}
	return map[string]string{
		EnforceLabel: l, EnforceVersionLabel: api.VersionLatest,
		api.WarnLevelLabel: l, api.WarnVersionLabel: api.VersionLatest,
		api.AuditLevelLabel: l, api.AuditVersionLabel: api.VersionLatest,
	}
}

var evaluator = sync.OnceValues(func() (policy.Evaluator, error) {
	return policy.NewEvaluator(policy.DefaultChecks(), nil)
})

// Check evaluates pod against level at the latest version of the checks
// this build knows. Where the cluster is known, CheckAt with its
// ServerVersion says what its API server says.
func Check(level string, pod *corev1.Pod) error { return CheckAt(level, "", pod) }

// CheckAt evaluates pod against level with the checks of policy version
// ("v1.32"; "" or "latest" for the newest this build knows), as a namespace
// labelled with NamespaceLabels(level) would on an API server of that
// version: "latest" there means the server's own version, and newer checks
// relax some (hostUsers: false passes runAsNonRoot from v1.35 only). It
// returns a *ViolationError listing every failed check, an error wrapping
// ErrInvalidLevel, or nil. A nil pod passes: there is nothing to check.
func CheckAt(level, version string, pod *corev1.Pod) error {
	l, err := Level(level)
	if err != nil {
		return err
	}
	if pod == nil || l == Privileged {
		return nil
	}
	ev, err := evaluator()
	if err != nil {
		return fmt.Errorf("pod security checks: %w", err)
	}
	v := api.LatestVersion()
	if version != "" {
		if v, err = api.ParseVersion(version); err != nil {
			return fmt.Errorf("pod security policy version %q: %v", version, err)
		}
	}
	lv := api.LevelVersion{Level: api.Level(l), Version: v}
	var out []Violation
	for _, r := range ev.EvaluatePod(lv, &pod.ObjectMeta, &pod.Spec) {
		if !r.Allowed {
			reason := r.ForbiddenReason
			if reason == "" {
				reason = policy.UnknownForbiddenReason
			}
			out = append(out, Violation{Reason: reason, Detail: r.ForbiddenDetail})
		}
	}
	if len(out) > 0 {
		return &ViolationError{Level: l, Violations: out}
	}
	return nil
}

// PolicyVersion is the policy version ("v1.32") that an API server of info
// enforces for "latest"; "" when info does not say (then the newest checks
// apply).
func PolicyVersion(info *version.Info) string {
	if info == nil {
		return ""
	}
	major, err := strconv.Atoi(info.Major)
	// Minor may carry a suffix, as "32+" on some distributions.
	digits := strings.FieldsFunc(info.Minor, func(r rune) bool { return !unicode.IsDigit(r) })
	if err != nil || major != 1 || len(digits) == 0 {
		return ""
	}
	minor, err := strconv.Atoi(digits[0])
	if err != nil {
		return ""
	}
	return "v1." + strconv.Itoa(minor)
}

// versions caches ServerVersion per client: an API server's version does
// not change under a client, and every plan and run asks.
var versions sync.Map // discovery.ServerVersionInterface -> string

// asking holds a client's lock while it is asked.
var asking sync.Map // discovery.ServerVersionInterface -> *sync.Mutex

// ServerVersion is the policy version of the API server that d talks to,
// asked once per client by discovery. An error leaves nothing cached.
func ServerVersion(d discovery.ServerVersionInterface) (string, error) {
	if d == nil {
		return "", errors.New("reading the API server's version: no client")
	}
	// A client of a type that cannot be a map key is asked every time.
	cacheable := reflect.TypeOf(d).Comparable()
	if cacheable {
		if v, ok := versions.Load(d); ok {
			if s, ok := v.(string); ok {
				return s, nil
			}
		}
		// Runs planned together ask together: one asks, the others wait
		// for its answer (half a request per run in an apply of ten).
		mu, _ := asking.LoadOrStore(d, &sync.Mutex{})
		if mu, ok := mu.(*sync.Mutex); ok {
			mu.Lock()
			defer mu.Unlock()
		}
		if v, ok := versions.Load(d); ok {
			if s, ok := v.(string); ok {
				return s, nil
			}
		}
	}
	info, err := d.ServerVersion()
	if err != nil {
		return "", fmt.Errorf("reading the API server's version: %w", err)
	}
	v := PolicyVersion(info)
	if cacheable {
		versions.Store(d, v)
	}
	return v, nil
}
