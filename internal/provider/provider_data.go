// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/credential"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
)

// providerData is what Configure hands to every resource and data source:
// the provider's connection and the pool that shares clients per cluster.
type providerData struct {
	pool             *kubeclient.Pool
	restConfig       *rest.Config
	configUnknown    bool
	catalogNamespace string
	version          string

	catalogMu    sync.Mutex
	catalogReady bool
}

const providerPoolKey = "provider"

// clients returns the provider's own clients.
func (d *providerData) clients() (*kubeclient.Clients, error) {
	if d.configUnknown {
		return nil, errors.New("the provider configuration depends on values that are known only after apply; " +
			"apply the resources it depends on first (terraform apply -target), or configure it with known values")
	}
	if d.restConfig == nil {
		return nil, errors.New("the provider has no Kubernetes connection")
	}
	return d.pool.Get(providerPoolKey, func() (*rest.Config, error) { return d.restConfig, nil })
}

// ensureCatalog creates the catalog namespace once per provider process.
func (d *providerData) ensureCatalog(ctx context.Context, c *kubeclient.Clients) error {
	d.catalogMu.Lock()
	defer d.catalogMu.Unlock()
	if d.catalogReady {
		return nil
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   d.catalogNamespace,
		Labels: map[string]string{credential.LabelManagedBy: credential.ManagedByValue},
	}}
	_, err := c.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating catalog namespace %q: %w", d.catalogNamespace, err)
	}
	d.catalogReady = true
	return nil
}

// providerDataFrom converts the value Configure stored, reporting a
// misconfigured provider the way the framework's scaffolding does.
func providerDataFrom(v any, diags *diag.Diagnostics) *providerData {
	if v == nil {
		return nil // not configured yet (validation)
	}
	d, ok := v.(*providerData)
	if !ok {
		diags.AddError("Unexpected Provider Data",
			fmt.Sprintf("Expected *providerData, got %T. This is a bug in the provider; please report it.", v))
		return nil
	}
	return d
}
