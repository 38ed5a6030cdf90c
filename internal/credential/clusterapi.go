// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package credential

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
)

// DefaultKubeconfigTimeout is how long a cluster_api credential waits for its
// cluster's kubeconfig Secret while Cluster API provisions the cluster.
const DefaultKubeconfigTimeout = 10 * time.Minute

// clusterAPIKey is the data key Cluster API stores the kubeconfig under.
const clusterAPIKey = "value"

// ClusterNamespaceOrDefault is the namespace of the Cluster API cluster.
func (s Spec) ClusterNamespaceOrDefault() string {
	if s.ClusterNamespace == "" {
		return "default"
	}
	return s.ClusterNamespace
}

// KubeconfigWait is how long to wait for the kubeconfig Secret.
func (s Spec) KubeconfigWait() time.Duration {
	if d, err := time.ParseDuration(s.KubeconfigTimeout); err == nil {
		return d
	}
	return DefaultKubeconfigTimeout
}

// ClusterAPIKubeconfig reads the kubeconfig of a cluster_api credential from
// its parent cluster, watching for the Secret until it has the key or the
// credential's timeout ends. Errors name the Secret and namespace it looked
// for, the mismatch airshipctl users hit.
func ClusterAPIKubeconfig(ctx context.Context, parent kubernetes.Interface, s Spec) ([]byte, error) {
	ns, name, wait := s.ClusterNamespaceOrDefault(), s.KubeconfigSecretName(), s.KubeconfigWait()
	secrets := parent.CoreV1().Secrets(ns)
	notFound := func(why string) error {
		return fmt.Errorf("credential %q: %s: Secret %s/%s with key %q %s in the parent cluster (credential %q). Check "+
			"cluster_name and cluster_namespace: Cluster API writes <cluster name>-kubeconfig in the Cluster's namespace",
			s.Name, why, ns, name, clusterAPIKey, "not found", s.Parent)
	}
	// No wait (0s) is one read: a deadline already past would fail it.
	cancel := context.CancelFunc(func() {})
	if wait > 0 {
		ctx, cancel = context.WithTimeout(ctx, wait)
	}
	defer cancel()
	for {
		sec, err := secrets.Get(ctx, name, metav1.GetOptions{})
		switch {
		case err == nil && len(sec.Data[clusterAPIKey]) > 0:
			return sec.Data[clusterAPIKey], nil
		case err != nil && !apierrors.IsNotFound(err):
			if ctx.Err() != nil {
				return nil, notFound(fmt.Sprintf("waited %s", wait))
			}
			return nil, fmt.Errorf("credential %q: reading Secret %s/%s in the parent cluster: %w", s.Name, ns, name, err)
		}
		rv := ""
		if err == nil {
			rv = sec.ResourceVersion
		} else if l, lerr := secrets.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name}); lerr == nil {
			if len(l.Items) > 0 {
				continue
			}
			rv = l.ResourceVersion
		}
		if wait <= 0 {
			return nil, notFound("not provisioned")
		}
		w, err := secrets.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: rv})
		if err != nil {
			if ctx.Err() != nil {
				return nil, notFound(fmt.Sprintf("waited %s", wait))
			}
			return nil, fmt.Errorf("credential %q: watching Secret %s/%s: %w", s.Name, ns, name, err)
		}
		got, err := awaitKey(ctx, w)
		w.Stop()
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, notFound(fmt.Sprintf("waited %s", wait))
		}
		if got != nil {
			return got, nil
		}
	}
}

// awaitKey returns the kubeconfig once a watched Secret has it; nil, nil
// when the watch ends and the caller should read again.
func awaitKey(ctx context.Context, w watch.Interface) ([]byte, error) {
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil, nil
			}
			if sec, isSecret := ev.Object.(*corev1.Secret); isSecret && ev.Type != watch.Deleted && len(sec.Data[clusterAPIKey]) > 0 {
				return sec.Data[clusterAPIKey], nil
			}
		}
	}
}

// ClusterAPIRESTConfig builds the client configuration of a cluster_api
// credential from the kubeconfig read from its parent. That kubeconfig is
// cluster data, writable by whoever may write Secrets in the Cluster's
// namespace, so it may not run programs or read files on this host.
func ClusterAPIRESTConfig(s Spec, kubeconfig []byte) (*rest.Config, error) {
	where := fmt.Sprintf("credential %q: the kubeconfig in Secret %s/%s on the parent cluster", s.Name, s.ClusterNamespaceOrDefault(), s.KubeconfigSecretName())
	raw, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("%s does not parse: %w", where, err)
	}
	if err := kubeclient.CheckUntrusted(raw, false); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*raw, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if reach := kubeclient.HostReach(cfg); reach != "" {
		return nil, fmt.Errorf("%s: %w (%s)", where, kubeclient.ErrHostAccess, reach)
	}
	return cfg, nil
}
