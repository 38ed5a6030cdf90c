package credential

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/waitfor"
)

// Account names the objects a service_account credential provisions.
type Account struct {
	Namespace string
	Name      string
	// Credential is the owning credential's name, recorded in labels.
	Credential string
}

// RoleName is the pod-manager Role and its RoleBinding.
func (a Account) RoleName() string { return a.Name + "-pod-manager" }

// TokenSecretName is the long-lived token Secret bound to the account.
func (a Account) TokenSecretName() string { return a.Name + "-token" }

func (a Account) labels() map[string]string {
	return map[string]string{managed.LabelManagedBy: managed.ManagedByValue, managed.LabelCredential: a.Credential}
}

// Provisioned is what Provision returns: the token and the cluster CA that
// the token controller put into the token Secret.
type Provisioned struct {
	Token  string
	CACert string
}

// Provision applies the ServiceAccount, seed 001's pod-manager Role (plus
// pods/log get), the RoleBinding and a kubernetes.io/service-account-token
// Secret, then waits with a watch until the token controller has filled the
// token in. The token lives as long as the Secret: deleting the Secret or the
// account revokes it.
func Provision(ctx context.Context, kube kubernetes.Interface, a Account) (Provisioned, error) {
	if _, err := kube.CoreV1().Namespaces().Get(ctx, a.Namespace, metav1.GetOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return Provisioned{}, fmt.Errorf("namespace %q does not exist; create it first (for example with a kubeplay_container_group that manages it)", a.Namespace)
		}
		return Provisioned{}, err
	}
	apply := metav1.ApplyOptions{FieldManager: managed.FieldManager, Force: true}
	if _, err := kube.CoreV1().ServiceAccounts(a.Namespace).Apply(ctx,
		corev1ac.ServiceAccount(a.Name, a.Namespace).WithLabels(a.labels()), apply); err != nil {
		return Provisioned{}, fmt.Errorf("applying ServiceAccount %s/%s: %w", a.Namespace, a.Name, err)
	}
	rules := []*rbacv1ac.PolicyRuleApplyConfiguration{
		rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("pods").
			WithVerbs("get", "list", "watch", "create", "update", "patch", "delete"),
		rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("pods/exec").WithVerbs("create"),
		rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("pods/log").WithVerbs("get"),
	}
	if _, err := kube.RbacV1().Roles(a.Namespace).Apply(ctx,
		rbacv1ac.Role(a.RoleName(), a.Namespace).WithLabels(a.labels()).WithRules(rules...), apply); err != nil {
		return Provisioned{}, fmt.Errorf("applying Role %s/%s: %w", a.Namespace, a.RoleName(), err)
	}
	if _, err := kube.RbacV1().RoleBindings(a.Namespace).Apply(ctx,
		rbacv1ac.RoleBinding(a.RoleName(), a.Namespace).WithLabels(a.labels()).
			WithSubjects(rbacv1ac.Subject().WithKind("ServiceAccount").WithName(a.Name).WithNamespace(a.Namespace)).
			WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup("rbac.authorization.k8s.io").WithKind("Role").WithName(a.RoleName())),
		apply); err != nil {
		return Provisioned{}, fmt.Errorf("applying RoleBinding %s/%s: %w", a.Namespace, a.RoleName(), err)
	}
	if _, err := kube.CoreV1().Secrets(a.Namespace).Apply(ctx,
		corev1ac.Secret(a.TokenSecretName(), a.Namespace).WithLabels(a.labels()).
			WithAnnotations(map[string]string{corev1.ServiceAccountNameKey: a.Name}).
			WithType(corev1.SecretTypeServiceAccountToken), apply); err != nil {
		return Provisioned{}, fmt.Errorf("applying token Secret %s/%s: %w", a.Namespace, a.TokenSecretName(), err)
	}
	sec, err := waitForToken(ctx, kube, a)
	if err != nil {
		return Provisioned{}, err
	}
	return Provisioned{Token: string(sec.Data[corev1.ServiceAccountTokenKey]), CACert: string(sec.Data[corev1.ServiceAccountRootCAKey])}, nil
}

func waitForToken(ctx context.Context, kube kubernetes.Interface, a Account) (*corev1.Secret, error) {
	lw := waitfor.Named(kube.CoreV1().Secrets(a.Namespace), a.TokenSecretName())
	ev, err := waitfor.Until(ctx, lw, &corev1.Secret{}, func(ev watch.Event) (bool, error) {
		if ev.Type == watch.Deleted {
			return false, fmt.Errorf("token Secret %s/%s was deleted while waiting for its token", a.Namespace, a.TokenSecretName())
		}
		s, ok := ev.Object.(*corev1.Secret)
		return ok && len(s.Data[corev1.ServiceAccountTokenKey]) > 0, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for the token controller to fill Secret %s/%s (is kube-controller-manager running?): %w",
			a.Namespace, a.TokenSecretName(), err)
	}
	sec, ok := ev.Object.(*corev1.Secret)
	if !ok {
		return nil, fmt.Errorf("watching Secret %s/%s: unexpected %T", a.Namespace, a.TokenSecretName(), ev.Object)
	}
	return sec, nil
}

// Exists reports whether the account's token Secret still exists and holds a
// token.
func Exists(ctx context.Context, kube kubernetes.Interface, a Account) (bool, error) {
	s, err := kube.CoreV1().Secrets(a.Namespace).Get(ctx, a.TokenSecretName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if _, err := kube.CoreV1().ServiceAccounts(a.Namespace).Get(ctx, a.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return false, nil
	}
	return len(s.Data[corev1.ServiceAccountTokenKey]) > 0, nil
}

// Deprovision deletes what Provision created; missing objects are fine.
func Deprovision(ctx context.Context, kube kubernetes.Interface, a Account) error {
	del := func(kind, name string, f func() error) error {
		if err := f(); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s %s/%s: %w", kind, a.Namespace, name, err)
		}
		return nil
	}
	opts := metav1.DeleteOptions{}
	for _, step := range []struct {
		kind, name string
		f          func() error
	}{
		{"RoleBinding", a.RoleName(), func() error { return kube.RbacV1().RoleBindings(a.Namespace).Delete(ctx, a.RoleName(), opts) }},
		{"Role", a.RoleName(), func() error { return kube.RbacV1().Roles(a.Namespace).Delete(ctx, a.RoleName(), opts) }},
		{"Secret", a.TokenSecretName(), func() error {
			return kube.CoreV1().Secrets(a.Namespace).Delete(ctx, a.TokenSecretName(), opts)
		}},
		{"ServiceAccount", a.Name, func() error { return kube.CoreV1().ServiceAccounts(a.Namespace).Delete(ctx, a.Name, opts) }},
	} {
		if err := del(step.kind, step.name, step.f); err != nil {
			return err
		}
	}
	return nil
}

// Kubeconfig renders a kubeconfig for a token, for systems outside Terraform.
func Kubeconfig(clusterName, host, caCert, user, token, namespace string) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[clusterName] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: []byte(caCert)}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[clusterName] = &clientcmdapi.Context{Cluster: clusterName, AuthInfo: user, Namespace: namespace}
	cfg.CurrentContext = clusterName
	return clientcmd.Write(*cfg)
}
