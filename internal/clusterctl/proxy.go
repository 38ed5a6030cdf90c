// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package clusterctl

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	admissionregistrationv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1" //nolint:staticcheck // clusterctl's own scheme still registers it
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/cluster"
	capiversion "sigs.k8s.io/cluster-api/version"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
)

// memoryProxy is clusterctl's cluster.Proxy for a connection kubeplay
// holds in memory. clusterctl's own proxy reads a kubeconfig file, which
// would put the credential's token on disk for as long as the operation
// runs, and after it when the process is killed; this one hands clusterctl
// a copy of the rest.Config. It behaves as clusterctl's proxy (v1.14) does
// for a kubeconfig whose context sets no namespace.
type memoryProxy struct {
	// context is the name clusterctl knows the connection by.
	context string
	cfg     *rest.Config
}

var _ cluster.Proxy = (*memoryProxy)(nil)

// proxyScheme holds the types clusterctl's own proxy registers (its scheme
// package is internal).
var proxyScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, clusterctlv1.AddToScheme, clusterv1beta1.AddToScheme, clusterv1.AddToScheme,
		apiextensionsv1.AddToScheme, apiextensionsv1beta1.AddToScheme, admissionregistrationv1.AddToScheme,
		admissionregistrationv1beta1.AddToScheme, controlplanev1.AddToScheme, addonsv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err) // static registrations: a conflict is a build error
		}
	}
	return s
}()

// proxyTimeout is clusterctl's per-request timeout.
const proxyTimeout = 30 * time.Second

// Backoffs of clusterctl's proxy: ~15 s to connect and read, ~5 s to check.
var (
	connectBackoff      = wait.Backoff{Duration: 250 * time.Millisecond, Factor: 1.5, Steps: 9, Jitter: 0.1}
	shortConnectBackoff = wait.Backoff{Duration: 250 * time.Millisecond, Factor: 1.5, Steps: 7, Jitter: 0.1}
	readBackoff         = connectBackoff
)

func (p *memoryProxy) GetConfig() (*rest.Config, error) {
	c := rest.CopyConfig(p.cfg)
	if c.Timeout == 0 {
		c.Timeout = proxyTimeout
	}
	// As clusterctl: enumerating many CRDs must not be throttled.
	c.QPS, c.Burst = 500, 1000
	return c, nil
}

func (p *memoryProxy) CurrentNamespace() (string, error) { return metav1.NamespaceDefault, nil }

func (p *memoryProxy) ValidateKubernetesVersion() error {
	minVer := capiversion.MinimumKubernetesVersion
	if topology, _ := strconv.ParseBool(os.Getenv("CLUSTER_TOPOLOGY")); topology {
		minVer = capiversion.MinimumKubernetesVersionClusterTopology
	}
	cfg, _ := p.GetConfig()
	return capiversion.CheckKubernetesVersion(cfg, minVer)
}

func (p *memoryProxy) NewClient(ctx context.Context) (crclient.Client, error) {
	return p.newClient(ctx, connectBackoff)
}

func (p *memoryProxy) newClient(ctx context.Context, b wait.Backoff) (crclient.Client, error) {
	cfg, _ := p.GetConfig()
	var c crclient.Client
	err := retry(ctx, b, func(context.Context) error {
		var err error
		c, err = crclient.New(cfg, crclient.Options{Scheme: proxyScheme})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("failed to connect to the management cluster: %w", err)
	}
	return c, nil
}

func (p *memoryProxy) CheckClusterAvailable(ctx context.Context) error {
	_, err := p.newClient(ctx, shortConnectBackoff)
	return err
}

func (p *memoryProxy) GetContexts(prefix string) ([]string, error) {
	if strings.HasPrefix(p.context, prefix) {
		return []string{p.context}, nil
	}
	return nil, nil
}

func (p *memoryProxy) GetResourceNames(ctx context.Context, groupVersion, kind string, options []crclient.ListOption, prefix string) ([]string, error) {
	c, err := p.NewClient(ctx)
	if err != nil {
		return nil, err
	}
	l, err := listByGVK(ctx, c, groupVersion, kind, options)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, it := range l.Items {
		if strings.HasPrefix(it.GetName(), prefix) {
			out = append(out, it.GetName())
		}
	}
	return out, nil
}

// ListResources is clusterctl's: the objects of a component with labels,
// namespaced ones in namespaces, leaving out objects of the kinds of the
// component's own CRDs (or any provider's), which may no longer be
// listable once their controller is gone.
func (p *memoryProxy) ListResources(ctx context.Context, labels map[string]string, namespaces ...string) ([]unstructured.Unstructured, error) {
	cfg, _ := p.GetConfig()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to create the client-go client: %w", err)
	}
	c, err := p.NewClient(ctx)
	if err != nil {
		return nil, err
	}
	var resources []*metav1.APIResourceList
	if err := retry(ctx, readBackoff, func(context.Context) error {
		resources, err = cs.Discovery().ServerPreferredResources()
		return err
	}); err != nil {
		return nil, fmt.Errorf("failed to list api resources: %w", err)
	}
	exclude := sets.Set[string]{}
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := retry(ctx, readBackoff, func(ctx context.Context) error { return c.List(ctx, crds) }); err != nil {
		return nil, fmt.Errorf("failed to list CRDs: %w", err)
	}
	component, isCore := labels[clusterctlv1.ClusterctlCoreLabel]
	for _, crd := range crds.Items {
		_, isProvider := crd.Labels[clusterv1.ProviderNameLabel]
		if (isCore && component == clusterctlv1.ClusterctlCoreLabelCertManagerValue) || isProvider {
			for _, v := range crd.Spec.Versions {
				exclude.Insert(metav1.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}.String())
			}
		}
	}
	resources = discovery.FilteredBy(discovery.SupportsAllVerbs{Verbs: []string{"list", "delete"}}, resources)
	var out []unstructured.Unstructured
	for _, group := range resources {
		gv, err := schema.ParseGroupVersion(group.GroupVersion)
		if err != nil {
			return nil, fmt.Errorf("failed to parse GroupVersion: %w", err)
		}
		for _, r := range group.APIResources {
			if group.GroupVersion == "extensions/v1beta1" && (r.Name == "daemonsets" || r.Name == "deployments" ||
				r.Name == "replicasets" || r.Name == "networkpolicies" || r.Name == "ingresses") {
				continue // served by apps and networking too
			}
			if exclude.Has(metav1.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: r.Kind}.String()) {
				continue
			}
			scopes := [][]crclient.ListOption{{crclient.MatchingLabels(labels)}}
			if r.Namespaced {
				scopes = scopes[:0]
				for _, ns := range namespaces {
					scopes = append(scopes, []crclient.ListOption{crclient.MatchingLabels(labels), crclient.InNamespace(ns)})
				}
			}
			for _, opts := range scopes {
				l, err := listByGVK(ctx, c, group.GroupVersion, r.Kind, opts)
				if err != nil {
					return nil, err
				}
				out = append(out, l.Items...)
			}
		}
	}
	return out, nil
}

func listByGVK(ctx context.Context, c crclient.Client, groupVersion, kind string, opts []crclient.ListOption) (*unstructured.UnstructuredList, error) {
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion(groupVersion)
	l.SetKind(kind)
	if err := retry(ctx, readBackoff, func(ctx context.Context) error { return c.List(ctx, l, opts...) }); err != nil {
		return nil, fmt.Errorf("failed to list objects for the %q GroupVersionKind: %w", l.GroupVersionKind(), err)
	}
	return l, nil
}

// retry is clusterctl's retryWithExponentialBackoff: op until it succeeds,
// the backoff's steps run out (the last error) or ctx ends.
func retry(ctx context.Context, b wait.Backoff, op func(context.Context) error) error {
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, b, func(ctx context.Context) (bool, error) {
		last = op(ctx)
		return last == nil, nil
	})
	if wait.Interrupted(err) && last != nil {
		return last
	}
	return err
}

// memoryContext prefixes the names by which clusterctl's Kubeconfig values
// refer to the connections an operation holds in memory.
const memoryContext = "kubeplay-"
