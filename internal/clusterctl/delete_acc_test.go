// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package clusterctl

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/waitfor"
)

// TestAccDeleteWhenClusterctlFails: when clusterctl's own delete fails (as it
// does when another CRD of the cluster goes away while it lists every kind),
// Delete still removes the providers' namespace, their CRDs, ClusterRoles and
// inventory, and waits until they are gone; the failure is not reported, since
// nothing is left.
func TestAccDeleteWhenClusterctlFails(t *testing.T) {
	cfg, kube := acctest.Clients(t)
	acctest.Exclusive(t, acctest.ClusterAPILock)
	acctest.ClusterAPIImage(t, 1)
	c, err := kubeclient.NewClients(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	certManagerCRDs(ctx, t, c)

	p := Provider{Name: "cluster-api", Type: "CoreProvider", Version: acctest.ClusterAPIVersion,
		Components: acctest.ClusterAPICoreComponents(t), Metadata: acctest.ClusterAPIMetadata(t)}
	providers := []Provider{p}
	t.Cleanup(func() {
		// What a failed assertion below leaves, so the next test starts clean.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := Delete(ctx, c, providers, true); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	if err := Init(ctx, c, InitRequest{Providers: providers, Variables: acctest.ClusterAPIVariables(1), Timeout: 3 * time.Minute}); err != nil {
		t.Fatalf("Init: %v", err)
	}
	if got, err := Installed(ctx, c.Dynamic, providers); err != nil || len(got) != 1 {
		t.Fatalf("Installed after Init = %v, %v; want the core provider", got, err)
	}

	saved := clusterctlDelete
	calls := 0
	clusterctlDelete = func(context.Context, *rest.Config, []Provider, bool) error {
		calls++
		return errors.New(`failed to list objects for the "example.com/v1, Kind=Gone" GroupVersionKind: the server could not find the requested resource`)
	}
	t.Cleanup(func() { clusterctlDelete = saved })

	start := time.Now()
	if err := Delete(ctx, c, providers, true); err != nil {
		t.Fatalf("Delete after clusterctl's delete failed: %v", err)
	}
	t.Logf("Delete swept the provider in %s", time.Since(start).Round(time.Millisecond))
	if calls != 1 {
		t.Errorf("clusterctl's delete ran %d times, want 1", calls)
	}

	if _, err := kube.CoreV1().Namespaces().Get(ctx, acctest.ClusterAPINamespace, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s after Delete: err=%v, want not found", acctest.ClusterAPINamespace, err)
	}
	crds, err := c.Dynamic.Resource(crdResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range crds.Items {
		if strings.HasSuffix(crd.GetName(), ".cluster.x-k8s.io") {
			t.Errorf("CRD %s is left after Delete", crd.GetName())
		}
	}
	roles, err := kube.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{LabelSelector: acctest.ClusterAPIProviderLabel + "=cluster-api"})
	if err != nil || len(roles.Items) != 0 {
		t.Errorf("ClusterRoles of the provider after Delete: %v (%d)", err, len(roles.Items))
	}
	if got, err := Installed(ctx, c.Dynamic, providers); err != nil || len(got) != 0 {
		t.Errorf("Installed after Delete = %v, %v; want none", got, err)
	}
}

// certManagerCRDs creates acctest.CertManagerAPI's CRDs, waits until the API
// server serves them, and deletes them when t ends.
func certManagerCRDs(ctx context.Context, t *testing.T, c *kubeclient.Clients) {
	t.Helper()
	crds := c.Dynamic.Resource(crdResource)
	for _, doc := range strings.Split(acctest.CertManagerAPI(), "---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		name := u.GetName()
		if _, err := crds.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating CRD %s: %v", name, err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := waitfor.DeleteObject(ctx, crds, name, metav1.DeleteOptions{}); err != nil {
				t.Errorf("deleting CRD %s: %v", name, err)
			}
		})
		_, err := waitfor.Until(ctx, waitfor.Named(crds, name), &unstructured.Unstructured{}, func(e watch.Event) (bool, error) {
			u, ok := e.Object.(*unstructured.Unstructured)
			if !ok {
				return false, nil
			}
			var crd apiextensionsv1.CustomResourceDefinition
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &crd); err != nil {
				return false, err
			}
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("CRD %s not established: %v", name, err)
		}
	}
}
