package acctest

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// ReplacingKube wraps a clientset so that Replace runs just before each
// Delete of a ConfigMap or Secret: a test replaces the object there, between
// the caller's read and its delete, to prove the delete's UID precondition.
type ReplacingKube struct {
	kubernetes.Interface
	Replace func(ctx context.Context, namespace, name string)
}

func (k ReplacingKube) CoreV1() corev1client.CoreV1Interface {
	return replacingCore{k.Interface.CoreV1(), k.Replace}
}

type replacingCore struct {
	corev1client.CoreV1Interface
	replace func(ctx context.Context, ns, name string)
}

func (c replacingCore) ConfigMaps(ns string) corev1client.ConfigMapInterface {
	return replacingConfigMaps{c.CoreV1Interface.ConfigMaps(ns), ns, c.replace}
}

func (c replacingCore) Secrets(ns string) corev1client.SecretInterface {
	return replacingSecrets{c.CoreV1Interface.Secrets(ns), ns, c.replace}
}

type replacingConfigMaps struct {
	corev1client.ConfigMapInterface
	ns      string
	replace func(ctx context.Context, ns, name string)
}

func (c replacingConfigMaps) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	c.replace(ctx, c.ns, name)
	return c.ConfigMapInterface.Delete(ctx, name, opts)
}

type replacingSecrets struct {
	corev1client.SecretInterface
	ns      string
	replace func(ctx context.Context, ns, name string)
}

func (s replacingSecrets) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	s.replace(ctx, s.ns, name)
	return s.SecretInterface.Delete(ctx, name, opts)
}
