// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

// Package runengine owns a run's whole life in its container group: it
// renders the run's pod from the group and node label, removes what killed
// providers left behind, claims the group's capacity, makes the run
// namespace of a namespace label, runs the bundle in the pod (package
// runner), and gives everything back whatever happened. It also dry-runs
// the pod at plan time. Errors are typed; the provider words them.
package runengine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/capacity"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalogkey"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/warmpool"
)

// The operations a run executes; a destroy gets claims and a namespace of
// its own, apart from its run's.
const (
	OperationCreate  = "create"
	OperationDestroy = "destroy"
)

// OnceFunc runs f once per key and gives every caller f's result.
type OnceFunc func(key string, f func() error) error

// LogFunc receives the engine's progress messages.
type LogFunc func(level slog.Level, msg string, fields map[string]any)

// Options are what an Engine shares with others of the same process.
type Options struct {
	// Sweeps runs the orphan sweep once per group; nil sweeps every run.
	Sweeps OnceFunc
	// DryRuns runs one dry run per distinct pod; nil runs every one.
	DryRuns OnceFunc
	// Log receives progress messages; nil discards them.
	Log LogFunc
	// Key gives the catalog key, which signs the warm pods and held nodes'
	// pods the engine makes and verifies those it claims; asked only when
	// one is. nil: nothing is signed, so no warm pod or held node is used.
	Key KeyFunc
}

// KeyFunc gives the catalog key.
type KeyFunc func(context.Context) (*catalogkey.Key, error)

// Engine runs runs with the clients of one group's cluster.
type Engine struct {
	clients         *kubeclient.Clients
	sweeps, dryRuns OnceFunc
	log             LogFunc
	keyFunc         KeyFunc
	// claimTTL is how long a claim lasts unrenewed; tests shorten it.
	claimTTL time.Duration
	// run runs the pod; tests replace it.
	run func(context.Context, runner.Spec) runner.Result
	// start starts a held node's pod.
	start func(context.Context, runner.Spec) (*corev1.Pod, error)
}

// New returns an engine that runs with c.
func New(c *kubeclient.Clients, o Options) *Engine {
	e := &Engine{clients: c, sweeps: o.Sweeps, dryRuns: o.DryRuns, log: o.Log, keyFunc: o.Key, claimTTL: capacity.ClaimTTL}
	if e.sweeps == nil {
		e.sweeps = always
	}
	if e.dryRuns == nil {
		e.dryRuns = always
	}
	if e.log == nil {
		e.log = func(slog.Level, string, map[string]any) {}
	}
	r := &runner.Runner{Config: c.Config, Kube: c.Kube, Log: e.log}
	e.run, e.start = r.Run, r.Start
	return e
}

func always(_ string, f func() error) error { return f() }

// key is the catalog key, or an error that says why there is none.
func (e *Engine) key(ctx context.Context) (*catalogkey.Key, error) {
	if e.keyFunc == nil {
		return nil, warmpool.ErrNoKey
	}
	return e.keyFunc(ctx)
}

// NewID returns a fresh run id: 16 hex digits.
func NewID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Request is one execution of a run.
type Request struct {
	RunInfo
	// Operation is OperationCreate or OperationDestroy.
	Operation string
	Group     Group
	// Label is the run's node label; nil for none.
	Label *podspec.Label
	// Bundle is the payload; the engine sets KUBEPLAY_OPERATION, the marker,
	// Local (from Label, or a held node's pod) and, for a namespace label,
	// the kubeconfig and KUBEPLAY_NAMESPACE.
	Bundle bundle.Bundle
	// Forks is what the run claims of the group's max_forks.
	Forks            int64
	OutputLimit      int
	KeepPodOnFailure bool
	// Timeout bounds the whole run; the pod's activeDeadlineSeconds is
	// PodDeadline(Timeout).
	Timeout time.Duration
	// OnLine receives each output line, redacted, as it arrives.
	OnLine func(line string)
	// OnEvent, when set, is told of the run's progress as the waits see it:
	// waiting for capacity, the pod created, scheduled and running.
	OnEvent func(event string)
	// Node names a held node of the group (kubeplay_node) to run in,
	// instead of a pod of the run's own; "" for none.
	Node string
	// Planned is the target the plan showed (the run's planned_targets and
	// rendered_pod); nil when the plan did not know it. A run whose cluster
	// or pod is otherwise fails with *PlanMismatchError before anything is
	// created or claimed.
	Planned *Target
}

// Outcome is what one execution gives.
type Outcome struct {
	runner.Result
	// Rendered is the pod as YAML, without its run label.
	Rendered string
	// Targets are the run's targets at apply, one per candidate in order.
	Targets []Target
	// Namespace is the run's namespace, for a namespace label.
	Namespace string
	// Warnings are clean-up failures that did not change the result:
	// *ReleaseError and *NamespaceError.
	Warnings []error
}

// Run executes req in a fresh pod of its group and gives back the group's
// capacity and the run namespace on every path. An error means the run did
// not start: ErrGroupUnavailable, *PodSecurityError, *PlanMismatchError,
// *CapacityError or *NamespaceError; a run that started, whatever became of it, is an Outcome.
func (e *Engine) Run(ctx context.Context, req Request) (out Outcome, err error) {
	active.Enter()
	defer active.Leave()
	ctx, cancel := context.WithTimeout(ctx, req.Timeout)
	defer cancel()
	tl := runner.NewTimeline(runner.StepQueued, time.Now())
	pod, err := e.prepare(ctx, req, &out)
	if err != nil {
		return out, err
	}
	var claims []ledgerClaim
	defer func() { out.Warnings = append(out.Warnings, e.release(ctx, claims, recordOf(req.ID, out.Result))...) }()
	if claims, err = e.claim(ctx, req); err != nil {
		return out, err
	}
	return e.runClaimed(ctx, req, pod, out, tl)
}

// prepare renders req's pod into out.Rendered and sweeps the group's
// orphans.
func (e *Engine) prepare(ctx context.Context, req Request, out *Outcome) (*corev1.Pod, error) {
	pod, err := RenderPod(req.Group, req.Label, req.RunInfo, PodDeadline(req.Timeout))
	if err != nil {
		return nil, err
	}
	out.Rendered, _ = podspec.ToYAML(pod)
	t := Target{Group: req.Group.Name, Pod: out.Rendered, PodSHA256: PodSHA256(out.Rendered)}
	if e.clients != nil {
		t.Server, t.CASHA256 = ClusterOf(e.clients.Config)
	}
	out.Targets = []Target{t}
	// The cluster and pod are as planned, or nothing is created, claimed or
	// sent: the warm pool claimed from is this pod's too.
	if err := checkPlanned(req.Planned, t); err != nil {
		return nil, err
	}
	pod.Labels[managed.LabelRun] = req.ID
	e.sweep(ctx, req.Group, namespaceLabel(req.Label) != nil)
	return pod, nil
}

// runClaimed runs pod once req's capacity is claimed: it makes the run
// namespace of a namespace label, runs the bundle, and deletes the
// namespace again.
func (e *Engine) runClaimed(ctx context.Context, req Request, pod *corev1.Pod, prior Outcome, tl *runner.Timeline) (out Outcome, err error) {
	out = prior
	b := payload(req)
	secrets := Secrets(b)
	if nsLabel := namespaceLabel(req.Label); nsLabel != nil {
		tl.Begin(runner.StepNamespace, time.Now())
		ns, kubeconfig, token, err := e.createNamespace(ctx, req, nsLabel)
		if ns != "" {
			defer func() {
				if !out.PodKept {
					out.Warnings = appendErr(out.Warnings, e.deleteNamespace(ctx, req.Group, ns))
				}
			}()
		}
		if err != nil {
			return out, err
		}
		out.Namespace = ns
		b.Kubeconfig, b.Env["KUBEPLAY_NAMESPACE"] = kubeconfig, ns
		secrets = append(secrets, token)
	}
	var claimed *corev1.Pod
	if req.Node != "" {
		tl.Begin(runner.StepClaim, time.Now())
		tl.Note(runner.StepClaim, "held node "+req.Node)
		held, heldNS, err := e.heldNode(ctx, req.Group, req.Node)
		if err != nil {
			return out, err
		}
		if heldNS != nil {
			// A namespace node: the run's own pod, with the node's kubeconfig.
			release, token, err := e.takeTurn(ctx, req, heldNS.Name, &b)
			if err != nil {
				return out, err
			}
			defer func() { out.Warnings = appendErr(out.Warnings, release()) }()
			out.Namespace = heldNS.Name
			secrets = append(secrets, token)
		} else {
			claimed, b.Held = held, true
			b.Local = PodLocal(held) // the node's label as it was when the node was made
			out.Rendered, _ = podspec.ToYAML(CleanPod(held))
			if len(out.Targets) == 1 {
				out.Targets[0].Pod, out.Targets[0].PodSHA256 = out.Rendered, PodSHA256(out.Rendered)
			}
		}
	}
	if t, n := warmPool(req, pod); claimed == nil && n > 0 {
		tl.Begin(runner.StepClaim, time.Now())
		if e.signedPool(ctx, &t) {
			var topped *atomic.Bool
			claimed, topped = e.takeWarm(ctx, req, t, n)
			// After the run, the pool is filled again unless the claim's
			// refill has topped it up already (a LIST saved): a run that
			// found no warm pod, or whose refill the quota held back.
			defer func() {
				if topped == nil || !topped.Load() {
					e.refill(ctx, t, n)
				}
			}()
		}
		if claimed == nil {
			tl.Note(runner.StepClaim, "no warm pod was ready")
		}
	}
	// The pod's copy of the output for kubectl logs is not redacted, and a
	// check's output (--diff) shows what the play renders from secrets.
	b.PrivateOutput = len(secrets) > 0 || b.Check
	out.Result = e.run(ctx, runner.Spec{
		// The first container hosts the shell: "worker", or a verbatim spec's first.
		Pod: pod, Claimed: claimed, Held: b.Held, DeleteAsync: claimed != nil && !b.Held, Container: pod.Spec.Containers[0].Name, Bundle: b, Secrets: secrets,
		OutputLimit: req.OutputLimit, PendingTimeout: req.Group.pending(),
		KeepPodOnFailure: req.KeepPodOnFailure, OnLine: req.OnLine, OnEvent: req.OnEvent, Timeline: tl,
		OnCreated:     e.signRunPod(req.ID),
		LaunchRetries: max(0, req.Group.LaunchRetries),
		OnLaunchRetry: func(attempt int, err error) {
			e.log(slog.LevelWarn, "run pod launch failed; retrying with a fresh pod", map[string]any{
				"run": req.ID, "attempt": attempt, "retries": req.Group.LaunchRetries, "reason": err.Error()})
		},
	})
	return out, nil
}

// payload is req's bundle with what the engine adds to every run's: the
// operation, a marker, and the node label's settings for Ansible on the pod.
func payload(req Request) bundle.Bundle {
	b := req.Bundle
	b.Local = LabelLocal(req.Label)
	b.Env = maps.Clone(b.Env)
	if b.Env == nil {
		b.Env = map[string]string{}
	}
	b.Env["KUBEPLAY_OPERATION"] = req.Operation
	b.LeaseGrace, b.KeepOutput = req.Group.DisconnectGrace, int64(req.OutputLimit)
	if b.Marker == "" {
		b.Marker = "\x1ekubeplay-" + NewID() + " "
	}
	return b
}

func appendErr(errs []error, err error) []error {
	if err != nil {
		return append(errs, err)
	}
	return errs
}

// Once runs a function once per key and gives every caller its result: 100
// runs of one group in an apply need one dry run and one orphan sweep. Its
// Do is an OnceFunc; the zero value is ready to use.
type Once struct {
	mu sync.Mutex
	m  map[string]*onceEntry
}

type onceEntry struct {
	once sync.Once
	err  error
}

// Do runs f unless a call with key ran it before, and returns f's error.
func (s *Once) Do(key string, f func() error) error {
	s.mu.Lock()
	if s.m == nil {
		s.m = map[string]*onceEntry{}
	}
	e, ok := s.m[key]
	if !ok {
		e = &onceEntry{}
		s.m[key] = e
	}
	s.mu.Unlock()
	e.once.Do(func() { e.err = f() })
	return e.err
}
