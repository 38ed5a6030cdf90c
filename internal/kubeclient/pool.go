package kubeclient

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// Clients are the clients of one cluster, built once and shared by every
// resource that talks to it.
type Clients struct {
	Config  *rest.Config
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface

	mapperOnce sync.Once
	mapper     *restmapper.DeferredDiscoveryRESTMapper
}

// NewClients builds the typed and dynamic clients of one configuration.
func NewClients(cfg *rest.Config) (*Clients, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building Kubernetes client for %s: %w", cfg.Host, err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building dynamic client for %s: %w", cfg.Host, err)
	}
	return &Clients{Config: cfg, Kube: kube, Dynamic: dyn}, nil
}

// Mapper returns a REST mapper backed by cached discovery; call Reset on it
// after installing CustomResourceDefinitions.
func (c *Clients) Mapper() meta.ResettableRESTMapper {
	c.mapperOnce.Do(func() {
		c.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Kube.Discovery()))
	})
	return c.mapper
}

// Pool caches Clients by key for the life of the provider process.
type Pool struct {
	mu      sync.Mutex
	clients map[string]*Clients
}

// NewPool returns an empty pool.
func NewPool() *Pool {
	return &Pool{clients: map[string]*Clients{}}
}

// Get returns the clients cached under key, building them with build on first
// use. A failed build is not cached, so a later call can succeed.
func (p *Pool) Get(key string, build func() (*rest.Config, error)) (*Clients, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.clients[key]; ok {
		return c, nil
	}
	cfg, err := build()
	if err != nil {
		return nil, err
	}
	c, err := NewClients(cfg)
	if err != nil {
		return nil, err
	}
	p.clients[key] = c
	return c, nil
}
