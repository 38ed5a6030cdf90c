// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/credential"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runnamespace"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/waitfor"
)

// dryRunID is the run id of a dry run's pod and namespace, which are never created.
const dryRunID = "dry-run"

// DryRun creates pod, as RenderPod renders it at plan time, server-side
// without keeping it, and for a namespace label l the run's namespace too:
// this catches RBAC, quota, admission and schema errors before apply. Runs
// with the same pod share one dry run (Options.DryRuns). A refusal is a
// *RefusedError.
func (e *Engine) DryRun(ctx context.Context, g Group, l *podspec.Label, pod *corev1.Pod) error {
	rendered, err := podspec.ToYAML(pod)
	if err != nil {
		return err
	}
	nsLabel := namespaceLabel(l)
	var labelName string
	if nsLabel != nil {
		labelName = nsLabel.Name
	}
	key := strings.Join([]string{e.clients.Config.Host, g.Credential, labelName, rendered}, "\x00")
	return e.dryRuns(key, func() error {
		if err := e.dryRun(ctx, g, nsLabel, pod); err != nil {
			return Classify(err, pod.Namespace, e.clients.Config.Host)
		}
		return nil
	})
}

func (e *Engine) dryRun(ctx context.Context, g Group, nsLabel *podspec.Label, pod *corev1.Pod) error {
	pod = pod.DeepCopy()
	pod.Labels[managed.LabelRun] = dryRunID
	opts := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	if _, err := e.clients.Kube.CoreV1().Pods(pod.Namespace).Create(ctx, pod, opts); err != nil || nsLabel == nil {
		return err
	}
	ns, _ := runnamespace.Spec{Label: nsLabel.Name, Group: g.Name, RunID: dryRunID, PodSecurityLevel: g.PodSecurityLevel}.Objects()
	if _, err := e.clients.Kube.CoreV1().Namespaces().Create(ctx, ns, opts); err != nil {
		return fmt.Errorf("creating the namespace of node label %q (a label of type namespace needs a credential that "+
			"may create namespaces, service accounts, roles and role bindings): %w", nsLabel.Name, err)
	}
	return nil
}

// Classify tells why the cluster refused a request of a run in namespace:
// a dry run's, or the run's own at apply.
func Classify(err error, namespace, host string) *RefusedError {
	r := &RefusedError{Namespace: namespace, Host: host, Err: err}
	switch {
	case waitfor.QuotaExceeded(err):
		r.Reason = RefusedQuota
		return r
	case apierrors.IsNotFound(err):
		r.Reason = RefusedNotFound
		return r
	}
	var ce *credential.CheckError
	if errors.As(credential.Classify(err, host), &ce) {
		switch ce.Failure {
		case credential.FailureUnauthorized:
			r.Reason = RefusedUnauthorized
		case credential.FailureTLS:
			r.Reason, r.Cause = RefusedTLS, ce.Err
		case credential.FailureUnreachable:
			r.Reason, r.Cause = RefusedUnreachable, ce.Err
		}
	}
	return r
}
