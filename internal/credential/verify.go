package credential

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
)

// Permission is one verb on one resource (with optional subresource) in the
// core API group, and why a run needs it.
type Permission struct {
	Verb, Resource, Subresource string
	// Why names the calls of a run that need it, for docs and tests.
	Why string
}

func (p Permission) String() string {
	return p.Verb + " " + p.resource()
}

func (p Permission) resource() string {
	if p.Subresource != "" {
		return p.Resource + "/" + p.Subresource
	}
	return p.Resource
}

// RunPermissions are every call a run makes with its group's credential in
// the group's namespace, and nothing more: the provisioned Role grants
// these (RoleRules, with WarmPermissions) and can_run_pods checks exactly
// these. Unlike seed 001's pod-manager Role there is no patch of pods and
// no pods/log (output comes over the exec stream).
var RunPermissions = []Permission{
	{Verb: "get", Resource: "pods", Why: "the runner reads its pod back to tell how it vanished"},
	{Verb: "list", Resource: "pods", Why: "watches of the run pod start with a list; the orphan sweep lists the group's run pods"},
	{Verb: "watch", Resource: "pods", Why: "the runner waits, watching, until its pod runs and until it is gone"},
	{Verb: "create", Resource: "pods", Why: "the run pod, and its server-side dry run at plan time"},
	{Verb: "delete", Resource: "pods", Why: "the run pod when the run ends, and orphaned run pods"},
	{Verb: "create", Resource: "pods", Subresource: "exec", Why: "the bundle is streamed into the pod over exec (SPDY is a POST)"},
	{Verb: "get", Resource: "pods", Subresource: "exec", Why: "exec over WebSocket is an HTTP GET upgrade"},
	{Verb: "list", Resource: "events", Why: "warning events of a pod that failed to start, for the run's message; a recent scale-up for the namespace's pods; the Pulled event of a pod slow to start, for the run's timeline"},
	{Verb: "watch", Resource: "events", Why: "a pod that no node can hold waits, watching its events, for a cluster autoscaler's answer"},
	{Verb: "list", Resource: "resourcequotas", Why: "a run refused by a full namespace quota waits for it to change"},
	{Verb: "watch", Resource: "resourcequotas", Why: "that wait watches the quotas"},
}

// WarmPermissions are what a run needs beyond RunPermissions to take a warm
// pod of its group: the claim relabels the pod. The provisioned Role grants
// them; can_run_pods does not ask for them, since a run whose credential
// lacks them runs in a pod of its own. The token may already exec into
// every pod of the namespace, which gives more than changing one.
var WarmPermissions = []Permission{
	{Verb: "update", Resource: "pods", Why: "a run claims a warm pod by giving it the run's labels and deadline, " +
		"conditioned on the pod's resourceVersion so that two runs never claim one pod; kubeplay signs each warm " +
		"pod and held node's pod it creates (its UID and spec) with an update, so that only pods it made are claimed, " +
		"and each run pod, so that the orphan sweep deletes only pods it made"},
}

// RoleRules are the rules of the Role that grants RunPermissions and
// WarmPermissions: one rule per resource, verbs in the lists' order.
func RoleRules() []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	at := map[string]int{}
	for _, p := range slices.Concat(RunPermissions, WarmPermissions) {
		i, ok := at[p.resource()]
		if !ok {
			i = len(rules)
			at[p.resource()] = i
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{p.resource()}})
		}
		rules[i].Verbs = append(rules[i].Verbs, p.Verb)
	}
	return rules
}

// Report is what a credential was found to be and allowed to do.
type Report struct {
	ServerVersion string
	Username      string
	Groups        []string
	Namespace     string
	Missing       []string
}

// CanRun reports whether every run permission was granted.
func (r Report) CanRun() bool { return len(r.Missing) == 0 }

// Verify asks the cluster who the client is (SelfSubjectReview) and whether
// it may run pods in namespace (SelfSubjectAccessReview per permission).
func Verify(ctx context.Context, kube kubernetes.Interface, host, namespace string) (Report, error) {
	rep := Report{Namespace: namespace}
	raw, err := kube.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		return rep, Classify(err, host)
	}
	var v version.Info
	if err := json.Unmarshal(raw, &v); err != nil {
		return rep, fmt.Errorf("%s/version answered something that is not a Kubernetes version: %w", host, err)
	}
	rep.ServerVersion = v.GitVersion
	if err := checkServerVersion(v.GitVersion); err != nil {
		return rep, &CheckError{Failure: FailureUnsupported, Host: host, Err: err}
	}
	ssr, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return rep, Classify(err, host)
	}
	rep.Username = ssr.Status.UserInfo.Username
	rep.Groups = ssr.Status.UserInfo.Groups
	for _, p := range RunPermissions {
		review := &authzv1.SelfSubjectAccessReview{Spec: authzv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authzv1.ResourceAttributes{
				Namespace: namespace, Verb: p.Verb, Resource: p.Resource, Subresource: p.Subresource,
			},
		}}
		res, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return rep, Classify(err, host)
		}
		if !res.Status.Allowed {
			rep.Missing = append(rep.Missing, p.String())
		}
	}
	return rep, nil
}

// The Kubernetes versions kubeplay supports: the oldest and the newest that
// make test-matrix runs its acceptance tests on. Older clusters are refused;
// newer ones are used (the APIs kubeplay calls are GA and stable).
const (
	OldestKubernetes = "1.30"
	NewestKubernetes = "1.37"
)

var oldest = utilversion.MustParseGeneric(OldestKubernetes)

// checkServerVersion refuses a server older than OldestKubernetes. A
// version it cannot parse passes: the calls that follow say what is missing.
func checkServerVersion(gitVersion string) error {
	v, err := utilversion.ParseGeneric(gitVersion)
	if err != nil {
		return nil //nolint:nilerr // an unparsable version is not a refusal
	}
	if v.AtLeast(oldest) {
		return nil
	}
	return fmt.Errorf("it runs Kubernetes %s, older than %s, the oldest that kubeplay supports (%s to %s are tested)",
		gitVersion, OldestKubernetes, OldestKubernetes, NewestKubernetes)
}

// Failure classifies why a cluster could not be used.
type Failure int

// The failures Classify tells apart.
const (
	FailureOther Failure = iota
	FailureUnauthorized
	FailureForbidden
	FailureTLS
	FailureUnreachable
	FailureUnsupported
)

// CheckError is a classified connection failure.
type CheckError struct {
	Failure Failure
	Host    string
	Err     error
}

func (e *CheckError) Error() string { return e.Err.Error() }
func (e *CheckError) Unwrap() error { return e.Err }

// Classify wraps err with the kind of failure it shows.
func Classify(err error, host string) error {
	if err == nil {
		return nil
	}
	f := FailureOther
	var (
		unknownAuthority x509.UnknownAuthorityError
		invalidCert      x509.CertificateInvalidError
		hostnameErr      x509.HostnameError
		verifyErr        *tls.CertificateVerificationError
		opErr            *net.OpError
		dnsErr           *net.DNSError
		urlErr           *url.Error
	)
	switch {
	case apierrors.IsUnauthorized(err):
		f = FailureUnauthorized
	case apierrors.IsForbidden(err):
		f = FailureForbidden
	case errors.As(err, &unknownAuthority), errors.As(err, &invalidCert), errors.As(err, &hostnameErr), errors.As(err, &verifyErr):
		f = FailureTLS
	case errors.As(err, &opErr), errors.As(err, &dnsErr):
		f = FailureUnreachable
	case errors.As(err, &urlErr) && urlErr.Timeout():
		f = FailureUnreachable
	}
	return &CheckError{Failure: f, Host: host, Err: err}
}

// ValidateKubeconfig checks that content parses and that context (or the
// current context when empty) exists and names a cluster with a server.
func ValidateKubeconfig(content, context string) error {
	raw, err := clientcmd.Load([]byte(content))
	if err != nil {
		return fmt.Errorf("the kubeconfig does not parse: %w", err)
	}
	name := context
	if name == "" {
		name = raw.CurrentContext
	}
	if name == "" {
		return errors.New("the kubeconfig has no current-context; set context to one of its contexts")
	}
	ctx, ok := raw.Contexts[name]
	if !ok {
		names := make([]string, 0, len(raw.Contexts))
		for n := range raw.Contexts {
			names = append(names, n)
		}
		return fmt.Errorf("the kubeconfig has no context %q (it has %v)", name, names)
	}
	cl, ok := raw.Clusters[ctx.Cluster]
	if !ok || cl.Server == "" {
		return fmt.Errorf("context %q names cluster %q, which the kubeconfig does not define with a server", name, ctx.Cluster)
	}
	return nil
}

// Annotations of the catalog Secret that record the last check.
const (
	AnnotationGroups    = "kubeplay.io/groups"
	AnnotationMissing   = "kubeplay.io/missing-permissions"
	AnnotationNamespace = "kubeplay.io/checked-namespace"
	AnnotationCheckedAt = "kubeplay.io/checked-at"
)

// Annotations records the report, checked at t, for the catalog Secret.
func (r Report) Annotations(t time.Time) map[string]string {
	groups, _ := json.Marshal(r.Groups)
	missing, _ := json.Marshal(r.Missing)
	return map[string]string{
		AnnotationVersion:   r.ServerVersion,
		AnnotationIdentity:  r.Username,
		AnnotationGroups:    string(groups),
		AnnotationMissing:   string(missing),
		AnnotationNamespace: r.Namespace,
		AnnotationCheckedAt: t.UTC().Format(time.RFC3339),
	}
}

// ReportFromAnnotations reads back what Annotations recorded.
func ReportFromAnnotations(a map[string]string) (r Report, checkedAt string) {
	r = Report{ServerVersion: a[AnnotationVersion], Username: a[AnnotationIdentity], Namespace: a[AnnotationNamespace]}
	_ = json.Unmarshal([]byte(a[AnnotationGroups]), &r.Groups)
	_ = json.Unmarshal([]byte(a[AnnotationMissing]), &r.Missing)
	return r, a[AnnotationCheckedAt]
}

// provisionedBackoff spans about 6 s: how long the API server may take to
// see a token Secret that its controller has just filled.
var provisionedBackoff = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Steps: 7, Cap: 2 * time.Second}

// VerifyProvisioned is Verify for a service account token issued moments
// ago. The API server authenticates such tokens from its own informer
// caches, which may not hold the token's Secret yet, and nothing can be
// watched for that; so a 401 is retried with backoff for a few seconds
// before it counts. Every other failure counts at once.
func VerifyProvisioned(ctx context.Context, kube kubernetes.Interface, host, namespace string) (Report, error) {
	var rep Report
	err := retry.OnError(provisionedBackoff, isUnauthorized, func() error {
		var err error
		rep, err = Verify(ctx, kube, host, namespace)
		return err
	})
	return rep, err
}

func isUnauthorized(err error) bool {
	var ce *CheckError
	return errors.As(err, &ce) && ce.Failure == FailureUnauthorized
}

// CheckKubeconfig refuses a kubeconfig that would run a program or read a
// file on this host; exec plugins pass only with allowExec.
func CheckKubeconfig(content string, allowExec bool) error {
	raw, err := clientcmd.Load([]byte(content))
	if err != nil {
		return fmt.Errorf("the kubeconfig does not parse: %w", err)
	}
	return kubeclient.CheckUntrusted(raw, allowExec)
}

// InsecureKubeconfigClusters lists the clusters of a kubeconfig that skip
// TLS verification of their API server.
func InsecureKubeconfigClusters(content string) []string {
	raw, err := clientcmd.Load([]byte(content))
	if err != nil {
		return nil
	}
	return kubeclient.InsecureClusters(raw)
}
