// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"context"
	"errors"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runnamespace"
)

// namespaceRunID keeps a destroy playbook's namespace apart from the run's.
func namespaceRunID(req Request) string {
	if req.Operation == OperationDestroy {
		return req.ID + "-d"
	}
	return req.ID
}

// createNamespace makes the run's namespace for namespace label l and
// returns its name (also on error, when there is something to delete), a
// kubeconfig for its service account, and the token to redact.
func (e *Engine) createNamespace(ctx context.Context, req Request, l *podspec.Label) (string, []byte, string, error) {
	spec := runnamespace.Spec{
		Label: l.Name, Group: req.Group.Name, RunID: namespaceRunID(req), Labels: l.Labels,
		Annotations: l.Annotations, Deadline: time.Now().Add(req.Timeout), CAData: e.clusterCA(ctx, req.Group.Namespace),
		PodSecurityLevel: req.Group.PodSecurityLevel,
	}
	name := runnamespace.Name(spec.Label, spec.RunID)
	kubeconfig, token, err := runnamespace.Create(ctx, e.clients.Kube, spec)
	if err != nil {
		nerr := &NamespaceError{Label: l.Name, Group: req.Group.Name, Namespace: name, Err: err}
		if errors.Is(err, runnamespace.ErrNotCreated) {
			name = "" // nothing of ours to delete
		}
		return name, nil, "", nerr
	}
	e.log(slog.LevelDebug, "run namespace created", map[string]any{"namespace": name})
	return name, kubeconfig, token, nil
}

// deleteNamespace deletes the run's namespace with a context of its own, so
// that a canceled or timed-out run still removes it, and waits until it is
// gone.
func (e *Engine) deleteNamespace(ctx context.Context, g Group, name string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	start := time.Now()
	if err := runnamespace.Delete(ctx, e.clients.Kube, name, managed.LabelContainerGroup, g.Name); err != nil {
		return &NamespaceError{Deleting: true, Group: g.Name, Namespace: name, Err: err}
	}
	e.log(slog.LevelDebug, "run namespace deleted", map[string]any{"namespace": name, "seconds": time.Since(start).Seconds()})
	return nil
}

// clusterCA is the CA that signs the API server's in-cluster certificate:
// the kube-root-ca.crt every namespace gets, else the credential's own CA.
func (e *Engine) clusterCA(ctx context.Context, namespace string) []byte {
	cm, err := e.clients.Kube.CoreV1().ConfigMaps(namespace).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
	if err == nil && cm.Data["ca.crt"] != "" {
		return []byte(cm.Data["ca.crt"])
	}
	// A fallback only: an unreadable CA file fails the provider's own client first.
	ca, _ := e.caData()
	return ca
}
