// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

// Package clusterctl runs airshipctl's Clusterctl executor through the
// clusterctl library: init of a cluster with Cluster API providers whose
// component manifests the caller supplies, delete of those providers, and
// move of Cluster API objects from one cluster to another.
//
// Nothing is fetched from the internet: each provider's components and
// metadata come from memory, cert-manager is the caller's to install
// (clusterctl is told it is provisioned externally), and clusterctl's local
// overrides folder is pointed at an empty directory.
package clusterctl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/cluster"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/config"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/repository"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/inflight"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/phase"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/waitfor"
)

// Types are the provider types clusterctl knows, in the order init installs them.
var Types = []string{
	string(clusterctlv1.CoreProviderType),
	string(clusterctlv1.BootstrapProviderType),
	string(clusterctlv1.ControlPlaneProviderType),
	string(clusterctlv1.InfrastructureProviderType),
	string(clusterctlv1.IPAMProviderType),
	string(clusterctlv1.RuntimeExtensionProviderType),
	string(clusterctlv1.AddonProviderType),
}

// Provider is one Cluster API provider release: clusterctl's repository
// holds its components and metadata for the one version.
type Provider struct {
	Name       string // e.g. cluster-api, kubeadm, docker
	Type       string // one of Types
	Version    string // vX.Y.Z
	Components string // the release's components YAML, ${VAR} placeholders allowed
	Metadata   string // the release's metadata.yaml
}

// key names the provider as clusterctl's inventory does.
func (p Provider) key() string { return providerKey(p.Type, p.Name) }

// providerKey is a provider's key: its type and name.
func providerKey(typ, name string) string { return typ + "/" + name }

// Validate checks what clusterctl would refuse at apply: the version, the
// components' documents and the metadata's release series for the version.
func (p Provider) Validate() error {
	if !slices.Contains(Types, p.Type) {
		return fmt.Errorf("type %q is not one of %s", p.Type, strings.Join(Types, ", "))
	}
	v, err := version.ParseSemantic(p.Version)
	if err != nil || !strings.HasPrefix(p.Version, "v") {
		return fmt.Errorf("version %q is not a release version such as v1.14.2", p.Version)
	}
	objs, err := phase.Parse([]string{p.Components})
	if err != nil {
		return fmt.Errorf("components: %w", err)
	}
	if len(objs) == 0 {
		return errors.New("components hold no Kubernetes object")
	}
	var md clusterctlv1.Metadata
	if err := yaml.UnmarshalStrict([]byte(p.Metadata), &md); err != nil {
		return fmt.Errorf("metadata is not a clusterctl Metadata document: %w", err)
	}
	if md.Kind != "Metadata" || md.APIVersion != clusterctlv1.GroupVersion.String() {
		return fmt.Errorf("metadata has apiVersion %q and kind %q; want %s Metadata, as in a release's metadata.yaml",
			md.APIVersion, md.Kind, clusterctlv1.GroupVersion)
	}
	if md.GetReleaseSeriesForVersion(v) == nil {
		return fmt.Errorf("metadata has no releaseSeries entry for %d.%d, the series of version %s", v.Major(), v.Minor(), p.Version)
	}
	return nil
}

// InitRequest is one init: the providers to install and the values of the
// components' ${VAR} placeholders.
type InitRequest struct {
	Providers []Provider
	Variables map[string]string
	// Timeout bounds the wait for the providers' deployments to be available.
	Timeout time.Duration
}

// ErrNoCertManager: the cluster lacks the cert-manager API clusterctl requires.
var ErrNoCertManager = errors.New("the cluster has no cert-manager API (cert-manager.io/v1 Issuer and Certificate)")

// clusterctl keeps its logger in a package variable; one operation at a time
// keeps each operation's log lines with its own context.
var (
	mu          sync.Mutex
	ctrlLogOnce sync.Once
)

// inFlight counts the operations of this process inside run, so that a
// provider whose Terraform died can let them end (and remove their
// directory) before it exits.
var inFlight = &inflight.Gate{}

// Idle returns a channel that is closed once no clusterctl operation of
// this process is running (at once when none is).
func Idle() <-chan struct{} { return inFlight.Idle() }

// ErrCannotStart: a pod of the providers' controllers waits for something
// waiting longer cannot fix, such as an image no node has.
var ErrCannotStart = errors.New("a provider's controller cannot start")

// Init installs the providers into the cluster cfg reaches and waits until
// their controllers are available. It ends as soon as a controller's pod
// cannot start (ErrCannotStart) rather than at the timeout.
func Init(ctx context.Context, c *kubeclient.Clients, req InitRequest) error {
	if err := certManagerAPI(c.Kube.Discovery()); err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	for _, ns := range deploymentNamespaces(req.Providers) {
		go func() {
			if msg, ok := startFailure(ctx, c.Kube, ns); ok {
				cancel(fmt.Errorf("%w: %s", ErrCannotStart, msg))
			}
		}()
	}
	err := install(ctx, c.Config, req)
	if cause := context.Cause(ctx); err != nil && errors.Is(cause, ErrCannotStart) {
		return cause
	}
	return err
}

// deploymentNamespaces are the namespaces of the providers' Deployments,
// the controllers clusterctl waits for.
func deploymentNamespaces(providers []Provider) []string {
	var out []string
	for _, p := range providers {
		objs, _ := phase.Parse([]string{p.Components})
		for _, o := range objs {
			ns := o.U.GetNamespace()
			if o.U.GetKind() == "Deployment" && ns != "" && !strings.Contains(ns, "$") && !slices.Contains(out, ns) {
				out = append(out, ns)
			}
		}
	}
	return out
}

// startFailure watches the pods of ns until one cannot start, and
// describes it; false when ctx ends first.
func startFailure(ctx context.Context, kube kubernetes.Interface, ns string) (string, bool) {
	var msg string
	_, err := waitfor.Lists(ctx, kube.CoreV1().Pods(ns), metav1.ListOptions{}, func(l *corev1.PodList) (bool, error) {
		for i := range l.Items {
			if m, ok := waitfor.StartFailure(&l.Items[i]); ok {
				msg = m
				return true, nil
			}
		}
		return false, nil
	})
	return msg, err == nil && msg != ""
}

// install runs clusterctl's init of req's providers.
func install(ctx context.Context, cfg *rest.Config, req InitRequest) error {
	return run(ctx, req.Providers, req.Variables, req.Timeout, func(c client.Client, kube func(*rest.Config) (client.Kubeconfig, error)) error {
		kc, err := kube(cfg)
		if err != nil {
			return err
		}
		g := groupByType(req.Providers, func(p Provider) string { return p.Name + ":" + p.Version })
		opts := client.InitOptions{Kubeconfig: kc, WaitProviders: true, WaitProviderTimeout: req.Timeout,
			CoreProvider: g.core, BootstrapProviders: g.bootstrap, ControlPlaneProviders: g.controlPlane,
			InfrastructureProviders: g.infrastructure, IPAMProviders: g.ipam,
			RuntimeExtensionProviders: g.runtimeExtension, AddonProviders: g.addon}
		// On a first init clusterctl adds the kubeadm bootstrap and control
		// plane providers unless told "-": install only what was listed.
		if len(opts.BootstrapProviders) == 0 {
			opts.BootstrapProviders = []string{client.NoopProvider}
		}
		if len(opts.ControlPlaneProviders) == 0 {
			opts.ControlPlaneProviders = []string{client.NoopProvider}
		}
		_, err = c.Init(ctx, opts)
		return err
	})
}

// byType holds providers as clusterctl's Init and Delete options list them.
type byType struct {
	core                                                                   string
	bootstrap, controlPlane, infrastructure, ipam, runtimeExtension, addon []string
}

// groupByType sorts providers by type, each named by ref (Validate has
// checked the types).
func groupByType(providers []Provider, ref func(Provider) string) byType {
	var g byType
	for _, p := range providers {
		r := ref(p)
		switch clusterctlv1.ProviderType(p.Type) {
		case clusterctlv1.CoreProviderType:
			g.core = r
		case clusterctlv1.BootstrapProviderType:
			g.bootstrap = append(g.bootstrap, r)
		case clusterctlv1.ControlPlaneProviderType:
			g.controlPlane = append(g.controlPlane, r)
		case clusterctlv1.InfrastructureProviderType:
			g.infrastructure = append(g.infrastructure, r)
		case clusterctlv1.IPAMProviderType:
			g.ipam = append(g.ipam, r)
		case clusterctlv1.RuntimeExtensionProviderType:
			g.runtimeExtension = append(g.runtimeExtension, r)
		case clusterctlv1.AddonProviderType:
			g.addon = append(g.addon, r)
		}
	}
	return g
}

// Delete removes the providers of an init that are still installed, with
// their namespaces; with crds, also their CRDs and so every object of those
// kinds. It then deletes what clusterctl leaves of them (cluster-wide RBAC
// whose names lack the namespace prefix clusterctl looks for; all of an
// install that failed before its inventory entry), clusterctl's inventory
// CRD once it lists no provider, and waits until those are gone.
//
// clusterctl's delete lists every kind the cluster serves, and fails when a
// CRD of someone else's goes away meanwhile: the sweep of the providers'
// labelled objects then does its work (their namespaces hold the rest, and
// the inventory entries), and Delete fails only if it cannot.
func Delete(ctx context.Context, c *kubeclient.Clients, providers []Provider, crds bool) error {
	cfg, dyn := c.Config, c.Dynamic
	installed, err := Installed(ctx, dyn, providers)
	if err != nil {
		return err
	}
	var clusterctlErr error
	if len(installed) > 0 {
		clusterctlErr = clusterctlDelete(ctx, cfg, installed, crds)
		if clusterctlErr != nil {
			tflog.Warn(ctx, "clusterctl delete failed; deleting the providers' labelled objects instead", map[string]any{"error": clusterctlErr.Error()})
		}
	}
	for _, p := range providers {
		if err := sweep(ctx, dyn, p, crds); err != nil {
			return errors.Join(clusterctlErr, err)
		}
	}
	if clusterctlErr != nil {
		left, err := Installed(ctx, dyn, providers)
		if err != nil || len(left) > 0 {
			return errors.Join(clusterctlErr, err)
		}
	}
	return dropInventory(ctx, dyn)
}

// clusterctlDelete runs clusterctl's delete of the installed providers; a
// variable, so that a test can make it fail as a race of discovery does.
var clusterctlDelete = func(ctx context.Context, cfg *rest.Config, installed []Provider, crds bool) error {
	return run(ctx, nil, nil, 0, func(c client.Client, kubeconfig func(*rest.Config) (client.Kubeconfig, error)) error {
		kc, err := kubeconfig(cfg)
		if err != nil {
			return err
		}
		g := groupByType(installed, func(p Provider) string { return p.Name })
		opts := client.DeleteOptions{Kubeconfig: kc, IncludeNamespace: true, IncludeCRDs: crds,
			CoreProvider: g.core, BootstrapProviders: g.bootstrap, ControlPlaneProviders: g.controlPlane,
			InfrastructureProviders: g.infrastructure, IPAMProviders: g.ipam,
			RuntimeExtensionProviders: g.runtimeExtension, AddonProviders: g.addon}
		return c.Delete(ctx, opts)
	})
}

var (
	crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	// sweptResources are the cluster-wide kinds a provider's components hold.
	sweptResources = []schema.GroupVersionResource{
		{Version: "v1", Resource: "namespaces"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"},
	}
)

// sweep deletes the cluster-wide objects clusterctl installed for p (it
// labels each with clusterctl's label and the provider's), its CRDs only
// with crds, and waits until they are gone: a namespace still terminating
// would refuse the next init.
func sweep(ctx context.Context, dyn dynamic.Interface, p Provider, crds bool) error {
	sel := fmt.Sprintf("%s,%s=%s", clusterctlv1.ClusterctlLabel, clusterv1.ProviderNameLabel,
		clusterctlv1.ManifestLabel(p.Name, clusterctlv1.ProviderType(p.Type)))
	resources := sweptResources
	if crds {
		resources = append(slices.Clone(resources), crdResource)
	}
	for _, r := range resources {
		list, err := dyn.Resource(r).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return fmt.Errorf("listing the %s of the %s %q: %w", r.Resource, p.Type, p.Name, err)
		}
		for _, it := range list.Items {
			// As clusterctl delete --include-crd, never take objects with a
			// CRD; one already deleting (clusterctl's own delete) is waited for.
			if r == crdResource && it.GetDeletionTimestamp() == nil && inUse(ctx, dyn, &it) {
				continue
			}
			if err := waitfor.DeleteObject(ctx, dyn.Resource(r), it.GetName(), metav1.DeleteOptions{}); err != nil {
				return fmt.Errorf("deleting %s %s: %w", r.Resource, it.GetName(), err)
			}
		}
	}
	return nil
}

// inUse reports whether objects of the CRD crd exist, or cannot be listed.
func inUse(ctx context.Context, dyn dynamic.Interface, crd *unstructured.Unstructured) bool {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	// Any served version lists every object; the storage version draws no
	// deprecation warning.
	version := ""
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if served, _ := m["served"].(bool); !served {
			continue
		}
		if storage, _ := m["storage"].(bool); storage || version == "" {
			version, _ = m["name"].(string)
		}
	}
	if version == "" {
		return false
	}
	list, err := dyn.Resource(schema.GroupVersionResource{Group: group, Version: version, Resource: plural}).List(ctx, metav1.ListOptions{Limit: 1})
	if apierrors.IsNotFound(err) {
		// No longer served: its CRD is on its way out.
		return false
	}
	return err != nil || len(list.Items) > 0
}

// dropInventory deletes clusterctl's inventory CRD once it lists no
// provider, and waits until it is gone: what init made, destroy (or a
// failed init's cleanup) removes.
func dropInventory(ctx context.Context, dyn dynamic.Interface) error {
	list, err := dyn.Resource(inventoryResource).List(ctx, metav1.ListOptions{Limit: 1})
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil
	}
	if err != nil || len(list.Items) > 0 {
		return err
	}
	return waitfor.DeleteObject(ctx, dyn.Resource(crdResource), inventoryResource.GroupResource().String(), metav1.DeleteOptions{})
}

// Move moves the Cluster API objects of namespace from the cluster from
// reaches to the cluster to reaches, as `clusterctl move` does: both must run
// the same providers.
func Move(ctx context.Context, from, to *kubeclient.Clients, namespace string) error {
	return run(ctx, nil, nil, 0, func(c client.Client, kube func(*rest.Config) (client.Kubeconfig, error)) error {
		fk, err := kube(from.Config)
		if err != nil {
			return err
		}
		tk, err := kube(to.Config)
		if err != nil {
			return err
		}
		return c.Move(ctx, client.MoveOptions{FromKubeconfig: fk, ToKubeconfig: tk, Namespace: namespace})
	})
}

var inventoryResource = clusterctlv1.GroupVersion.WithResource("providers")

// Installed returns those of providers that the cluster's clusterctl
// inventory lists (any version): none when the inventory does not exist.
func Installed(ctx context.Context, dyn dynamic.Interface, providers []Provider) ([]Provider, error) {
	list, err := dyn.Resource(inventoryResource).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing the clusterctl inventory (%s): %w", inventoryResource.GroupResource(), err)
	}
	have := map[string]bool{}
	for _, it := range list.Items {
		name, _, _ := unstructured.NestedString(it.Object, "providerName")
		typ, _, _ := unstructured.NestedString(it.Object, "type")
		have[providerKey(typ, name)] = true
	}
	var out []Provider
	for _, p := range providers {
		if have[p.key()] {
			out = append(out, p)
		}
	}
	return out, nil
}

// certManagerAPI checks for the API clusterctl's init creates a test Issuer
// and Certificate with; without it clusterctl would wait out its timeout.
func certManagerAPI(dc discovery.DiscoveryInterface) error {
	res, err := dc.ServerResourcesForGroupVersion("cert-manager.io/v1")
	if apierrors.IsNotFound(err) {
		return ErrNoCertManager
	}
	if err != nil {
		return fmt.Errorf("discovering cert-manager.io/v1: %w", err)
	}
	kinds := map[string]bool{}
	for _, r := range res.APIResources {
		kinds[r.Kind] = true
	}
	if !kinds["Issuer"] || !kinds["Certificate"] {
		return ErrNoCertManager
	}
	return nil
}

// run makes a clusterctl client whose repositories hold only providers and
// calls do with it; kube turns a rest.Config into the Kubeconfig value by
// which clusterctl's options name it, held in memory for the call.
func run(ctx context.Context, providers []Provider, vars map[string]string, certTimeout time.Duration,
	do func(client.Client, func(*rest.Config) (client.Kubeconfig, error)) error,
) error {
	inFlight.Enter()
	defer inFlight.Leave()
	mu.Lock()
	defer mu.Unlock()
	defer useLogger(ctx)()
	// clusterctl's clients are controller-runtime's, whose logger is never
	// set otherwise: it would print a stack trace on stderr after 30 s.
	ctrlLogOnce.Do(func() { ctrllog.SetLogger(logr.Discard()) })

	// A private directory that holds nothing (no kubeconfig: see kube
	// below), whose name clusterctl's overrides and repository URLs use.
	dir, err := os.MkdirTemp("", "kubeplay-clusterctl-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	reader := config.NewMemoryReader()
	for k, v := range vars {
		reader.Set(k, v)
	}
	// An empty folder: a machine's ~/.config/cluster-api/overrides must not
	// replace the components Terraform holds.
	reader.Set("overridesFolder", filepath.Join(dir, "overrides"))
	if certTimeout <= 0 {
		certTimeout = time.Minute
	}
	reader.Set("cert-manager", fmt.Sprintf("externallyProvisioned: \"true\"\ntimeout: %s\n", certTimeout))
	repos := map[string]*repository.MemoryRepository{}
	for _, p := range providers {
		url := fmt.Sprintf("file://%s/%s/%s/components.yaml", dir, clusterctlv1.ManifestLabel(p.Name, clusterctlv1.ProviderType(p.Type)), p.Version)
		if _, err := reader.AddProvider(p.Name, clusterctlv1.ProviderType(p.Type), url); err != nil {
			return err
		}
		repos[p.key()] = repository.NewMemoryRepository().
			WithPaths("", "components.yaml").
			WithDefaultVersion(p.Version).
			WithFile(p.Version, "components.yaml", []byte(p.Components)).
			WithFile(p.Version, "metadata.yaml", []byte(p.Metadata))
	}
	cfgClient, err := config.New(ctx, "", config.InjectReader(reader))
	if err != nil {
		return err
	}
	// Both clusterctl's client and its cluster client read repositories
	// (components; metadata to check contracts): both get these only.
	repoFor := func(ctx context.Context, p config.Provider, cc config.Client, opts ...repository.Option) (repository.Client, error) {
		r, ok := repos[providerKey(string(p.Type()), p.Name())]
		if !ok {
			// Reached when clusterctl wants a provider nobody supplied, such
			// as a default one or one another init installed: never the internet.
			return nil, fmt.Errorf("no components supplied for the %s %q: list every provider of the cluster in this init", p.Type(), p.Name())
		}
		return repository.New(ctx, p, cc, append(opts, repository.InjectRepository(r))...)
	}
	// The operation's connections, by the context name clusterctl's
	// Kubeconfig carries: clusterctl never gets a kubeconfig file, so no
	// token reaches the disk (see memoryProxy).
	conns := map[string]*rest.Config{}
	kube := func(cfg *rest.Config) (client.Kubeconfig, error) {
		if cfg.Host == "" {
			return client.Kubeconfig{}, errors.New("the connection has no server address")
		}
		name := fmt.Sprintf("%s%d", memoryContext, len(conns)+1)
		conns[name] = rest.CopyConfig(cfg)
		return client.Kubeconfig{Context: name}, nil
	}
	c, err := client.New(ctx, "", client.InjectConfig(cfgClient),
		client.InjectRepositoryFactory(func(ctx context.Context, in client.RepositoryClientFactoryInput) (repository.Client, error) {
			return repoFor(ctx, in.Provider, cfgClient, repository.InjectYamlProcessor(in.Processor))
		}),
		client.InjectClusterClientFactory(func(in client.ClusterClientFactoryInput) (cluster.Client, error) {
			cfg, ok := conns[in.Kubeconfig.Context]
			if !ok || in.Kubeconfig.Path != "" {
				// Never clusterctl's default kubeconfig: only what kubeplay gave.
				return nil, fmt.Errorf("clusterctl asked for a cluster kubeplay did not give it (%+v)", in.Kubeconfig)
			}
			return cluster.New(cluster.Kubeconfig(in.Kubeconfig), cfgClient,
				cluster.InjectProxy(&memoryProxy{context: in.Kubeconfig.Context, cfg: cfg}),
				cluster.InjectYamlProcessor(in.Processor), cluster.InjectRepositoryFactory(repoFor)), nil
		}))
	if err != nil {
		return err
	}
	return do(c, kube)
}
