// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runnamespace

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podsecurity"
)

func TestNameLengths(t *testing.T) {
	const id = "0123456789abcdef"
	cases := []struct{ label, want string }{
		{"small", "small-" + id},
		{strings.Repeat("a", 46), strings.Repeat("a", 46) + "-" + id},
		{strings.Repeat("a", 47), strings.Repeat("a", 46) + "-" + id},
		{strings.Repeat("a", 200), strings.Repeat("a", 46) + "-" + id},
	}
	for _, c := range cases {
		got := Name(c.label, id)
		if got != c.want {
			t.Errorf("Name(%d chars) = %q, want %q", len(c.label), got, c.want)
		}
		if len(got) > 63 {
			t.Errorf("Name(%d chars) has %d characters, more than a namespace may", len(c.label), len(got))
		}
	}
	// Two runs, or two labels, never share a namespace.
	if Name("lbl", id) == Name("other", id) || Name("lbl", id) == Name("lbl", "fedcba9876543210") {
		t.Error("Name does not depend on both the label and the run id")
	}
	// An id that does not fit must not panic.
	long := strings.Repeat("x", 70)
	if got := Name("lbl", long); !strings.HasSuffix(got, long) {
		t.Errorf("Name with a %d-character id = %q", len(long), got)
	}
}

func TestObjectsContents(t *testing.T) {
	deadline := time.Date(2026, 11, 22, 11, 0, 0, 0, time.FixedZone("CET", 3600))
	labels := map[string]string{"team": "qa"}
	annotations := map[string]string{"note": "x"}
	s := Spec{Label: "lbl", Group: "grp", RunID: "r1", Deadline: deadline, Labels: labels, Annotations: annotations}
	ns, objs := s.Objects()
	if ns.Annotations[managed.AnnotationDeadline] != "2026-11-22T10:00:00Z" {
		t.Errorf("deadline annotation %q, want the deadline in UTC", ns.Annotations[managed.AnnotationDeadline])
	}
	ns.Labels["added"], ns.Annotations["added"] = "y", "y"
	if !maps.Equal(labels, map[string]string{"team": "qa"}) || !maps.Equal(annotations, map[string]string{"note": "x"}) {
		t.Errorf("Objects changed the spec's maps: %v %v", labels, annotations)
	}

	var (
		sa   *corev1.ServiceAccount
		role *rbacv1.Role
		rb   *rbacv1.RoleBinding
	)
	for _, o := range objs {
		switch x := o.(type) {
		case *corev1.ServiceAccount:
			sa = x
		case *rbacv1.Role:
			role = x
		case *rbacv1.RoleBinding:
			rb = x
		}
	}
	if sa == nil || role == nil || rb == nil {
		t.Fatalf("objects %v, want a ServiceAccount, a Role and a RoleBinding", objs)
	}
	for _, m := range []metav1.Object{sa, role, rb} {
		if m.GetNamespace() != "lbl-r1" || !managed.Owns(m, managed.LabelNodeLabel, "lbl") {
			t.Errorf("%s is in namespace %q with labels %v", m.GetName(), m.GetNamespace(), m.GetLabels())
		}
	}
	if rb.RoleRef.Name != role.Name || rb.RoleRef.Kind != "Role" || len(rb.Subjects) != 1 ||
		rb.Subjects[0].Name != sa.Name || rb.Subjects[0].Namespace != "lbl-r1" {
		t.Errorf("the binding does not bind the account to the role: %+v", rb)
	}
	allows := func(group, res, verb string) bool {
		for _, r := range role.Rules {
			if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, res) && slices.Contains(r.Verbs, verb) {
				return true
			}
		}
		return false
	}
	for _, want := range [][3]string{{"", "pods", "create"}, {"", "pods/exec", "create"}, {"", "pods/log", "get"},
		{"", "secrets", "delete"}, {"apps", "deployments", "patch"}, {"batch", "jobs", "watch"}, {"networking.k8s.io", "ingresses", "update"}} {
		if !allows(want[0], want[1], want[2]) {
			t.Errorf("the role does not allow %s on %s in group %q", want[2], want[1], want[0])
		}
	}
	for _, deny := range [][3]string{{"", "namespaces", "delete"}, {"rbac.authorization.k8s.io", "roles", "create"}, {"", "resourcequotas", "update"}} {
		if allows(deny[0], deny[1], deny[2]) {
			t.Errorf("the role allows %s on %s in group %q: the run could lift its own limits", deny[2], deny[1], deny[0])
		}
	}

	bare, _ := Spec{Label: "l", Group: "g", RunID: "r"}.Objects()
	if bare.Labels[managed.LabelRun] != "r" || bare.Annotations[managed.AnnotationDeadline] == "" {
		t.Errorf("without labels or annotations: %v %v", bare.Labels, bare.Annotations)
	}
}

func TestExpiredEdges(t *testing.T) {
	d := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	withDeadline := func(v string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{managed.AnnotationDeadline: v}}}
	}
	cases := []struct {
		name string
		ns   *corev1.Namespace
		now  time.Time
		want bool
	}{
		{"at the deadline", withDeadline("2026-01-01T00:00:00Z"), d, false},
		{"just after", withDeadline("2026-01-01T00:00:00Z"), d.Add(time.Nanosecond), true},
		{"other zone", withDeadline("2026-01-01T01:00:00+01:00"), d.Add(time.Second), true},
		{"malformed", withDeadline("tomorrow"), d.Add(24 * time.Hour), false},
		{"empty", withDeadline(""), d, false},
	}
	for _, c := range cases {
		if got := Expired(c.ns, c.now); got != c.want {
			t.Errorf("%s: Expired = %v, want %v", c.name, got, c.want)
		}
	}
}

// tokens makes the fake clientset issue tokens, which it does not by itself,
// and records the requested lifetime.
func tokens(kube *fake.Clientset, token string, seconds *int64) {
	kube.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "token" {
			return false, nil, nil
		}
		ca, ok := a.(k8stesting.CreateAction)
		if !ok {
			return true, nil, fmt.Errorf("token reactor got a %T", a)
		}
		tr, ok := ca.GetObject().(*authv1.TokenRequest)
		if !ok {
			return true, nil, fmt.Errorf("token request is a %T", ca.GetObject())
		}
		if tr.Spec.ExpirationSeconds != nil {
			*seconds = *tr.Spec.ExpirationSeconds
		}
		// As an API server that caps tokens at 30 minutes.
		expires := metav1.NewTime(time.Now().Add(min(time.Duration(*seconds)*time.Second, 30*time.Minute)).Truncate(time.Second))
		return true, &authv1.TokenRequest{Status: authv1.TokenRequestStatus{Token: token, ExpirationTimestamp: expires}}, nil
	})
}

func TestCreate(t *testing.T) {
	kube := fake.NewClientset()
	var seconds int64
	tokens(kube, "tok-123", &seconds)
	var managers []string
	kube.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		c, ok := a.(k8stesting.CreateActionImpl)
		if !ok {
			t.Errorf("create reactor got a %T", a)
			return true, nil, fmt.Errorf("create reactor got a %T", a)
		}
		managers = append(managers, c.GetCreateOptions().FieldManager)
		return false, nil, nil
	})
	s := Spec{Label: "lbl", Group: "grp", RunID: "r1", Deadline: time.Now().Add(2 * time.Hour),
		Labels: map[string]string{"team": "qa"}, CAData: []byte("the CA")}
	kubeconfig, token, err := Create(context.Background(), kube, s)
	if err != nil {
		t.Fatal(err)
	}
	if token != "tok-123" {
		t.Errorf("token %q", token)
	}
	if seconds < 7100 || seconds > 7200 {
		t.Errorf("the token lives %d s, want about the 7200 s until the deadline", seconds)
	}
	if len(managers) != 5 || slices.ContainsFunc(managers, func(m string) bool { return m != managed.FieldManager }) {
		t.Errorf("field managers %q, want %q on each of the 5 creates", managers, managed.FieldManager)
	}

	ctx := context.Background()
	ns, err := kube.CoreV1().Namespaces().Get(ctx, "lbl-r1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !managed.Owns(ns, managed.LabelRun, "r1", managed.LabelContainerGroup, "grp", "team", "qa") {
		t.Errorf("namespace labels %v", ns.Labels)
	}
	if _, err := kube.CoreV1().ServiceAccounts("lbl-r1").Get(ctx, "kubeplay", metav1.GetOptions{}); err != nil {
		t.Error(err)
	}
	if _, err := kube.RbacV1().Roles("lbl-r1").Get(ctx, "kubeplay", metav1.GetOptions{}); err != nil {
		t.Error(err)
	}
	if _, err := kube.RbacV1().RoleBindings("lbl-r1").Get(ctx, "kubeplay", metav1.GetOptions{}); err != nil {
		t.Error(err)
	}

	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		t.Fatalf("the kubeconfig does not load: %v\n%s", err, kubeconfig)
	}
	kc := cfg.Contexts[cfg.CurrentContext]
	if kc == nil || kc.Namespace != "lbl-r1" {
		t.Fatalf("current context %q: %+v", cfg.CurrentContext, kc)
	}
	rest, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if rest.Host != InClusterServer || rest.BearerToken != "tok-123" || string(rest.CAData) != "the CA" {
		t.Errorf("client config: host %q token %q CA %q", rest.Host, rest.BearerToken, rest.CAData)
	}
}

func TestCreateShortDeadlineGetsTheShortestToken(t *testing.T) {
	kube := fake.NewClientset()
	var seconds int64
	tokens(kube, "t", &seconds)
	if _, _, err := Create(context.Background(), kube, Spec{Label: "l", RunID: "r", Deadline: time.Now().Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if seconds != int64(minTokenTTL/time.Second) {
		t.Errorf("a run past its deadline asked for a %d s token, want the shortest (%d s)", seconds, int64(minTokenTTL/time.Second))
	}
}

func TestCreateNamespaceTaken(t *testing.T) {
	taken := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "lbl-r1", Labels: map[string]string{"owner": "someone"}}}
	kube := fake.NewClientset(taken)
	_, _, err := Create(context.Background(), kube, Spec{Label: "lbl", RunID: "r1", Deadline: time.Now().Add(time.Hour)})
	if !errors.Is(err, ErrNotCreated) || !apierrors.IsAlreadyExists(err) {
		t.Fatalf("Create over an existing namespace = %v, want ErrNotCreated wrapping AlreadyExists", err)
	}
	ns, _ := kube.CoreV1().Namespaces().Get(context.Background(), "lbl-r1", metav1.GetOptions{})
	if ns.Labels["owner"] != "someone" {
		t.Errorf("Create changed a namespace that is not the run's: %v", ns.Labels)
	}
	if _, err := kube.CoreV1().ServiceAccounts("lbl-r1").Get(context.Background(), "kubeplay", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Create went on into a namespace it did not create (%v)", err)
	}
}

func TestCreateFailuresAfterTheNamespace(t *testing.T) {
	forbid := func(verb, res, sub string) func(*fake.Clientset) {
		return func(kube *fake.Clientset) {
			kube.PrependReactor(verb, res, func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() != sub {
					return false, nil, nil
				}
				return true, nil, apierrors.NewForbidden(rbacv1.Resource(res), "kubeplay", errors.New("denied"))
			})
		}
	}
	cases := []struct {
		name  string
		setup func(*fake.Clientset)
		want  string
	}{
		{"role", forbid("create", "roles", ""), "creating Role in namespace lbl-r1"},
		{"binding", forbid("create", "rolebindings", ""), "creating RoleBinding in namespace lbl-r1"},
		{"token", forbid("create", "serviceaccounts", "token"), "requesting a token for service account lbl-r1/kubeplay"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			kube := fake.NewClientset()
			c.setup(kube)
			_, _, err := Create(context.Background(), kube, Spec{Label: "lbl", RunID: "r1", Deadline: time.Now().Add(time.Hour)})
			if err == nil || !strings.Contains(err.Error(), c.want) || !apierrors.IsForbidden(err) {
				t.Fatalf("error %v, want %q wrapping Forbidden", err, c.want)
			}
			if errors.Is(err, ErrNotCreated) {
				t.Fatal("the namespace was created, yet the error says it was not: the caller would leak it")
			}
		})
	}
}

func TestDelete(t *testing.T) {
	// The fake clientset cannot stream lists; wait with a plain list and watch.
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	own := managed.Labels(managed.LabelContainerGroup, "g")
	// Namespaces kubeplay did not make, or made for another group, stay.
	// (The fake ignores field selectors: one namespace per clientset.)
	for _, ns := range []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "theirs"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "other-group", Labels: managed.Labels(managed.LabelContainerGroup, "h")}}} {
		kube := fake.NewClientset(ns)
		if err := Delete(ctx, kube, ns.Name, managed.LabelContainerGroup, "g"); err != nil {
			t.Fatal(err)
		}
		if _, err := kube.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{}); err != nil {
			t.Fatalf("namespace %s was deleted: %v", ns.Name, err)
		}
	}
	kube := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "lbl-r1", Labels: own}})
	if err := Delete(ctx, kube, "lbl-r1", managed.LabelContainerGroup, "g"); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Namespaces().Get(ctx, "lbl-r1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the namespace is still there (%v)", err)
	}
	if err := Delete(ctx, kube, "lbl-r1"); err != nil {
		t.Fatalf("deleting a namespace that is gone: %v, want nil", err)
	}
	kube = fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: own}})
	kube.PrependReactor("delete", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("namespaces"), "x", errors.New("denied"))
	})
	if err := Delete(ctx, kube, "x"); !apierrors.IsForbidden(err) {
		t.Fatalf("Delete = %v, want the Forbidden error", err)
	}
}

// FuzzObjects: whatever labels and annotations a node label brings, a run's
// namespace is found as the run's (its run label, a deadline) and never as
// a held node's, and a held node's namespace as the node's, without a run
// label, deadline or turn; both are named validly and carry the group.
func FuzzObjects(f *testing.F) {
	f.Add("nsl", "0123456789abcdef", "", "team", "qa", managed.LabelRun, "x")
	f.Add("nsl", "", "ci-sandbox", managed.LabelNode, "forged", AnnotationHolder, "run 2099-01-01T00:00:00Z")
	f.Add("nsl", "r1", "n1", managed.AnnotationDeadline, "2000-01-01T00:00:00Z", managed.LabelContainerGroup, "other")
	f.Fuzz(func(t *testing.T, label, run, node, k1, v1, k2, v2 string) {
		if len(validation.IsDNS1123Label(label)) > 0 || (node != "" && len(validation.IsDNS1123Label(node)) > 0) ||
			(node == "" && len(validation.IsDNS1123Label(Name(label, run))) > 0) {
			t.Skip("names the schema refuses")
		}
		s := Spec{Label: label, Group: "grp", RunID: run, Node: node, Deadline: time.Unix(4102444800, 0),
			Labels: map[string]string{k1: v1, k2: v2}, Annotations: map[string]string{k1: v1, k2: v2}}
		ns, objs := s.Objects()
		if len(objs) != 3 || ns.Labels[managed.LabelContainerGroup] != "grp" || ns.Labels[managed.LabelManagedBy] != managed.ManagedByValue {
			t.Fatalf("namespace %v with %d objects", ns.Labels, len(objs))
		}
		if _, ok := ns.Annotations[AnnotationHolder]; ok {
			t.Fatalf("a new namespace carries a turn: %v", ns.Annotations)
		}
		if node != "" {
			_, run := ns.Labels[managed.LabelRun]
			_, deadline := ns.Annotations[managed.AnnotationDeadline]
			if ns.Name != node || ns.Labels[managed.LabelNode] != node || run || deadline || Expired(ns, time.Now().Add(1e6*time.Hour)) {
				t.Fatalf("held node %q: namespace %s, labels %v, annotations %v", node, ns.Name, ns.Labels, ns.Annotations)
			}
			return
		}
		if _, ok := ns.Labels[managed.LabelNode]; ok || ns.Name != Name(label, run) || ns.Labels[managed.LabelRun] != run ||
			ns.Annotations[managed.AnnotationDeadline] != "2100-01-01T00:00:00Z" {
			t.Fatalf("run %q: namespace %s, labels %v, annotations %v", run, ns.Name, ns.Labels, ns.Annotations)
		}
	})
}

// FuzzHolder: whatever a held node's turn annotation says, reading it does
// not panic, and a turn is held only by a named run until a time to come,
// as TakeTurn wrote it.
func FuzzHolder(f *testing.F) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	f.Add("0123456789abcdef 2026-11-25T12:30:00Z")
	f.Add("run 2026-11-25T11:00:00Z")
	f.Add(" 2099-01-01T00:00:00Z")
	f.Add("run not-a-time")
	f.Add("")
	f.Fuzz(func(t *testing.T, v string) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationHolder: v}}}
		run, until, held := holder(ns, now)
		if !held {
			if run != "" || !until.IsZero() {
				t.Fatalf("%q: no turn, yet run %q until %v", v, run, until)
			}
			return
		}
		if !until.After(now) || !strings.HasPrefix(v, run+" ") {
			t.Fatalf("%q: held by %q until %v at %v", v, run, until, now)
		}
	})
}

// TestIssueExpiresAsIssued: the grant's expiry is the issued token's, not
// the asked ttl, when the API server caps it.
func TestIssueExpiresAsIssued(t *testing.T) {
	kube := fake.NewClientset()
	var seconds int64
	tokens(kube, "t", &seconds)
	before := time.Now()
	g, err := Issue(context.Background(), kube, "node-1", "https://example:6443", nil, 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if seconds != 7200 {
		t.Errorf("asked for %d s, want 7200", seconds)
	}
	if d := g.Expires.Sub(before); d < 29*time.Minute || d > 31*time.Minute {
		t.Errorf("Expires is %v after the request, want the server's 30 minute cap", d)
	}
	if g.Token != "t" || len(g.Kubeconfig) == 0 {
		t.Errorf("grant %+v", g)
	}
}

// TestObjectsSecurityLabels: the namespace enforces, warns and audits the
// group's level, whatever the node label's labels say.
func TestObjectsSecurityLabels(t *testing.T) {
	for _, node := range []string{"", "held-1"} {
		s := Spec{Label: "lbl", Group: "grp", RunID: "r1", Node: node, PodSecurityLevel: podsecurity.Restricted,
			Labels: map[string]string{"team": "qa", "pod-security.kubernetes.io/enforce": "privileged",
				"pod-security.kubernetes.io/enforce-version": "v1.20", "pod-security.kubernetes.io/exempt": "x"}}
		ns, _ := s.Objects()
		for _, mode := range []string{"enforce", "warn", "audit"} {
			if got := ns.Labels["pod-security.kubernetes.io/"+mode]; got != podsecurity.Restricted {
				t.Errorf("node %q: %s = %q, want restricted", node, mode, got)
			}
			if got := ns.Labels["pod-security.kubernetes.io/"+mode+"-version"]; got != "latest" {
				t.Errorf("node %q: %s-version = %q, want latest", node, mode, got)
			}
		}
		if _, ok := ns.Labels["pod-security.kubernetes.io/exempt"]; ok || ns.Labels["team"] != "qa" {
			t.Errorf("node %q: labels %v", node, ns.Labels)
		}
	}
	ns, _ := Spec{Label: "l", RunID: "r", PodSecurityLevel: "bogus"}.Objects()
	if ns.Labels[podsecurity.EnforceLabel] != podsecurity.Default {
		t.Errorf("an invalid level gives %v, want the default level", ns.Labels)
	}
}
