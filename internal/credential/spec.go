// Package credential stores kubeplay credentials as Secrets, turns them into
// client configuration, checks what they may do on their cluster and
// provisions service-account credentials.
package credential

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

// The kinds of credential.
const (
	KindBearerToken    = "bearer_token"
	KindKubeconfig     = "kubeconfig"
	KindProvider       = "provider"
	KindServiceAccount = "service_account"
	// KindClusterAPI reads its kubeconfig from a parent cluster, from the
	// Secret Cluster API writes for each cluster (airship's dynamic kubeconfig).
	KindClusterAPI = "cluster_api"
)

// Kinds lists every kind, in documentation order.
var Kinds = []string{KindBearerToken, KindClusterAPI, KindKubeconfig, KindProvider, KindServiceAccount}

// Labels and annotations kubeplay puts on the objects it owns.
const (
	LabelKind          = "kubeplay.io/credential-kind"
	AnnotationDesc     = "kubeplay.io/description"
	AnnotationDigest   = "kubeplay.io/secret-digest"
	AnnotationVersion  = "kubeplay.io/server-version"
	AnnotationIdentity = "kubeplay.io/identity"

	AnnotationSecretVersion = "kubeplay.io/secret-version"
	AnnotationExport        = "kubeplay.io/export-kubeconfig"
)

// Keys of the catalog Secret's data.
const (
	keyKind           = "kind"
	keyHost           = "host"
	keyCACert         = "ca.crt"
	keyVerifySSL      = "verify-ssl"
	keyToken          = "token"
	keyKubeconfig     = "kubeconfig"
	keyContext        = "context"
	keyNamespace      = "namespace"
	keyServiceAccount = "service-account"
	keyParent         = "parent"
	keyClusterName    = "cluster-name"
	keyClusterNS      = "cluster-namespace"
	keyWaitTimeout    = "kubeconfig-timeout"
	keyAllowExec      = "allow-exec-plugin"
	keyOwnerID        = "owner-id"
)

// Spec is one credential as kubeplay stores it.
type Spec struct {
	Name        string
	Kind        string
	Description string

	// bearer_token and service_account
	Host        string
	BearerToken string
	CACert      string
	VerifySSL   bool

	// kubeconfig
	Kubeconfig string
	Context    string
	// AllowExecPlugin is the credential's own declaration that its
	// kubeconfig's exec plugin may run. Read back from the catalog it is
	// cluster data, which anyone who can write the Secret can set: it never
	// lets a plugin run by itself. RESTConfig runs one only when the
	// configuration that uses the credential opted in as well.
	AllowExecPlugin bool

	// Namespace whose permissions are checked; for service_account the
	// namespace the account lives in.
	Namespace      string
	ServiceAccount string
	// OwnerID is a service_account credential's owner id: the objects it
	// provisions carry it (Account.Owner); "" before owner ids.
	OwnerID string

	// SecretVersion (the bearer_token_wo_version or kubeconfig_wo_version,
	// whichever the kind has) and ExportKubeconfig are Terraform settings
	// kept in annotations so that import restores them.
	SecretVersion    string
	ExportKubeconfig bool

	// cluster_api: the parent credential, and the Cluster API cluster whose
	// <ClusterName>-kubeconfig Secret in ClusterNamespace holds the kubeconfig.
	Parent            string
	ClusterName       string
	ClusterNamespace  string
	KubeconfigTimeout string
}

// KubeconfigSecretName is the Secret Cluster API writes a cluster's
// kubeconfig to, under key "value".
func (s Spec) KubeconfigSecretName() string { return s.ClusterName + "-kubeconfig" }

// Secret renders the catalog Secret for the spec and the report of its last
// check at checkedAt.
func (s Spec) Secret(catalogNamespace string, rep Report, checkedAt time.Time) *corev1.Secret {
	data := s.data()
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      s.Name,
			Namespace: catalogNamespace,
			Labels: map[string]string{
				managed.LabelManagedBy: managed.ManagedByValue,
				managed.LabelComponent: managed.ComponentCredential,
				LabelKind:              s.Kind,
			},
			Annotations: map[string]string{AnnotationDigest: Digest(data)},
		},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}
	maps.Copy(sec.Annotations, rep.Annotations(checkedAt))
	if s.Description != "" {
		sec.Annotations[AnnotationDesc] = s.Description
	}
	if s.SecretVersion != "" {
		sec.Annotations[AnnotationSecretVersion] = s.SecretVersion
	}
	if s.ExportKubeconfig {
		sec.Annotations[AnnotationExport] = "true"
	}
	return sec
}

// Digest is the Digest of the data the spec's Secret holds: it keys clients
// by content before the Secret is written.
func (s Spec) Digest() string { return Digest(s.data()) }

func (s Spec) data() map[string][]byte {
	data := map[string][]byte{keyKind: []byte(s.Kind)}
	put := func(k, v string) {
		if v != "" {
			data[k] = []byte(v)
		}
	}
	put(keyHost, s.Host)
	put(keyCACert, s.CACert)
	put(keyToken, s.BearerToken)
	put(keyKubeconfig, s.Kubeconfig)
	put(keyContext, s.Context)
	put(keyNamespace, s.Namespace)
	put(keyServiceAccount, s.ServiceAccount)
	put(keyOwnerID, s.OwnerID)
	put(keyParent, s.Parent)
	put(keyClusterName, s.ClusterName)
	put(keyClusterNS, s.ClusterNamespace)
	put(keyWaitTimeout, s.KubeconfigTimeout)
	if s.Kind == KindBearerToken || s.Kind == KindServiceAccount {
		data[keyVerifySSL] = []byte(strconv.FormatBool(s.VerifySSL))
	}
	// Only when set, so the digests of Secrets written before it existed hold.
	if s.AllowExecPlugin {
		data[keyAllowExec] = []byte("true")
	}
	return data
}

// Digest is a stable SHA-256 over a Secret's data. It lives only in the
// Secret's own annotations, so that a change made outside kubeplay is noticed
// without putting anything derived from the secret into Terraform state.
func Digest(data map[string][]byte) string {
	h := sha256.New()
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(h, "%d:%s%d:", len(k), k, len(data[k]))
		h.Write(data[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ErrNotCredential means a Secret exists under the name but kubeplay does not
// own it as a credential.
type ErrNotCredential struct{ Namespace, Name string }

func (e *ErrNotCredential) Error() string {
	return fmt.Sprintf("Secret %s/%s is not a kubeplay credential (label %s=%s missing)", e.Namespace, e.Name, managed.LabelComponent, managed.ComponentCredential)
}

// FromSecret reads a catalog Secret back into a spec. Tampered reports
// whether its data no longer matches the digest kubeplay wrote.
func FromSecret(sec *corev1.Secret) (spec Spec, tampered bool, err error) {
	if sec.Labels[managed.LabelComponent] != managed.ComponentCredential {
		return Spec{}, false, &ErrNotCredential{Namespace: sec.Namespace, Name: sec.Name}
	}
	get := func(k string) string { return string(sec.Data[k]) }
	spec = Spec{
		Name:           sec.Name,
		Kind:           get(keyKind),
		Description:    sec.Annotations[AnnotationDesc],
		Host:           get(keyHost),
		BearerToken:    get(keyToken),
		CACert:         get(keyCACert),
		Kubeconfig:     get(keyKubeconfig),
		Context:        get(keyContext),
		Namespace:      get(keyNamespace),
		ServiceAccount: get(keyServiceAccount),
		OwnerID:        get(keyOwnerID),
		VerifySSL:      true,

		Parent:            get(keyParent),
		ClusterName:       get(keyClusterName),
		ClusterNamespace:  get(keyClusterNS),
		KubeconfigTimeout: get(keyWaitTimeout),

		SecretVersion:    sec.Annotations[AnnotationSecretVersion],
		ExportKubeconfig: sec.Annotations[AnnotationExport] == "true",
	}
	if v, ok := sec.Data[keyVerifySSL]; ok {
		if spec.VerifySSL, err = strconv.ParseBool(string(v)); err != nil {
			return Spec{}, false, fmt.Errorf("Secret %s/%s: %s is %q, not a boolean", sec.Namespace, sec.Name, keyVerifySSL, v)
		}
	}
	if v, ok := sec.Data[keyAllowExec]; ok {
		if spec.AllowExecPlugin, err = strconv.ParseBool(string(v)); err != nil {
			return Spec{}, false, fmt.Errorf("Secret %s/%s: %s is %q, not a boolean", sec.Namespace, sec.Name, keyAllowExec, v)
		}
	}
	if !slices.Contains(Kinds, spec.Kind) {
		return Spec{}, false, fmt.Errorf("Secret %s/%s: unknown credential kind %q", sec.Namespace, sec.Name, spec.Kind)
	}
	tampered = sec.Annotations[AnnotationDigest] != Digest(sec.Data)
	return spec, tampered, nil
}

// ExecNotAllowedError: a kubeconfig credential declares that its exec
// plugin may run, but the configuration that uses it did not opt in.
type ExecNotAllowedError struct {
	Credential string
	// Host is the refusal of the plugin: entry, field "exec" and command.
	Host *kubeclient.HostAccessError
	// ExecSHA256 is the digest of the kubeconfig's exec blocks, for the remedy.
	ExecSHA256 string
}

func (e *ExecNotAllowedError) Error() string {
	return fmt.Sprintf("credential %q: its kubeconfig's %s sets exec, which runs command %s on this host, and this "+
		"provider's exec_plugin_credentials does not list %q", e.Credential, e.Host.Entry, e.Host.Value, e.Credential)
}

func (e *ExecNotAllowedError) Unwrap() error { return e.Host }

// ExecPinMismatchError: a kubeconfig credential's exec blocks are not the
// ones the configuration that uses it pinned (exec_plugin_credentials), so
// its command is not the one that workspace agreed to run.
type ExecPinMismatchError struct {
	Credential string
	// Command is the command the kubeconfig runs now, for the message.
	Command string
	// Pinned and Found are the SHA-256 of the exec blocks (ExecSHA256).
	Pinned, Found string
}

func (e *ExecPinMismatchError) Error() string {
	return fmt.Sprintf("credential %q: its kubeconfig's exec plugin (command %s) has exec_sha256 %s, but this "+
		"provider's exec_plugin_credentials pins %s", e.Credential, e.Command, e.Found, e.Pinned)
}

// Unwrap makes the refusal a host access refusal like the others.
func (e *ExecPinMismatchError) Unwrap() error { return kubeclient.ErrHostAccess }

// ExecSHA256 is the digest of the kubeconfig's exec blocks
// (kubeclient.ExecSHA256); "" for other kinds, a kubeconfig that does not
// parse, or one without exec.
func (s Spec) ExecSHA256() string {
	if s.Kind != KindKubeconfig {
		return ""
	}
	raw, err := clientcmd.Load([]byte(s.Kubeconfig))
	if err != nil {
		return ""
	}
	return kubeclient.ExecSHA256(raw)
}

// CheckExecPin refuses a kubeconfig whose exec blocks are not the pinned
// ones; one without exec passes, as it runs nothing.
func (s Spec) CheckExecPin(pinned string) error {
	found := s.ExecSHA256()
	if found == "" || found == pinned {
		return nil
	}
	raw, _ := clientcmd.Load([]byte(s.Kubeconfig))
	var cmds []string
	for _, name := range slices.Sorted(maps.Keys(raw.AuthInfos)) {
		if u := raw.AuthInfos[name]; u != nil && u.Exec != nil {
			cmds = append(cmds, u.Exec.Command)
		}
	}
	return &ExecPinMismatchError{Credential: s.Name, Command: strings.Join(cmds, ", "), Pinned: pinned, Found: found}
}

// RESTConfig returns the client configuration the credential describes.
// provider is the provider's own connection, used by kind "provider".
// execOptIn says that the configuration using the credential allows its
// exec plugin: a kubeconfig's plugin passes only when the credential
// declares it (AllowExecPlugin) and execOptIn holds, since either alone may
// come from whoever writes the catalog.
func (s Spec) RESTConfig(provider *rest.Config, execOptIn bool) (*rest.Config, error) {
	switch s.Kind {
	case KindProvider:
		if provider == nil {
			return nil, fmt.Errorf("credential %q uses the provider's connection, which is not configured", s.Name)
		}
		return rest.CopyConfig(provider), nil
	case KindBearerToken, KindServiceAccount:
		return &rest.Config{
			Host:        s.Host,
			BearerToken: s.BearerToken,
			TLSClientConfig: rest.TLSClientConfig{
				CAData:   []byte(s.CACert),
				Insecure: !s.VerifySSL,
			},
		}, nil
	case KindKubeconfig:
		raw, err := clientcmd.Load([]byte(s.Kubeconfig))
		if err != nil {
			return nil, fmt.Errorf("credential %q: kubeconfig does not parse: %w", s.Name, err)
		}
		// The kubeconfig may come back from the catalog, written by anyone
		// who can write the Secret: check it before client-go reads files.
		err = kubeclient.CheckUntrusted(raw, s.AllowExecPlugin && execOptIn)
		var he *kubeclient.HostAccessError
		if errors.As(err, &he) && he.Field == "exec" && s.AllowExecPlugin {
			return nil, &ExecNotAllowedError{Credential: s.Name, Host: he, ExecSHA256: s.ExecSHA256()}
		}
		if err != nil {
			return nil, fmt.Errorf("credential %q: its kubeconfig: %w", s.Name, err)
		}
		overrides := &clientcmd.ConfigOverrides{CurrentContext: s.Context}
		cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, s.Context, overrides, nil).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("credential %q: %w", s.Name, err)
		}
		return cfg, nil
	case KindClusterAPI:
		return nil, fmt.Errorf("credential %q reads its kubeconfig from its parent's cluster; it has no static configuration", s.Name)
	default:
		return nil, fmt.Errorf("credential %q: unknown kind %q", s.Name, s.Kind)
	}
}

// KubeconfigServer is the server of a kubeconfig credential's context,
// read without building a client (which could run its exec plugin); "" when
// the kubeconfig does not say.
func (s Spec) KubeconfigServer() string {
	raw, err := clientcmd.Load([]byte(s.Kubeconfig))
	if err != nil {
		return ""
	}
	name := s.Context
	if name == "" {
		name = raw.CurrentContext
	}
	c, ok := raw.Contexts[name]
	if !ok || c == nil {
		return ""
	}
	if cl, ok := raw.Clusters[c.Cluster]; ok && cl != nil {
		return cl.Server
	}
	return ""
}
