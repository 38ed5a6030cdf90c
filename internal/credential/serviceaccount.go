package credential

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
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
	// Owner is the credential's definition: every object carries its owner
	// id, and only objects with it are changed or deleted, so that a
	// credential of the same name in another catalog does not take them.
	// Adopt lets Provision take over objects of the credential's labels
	// from before owner ids (once: it writes its id).
	Owner managed.Owner
	Adopt bool
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

// Provision creates, or updates when kubeplay made them for this
// credential, the ServiceAccount, the Role granting RunPermissions, its
// RoleBinding and a kubernetes.io/service-account-token Secret, then waits
// with a watch until the token controller has filled the token in. The
// token lives as long as the Secret: deleting the Secret or the account
// revokes it. An object of one of these names that lacks the credential's
// ownership labels is never adopted: Provision fails with a
// *managed.NotOwnedError before it writes anything; one that carries them
// but another definition's owner id (a credential of the same name in
// another catalog) fails with a *managed.OwnedByOtherError.
func Provision(ctx context.Context, kube kubernetes.Interface, a Account) (Provisioned, error) {
	if _, err := kube.CoreV1().Namespaces().Get(ctx, a.Namespace, metav1.GetOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return Provisioned{}, fmt.Errorf("namespace %q does not exist; create it first (for example with a kubeplay_container_group that manages it)", a.Namespace)
		}
		return Provisioned{}, err
	}
	objs := a.objects(kube)
	for _, o := range objs {
		if err := o.check(ctx, a); err != nil {
			return Provisioned{}, err
		}
	}
	for _, o := range objs {
		if err := o.write(ctx, a); err != nil {
			return Provisioned{}, err
		}
	}
	sec, err := waitForToken(ctx, kube, a)
	if err != nil {
		return Provisioned{}, err
	}
	return Provisioned{Token: string(sec.Data[corev1.ServiceAccountTokenKey]), CACert: string(sec.Data[corev1.ServiceAccountRootCAKey])}, nil
}

// accountObject is one object of an account, with what Provision and
// Deprovision do to it.
type accountObject struct {
	kind, name string
	// get reads the object; a NotFound error when it is absent.
	get func(ctx context.Context) (metav1.Object, error)
	// create makes the object; AlreadyExists when the name is taken, so
	// that an object created in between is never adopted.
	create func(ctx context.Context) error
	// apply updates the account's own object.
	apply func(ctx context.Context) error
	// del deletes the object when it is the account's (managed.DeleteOwned).
	del func(ctx context.Context) error
}

// objects are the account's objects in the order Provision writes them;
// Deprovision deletes them in reverse.
func (a Account) objects(kube kubernetes.Interface) []accountObject {
	sas, roles, rbs, secrets := kube.CoreV1().ServiceAccounts(a.Namespace), kube.RbacV1().Roles(a.Namespace),
		kube.RbacV1().RoleBindings(a.Namespace), kube.CoreV1().Secrets(a.Namespace)
	create := metav1.CreateOptions{FieldManager: managed.FieldManager}
	apply := metav1.ApplyOptions{FieldManager: managed.FieldManager, Force: true}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: a.Namespace, Labels: a.labels(), Annotations: a.Owner.Annotations()}
	}
	owner := a.Owner.Annotations()
	own := []string{managed.LabelCredential, a.Credential}
	subject := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: a.Name, Namespace: a.Namespace}
	roleRef := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: a.RoleName()}
	tokenAnnotations := map[string]string{corev1.ServiceAccountNameKey: a.Name}
	return []accountObject{{
		kind: "ServiceAccount", name: a.Name,
		get: func(ctx context.Context) (metav1.Object, error) { return sas.Get(ctx, a.Name, metav1.GetOptions{}) },
		create: func(ctx context.Context) error {
			_, err := sas.Create(ctx, &corev1.ServiceAccount{ObjectMeta: meta(a.Name)}, create)
			return err
		},
		apply: func(ctx context.Context) error {
			_, err := sas.Apply(ctx, corev1ac.ServiceAccount(a.Name, a.Namespace).WithLabels(a.labels()).WithAnnotations(owner), apply)
			return err
		},
		del: func(ctx context.Context) error {
			_, err := managed.DeleteMine(ctx, sas, a.Name, a.Owner, own...)
			return err
		},
	}, {
		kind: "Role", name: a.RoleName(),
		get: func(ctx context.Context) (metav1.Object, error) {
			return roles.Get(ctx, a.RoleName(), metav1.GetOptions{})
		},
		create: func(ctx context.Context) error {
			_, err := roles.Create(ctx, &rbacv1.Role{ObjectMeta: meta(a.RoleName()), Rules: RoleRules()}, create)
			return err
		},
		apply: func(ctx context.Context) error {
			_, err := roles.Apply(ctx, rbacv1ac.Role(a.RoleName(), a.Namespace).WithLabels(a.labels()).WithAnnotations(owner).
				WithRules(ruleConfigs()...), apply)
			return err
		},
		del: func(ctx context.Context) error {
			_, err := managed.DeleteMine(ctx, roles, a.RoleName(), a.Owner, own...)
			return err
		},
	}, {
		kind: "RoleBinding", name: a.RoleName(),
		get: func(ctx context.Context) (metav1.Object, error) {
			return rbs.Get(ctx, a.RoleName(), metav1.GetOptions{})
		},
		create: func(ctx context.Context) error {
			rb := &rbacv1.RoleBinding{ObjectMeta: meta(a.RoleName()), Subjects: []rbacv1.Subject{subject}, RoleRef: roleRef}
			_, err := rbs.Create(ctx, rb, create)
			return err
		},
		apply: func(ctx context.Context) error {
			_, err := rbs.Apply(ctx, rbacv1ac.RoleBinding(a.RoleName(), a.Namespace).WithLabels(a.labels()).WithAnnotations(owner).
				WithSubjects(rbacv1ac.Subject().WithKind(subject.Kind).WithName(a.Name).WithNamespace(a.Namespace)).
				WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(roleRef.APIGroup).WithKind(roleRef.Kind).WithName(roleRef.Name)), apply)
			return err
		},
		del: func(ctx context.Context) error {
			_, err := managed.DeleteMine(ctx, rbs, a.RoleName(), a.Owner, own...)
			return err
		},
	}, {
		kind: "Secret", name: a.TokenSecretName(),
		get: func(ctx context.Context) (metav1.Object, error) {
			return secrets.Get(ctx, a.TokenSecretName(), metav1.GetOptions{})
		},
		create: func(ctx context.Context) error {
			m := meta(a.TokenSecretName())
			m.Annotations = managed.Merge(m.Annotations, tokenAnnotations)
			_, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: m, Type: corev1.SecretTypeServiceAccountToken}, create)
			return err
		},
		apply: func(ctx context.Context) error {
			_, err := secrets.Apply(ctx, corev1ac.Secret(a.TokenSecretName(), a.Namespace).WithLabels(a.labels()).
				WithAnnotations(managed.Merge(owner, tokenAnnotations)).WithType(corev1.SecretTypeServiceAccountToken), apply)
			return err
		},
		del: func(ctx context.Context) error {
			_, err := managed.DeleteMine(ctx, secrets, a.TokenSecretName(), a.Owner, own...)
			return err
		},
	}}
}

// ruleConfigs are RoleRules for server-side apply.
func ruleConfigs() []*rbacv1ac.PolicyRuleApplyConfiguration {
	var out []*rbacv1ac.PolicyRuleApplyConfiguration
	for _, r := range RoleRules() {
		out = append(out, rbacv1ac.PolicyRule().WithAPIGroups(r.APIGroups...).WithResources(r.Resources...).WithVerbs(r.Verbs...))
	}
	return out
}

// notOwned is the error that obj (nil when unknown) is not the account's:
// another definition's, or not kubeplay's.
func (o accountObject) notOwned(a Account, obj metav1.Object) error {
	if obj != nil && managed.Owns(obj, managed.LabelCredential, a.Credential) {
		owner := a.Owner
		if owner.Name == "" {
			owner.Kind, owner.Name = "credential", a.Credential
		}
		return managed.OtherOwner(o.kind, obj, owner)
	}
	return &managed.NotOwnedError{Kind: o.kind, Namespace: a.Namespace, Name: o.name, Labels: a.labels()}
}

// check fails when the object exists and is not the account's.
func (o accountObject) check(ctx context.Context, a Account) error {
	obj, err := o.get(ctx)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("reading %s %s/%s: %w", o.kind, a.Namespace, o.name, err)
	case !a.mayWrite(obj):
		return o.notOwned(a, obj)
	}
	return nil
}

// write creates the object, or applies it over the account's own.
func (o accountObject) write(ctx context.Context, a Account) error {
	obj, err := o.get(ctx)
	switch {
	case apierrors.IsNotFound(err):
		err = o.create(ctx)
		if apierrors.IsAlreadyExists(err) {
			return o.notOwned(a, nil) // created by someone else since check
		}
	case err == nil && !a.mayWrite(obj):
		return o.notOwned(a, obj)
	case err == nil:
		err = o.apply(ctx)
	}
	if err != nil {
		return fmt.Errorf("writing %s %s/%s: %w", o.kind, a.Namespace, o.name, err)
	}
	return nil
}

// owns: obj is the account's, by its labels and owner id.
func (a Account) owns(obj metav1.Object) bool {
	return managed.RelationOf(obj, a.Owner, managed.LabelCredential, a.Credential) == managed.Mine
}

// mayWrite: obj is the account's, or from before owner ids and adopted.
func (a Account) mayWrite(obj metav1.Object) bool {
	rel := managed.RelationOf(obj, a.Owner, managed.LabelCredential, a.Credential)
	return rel == managed.Mine || (rel == managed.Legacy && a.Adopt)
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

// Exists reports whether the account's token Secret and ServiceAccount
// still exist as the account's own, and the Secret holds a token.
func Exists(ctx context.Context, kube kubernetes.Interface, a Account) (bool, error) {
	s, err := kube.CoreV1().Secrets(a.Namespace).Get(ctx, a.TokenSecretName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	sa, err := kube.CoreV1().ServiceAccounts(a.Namespace).Get(ctx, a.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	// Objects of the account's names that are not the account's are not
	// the account: the next apply provisions, and refuses them.
	if !a.owns(s) || (err == nil && !a.owns(sa)) {
		return false, nil
	}
	return len(s.Data[corev1.ServiceAccountTokenKey]) > 0, nil
}

// Deprovision deletes what Provision created: each object only when it
// carries the credential's ownership labels and owner id, with a UID precondition from
// the read just before, so that an object of the same name that someone
// else made, or made in between, is left alone. Missing objects are fine.
func Deprovision(ctx context.Context, kube kubernetes.Interface, a Account) error {
	for _, o := range slices.Backward(a.objects(kube)) {
		if err := o.del(ctx); err != nil {
			return fmt.Errorf("deleting %s %s/%s: %w", o.kind, a.Namespace, o.name, err)
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
