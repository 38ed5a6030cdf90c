// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package catalog

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalogkey"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/credential"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
)

const ns = "kp-catalog"

func newStore(objs ...runtime.Object) (*Store, *fake.Clientset) {
	kube := fake.NewClientset(objs...)
	return New(kube, ns, nil), kube
}

// keyedStore is a store on kube whose catalog_key is fill repeated: it
// signs with that key and makes no key Secret.
func keyedStore(t *testing.T, kube *fake.Clientset, fill string) *Store {
	t.Helper()
	src, err := catalogkey.NewSource(kube, ns, []byte(strings.Repeat(fill, catalogkey.MinLength)))
	if err != nil {
		t.Fatal(err)
	}
	return New(kube, ns, src)
}

func bearer(name string) Credential {
	return Credential{
		Spec: credential.Spec{Name: name, Kind: credential.KindBearerToken, Host: "https://h:1", BearerToken: "t",
			VerifySSL: true, Namespace: "default", Description: "d"},
		Report:    credential.Report{ServerVersion: "v1.31.0", Username: "u", Groups: []string{"g"}, Namespace: "default"},
		CheckedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
	}
}

func TestCredentialRoundTrip(t *testing.T) {
	s, _ := newStore()
	ctx := context.Background()
	if err := s.CheckAbsent(ctx, KindCredential, "awx"); err != nil {
		t.Fatalf("CheckAbsent of a free name: %v", err)
	}
	put, err := s.PutCredential(ctx, bearer("awx"), NewOnly)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.GetCredential(ctx, "awx")
	if err != nil {
		t.Fatal(err)
	}
	c := got.Value
	if c.Spec.BearerToken != "t" || c.Spec.Description != "d" || c.Report.Username != "u" || !c.CheckedAt.Equal(bearer("").CheckedAt) {
		t.Errorf("read back %+v", c)
	}
	if got.Object != "Secret kp-catalog/awx" || got.Drift != "" || got.Digest == "" || got.Digest != put.Digest {
		t.Errorf("entry = %+v, put %+v", got, put)
	}
	if got.Digest != c.Spec.Digest() {
		t.Errorf("the stored digest %s is not the spec's %s: clients keyed before the write would not be found after", got.Digest, c.Spec.Digest())
	}
	list, err := s.ListCredentials(ctx)
	if err != nil || len(list) != 1 || list[0].Value.Spec.Name != "awx" {
		t.Errorf("list = %+v, %v", list, err)
	}
}

func TestSentinels(t *testing.T) {
	s, _ := newStore()
	ctx := context.Background()
	_, err := s.GetCredential(ctx, "nope")
	var e *Error
	if !errors.Is(err, ErrNotFound) || !errors.As(err, &e) || e.Kind != KindCredential {
		t.Fatalf("missing credential: %v", err)
	}
	if want := `credential "nope" does not exist in catalog namespace "kp-catalog"`; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
	if _, err := s.GetGroup(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing group: %v", err)
	}
	if _, err := s.GetLabel(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing label: %v", err)
	}
	if _, err := s.PutCredential(ctx, bearer("awx"), NewOnly); err != nil {
		t.Fatal(err)
	}
	_, err = s.PutCredential(ctx, bearer("awx"), NewOnly)
	if !errors.Is(err, ErrAlreadyExists) || err.Error() != "Secret kp-catalog/awx already exists" {
		t.Errorf("second create: %v", err)
	}
	if err := s.CheckAbsent(ctx, KindCredential, "awx"); !errors.Is(err, ErrAlreadyExists) {
		t.Errorf("CheckAbsent of a taken name: %v", err)
	}
	if err := s.CheckAbsent(ctx, Kind("bogus"), "awx"); err == nil {
		t.Error("CheckAbsent of an unknown kind succeeded")
	}
}

func TestAPIErrorsAreWrapped(t *testing.T) {
	s, kube := newStore()
	boom := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "g", errors.New("no"))
	kube.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, boom })
	_, err := s.GetGroup(context.Background(), "g")
	var e *Error
	if !errors.As(err, &e) || e.Op != "reading" || !apierrors.IsForbidden(err) || errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %#v", err)
	}
	if !strings.HasPrefix(err.Error(), "reading ConfigMap kp-catalog/g: ") {
		t.Errorf("error = %q", err)
	}
	if err := s.CheckAbsent(context.Background(), KindGroup, "g"); !apierrors.IsForbidden(err) {
		t.Errorf("CheckAbsent hid a read failure: %v", err)
	}
}

func TestDrift(t *testing.T) {
	s, kube := newStore()
	ctx := context.Background()
	core := kube.CoreV1()
	if _, err := s.PutCredential(ctx, bearer("awx"), NewOnly); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutGroup(ctx, Group{Name: "g", Namespace: "runs", Image: "i"}, NewOnly); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutLabel(ctx, podspec.Label{Name: "l", Type: podspec.TypePod, Image: "i"}, NewOnly); err != nil {
		t.Fatal(err)
	}
	sec, _ := core.Secrets(ns).Get(ctx, "awx", metav1.GetOptions{})
	sec.Data["token"] = []byte("tampered")
	_, _ = core.Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{})
	cm, _ := core.ConfigMaps(ns).Get(ctx, "g", metav1.GetOptions{})
	cm.Data[GroupPodKey] = "edited"
	_, _ = core.ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
	pt, _ := core.PodTemplates(ns).Get(ctx, "l", metav1.GetOptions{})
	pt.Template.Spec.Containers[0].Image = "edited"
	_, _ = core.PodTemplates(ns).Update(ctx, pt, metav1.UpdateOptions{})

	c, err := s.GetCredential(ctx, "awx")
	if err != nil || c.Drift != "Secret kp-catalog/awx was changed outside kubeplay"+sigMismatch {
		t.Errorf("credential drift = %q, %v", c.Drift, err)
	}
	g, err := s.GetGroup(ctx, "g")
	if err != nil || g.Drift != "ConfigMap kp-catalog/g was changed outside kubeplay"+sigMismatch || g.Rendered != "edited" {
		t.Errorf("group drift = %q, rendered %q, %v", g.Drift, g.Rendered, err)
	}
	l, err := s.GetLabel(ctx, "l")
	if err != nil || l.Drift != "PodTemplate kp-catalog/l was changed outside kubeplay"+sigMismatch {
		t.Errorf("label drift = %q, %v", l.Drift, err)
	}
	// Writing again repairs it.
	if _, err := s.PutLabel(ctx, l.Value, CreateOrUpdate); err != nil {
		t.Fatal(err)
	}
	if l, err := s.GetLabel(ctx, "l"); err != nil || l.Drift != "" {
		t.Errorf("after the repair: drift %q, %v", l.Drift, err)
	}
	// A metadata label added by someone else is not drift.
	pt, _ = core.PodTemplates(ns).Get(ctx, "l", metav1.GetOptions{})
	pt.Labels["team"] = "ops"
	_, _ = core.PodTemplates(ns).Update(ctx, pt, metav1.UpdateOptions{})
	if l, err := s.GetLabel(ctx, "l"); err != nil || l.Drift != "" {
		t.Errorf("after a foreign label: drift %q, %v", l.Drift, err)
	}
}

// An object without a signature is drift: removing the annotation must not
// hide an edit.
func TestNoDigestIsDrift(t *testing.T) {
	cm, err := encodeGroup(Group{Name: "g", Namespace: "runs"}, ns)
	if err != nil {
		t.Fatal(err)
	}
	cm.Data[GroupPodKey] = "anything"
	s, _ := newStore(cm)
	g, err := s.GetGroup(context.Background(), "g")
	if want := "ConfigMap kp-catalog/g has lost its digest annotation kubeplay.io/digest"; err != nil || g.Drift != want {
		t.Errorf("drift = %q, %v; want %q", g.Drift, err, want)
	}
}

// The API server defaults a PodTemplate's pod spec: the digest recorded is
// that of what it stored, so reading it back is no drift.
func TestLabelDigestAfterDefaulting(t *testing.T) {
	s, kube := newStore()
	writes := 0
	kube.PrependReactor("*", "podtemplates", func(a k8stesting.Action) (bool, runtime.Object, error) {
		var pt *corev1.PodTemplate
		if w, ok := a.(interface{ GetObject() runtime.Object }); ok {
			pt, _ = w.GetObject().(*corev1.PodTemplate)
		}
		if pt != nil {
			writes++
			for i := range pt.Template.Spec.Containers {
				pt.Template.Spec.Containers[i].TerminationMessagePath = "/dev/termination-log"
			}
			pt.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
		}
		return false, nil, nil
	})
	ctx := context.Background()
	l := podspec.Label{Name: "l", Type: podspec.TypePod, Image: "i"}
	if _, err := s.PutLabel(ctx, l, NewOnly); err != nil {
		t.Fatal(err)
	}
	if writes != 2 {
		t.Errorf("%d writes, want 2: the create and the digest of what the server stored", writes)
	}
	got, err := s.GetLabel(ctx, "l")
	if err != nil || got.Drift != "" {
		t.Fatalf("drift after a defaulted write = %q, %v", got.Drift, err)
	}
	if _, err := s.PutLabel(ctx, l, CreateOrUpdate); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetLabel(ctx, "l"); err != nil || got.Drift != "" {
		t.Fatalf("drift after a defaulted update = %q, %v", got.Drift, err)
	}
}

func TestNotDefinitions(t *testing.T) {
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns}, Data: map[string][]byte{"password": []byte("p")}}
	badGroup := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: ns,
		Labels: managed.Labels(managed.LabelComponent, managed.ComponentContainerGroup)}, Data: map[string]string{GroupSpecKey: "{"}}
	renamed, _, err := labelTemplate(podspec.Label{Name: "other", Type: podspec.TypePod, Image: "i"}, ns)
	if err != nil {
		t.Fatal(err)
	}
	renamed.Name = "l"
	badKind := bearer("k").Spec.Secret(ns, credential.Report{}, time.Time{})
	badKind.Data["kind"] = []byte("password")
	s, kube := newStore(foreign, badGroup, renamed, badKind)
	ctx := context.Background()
	cases := []struct {
		get    func() error
		reason string
	}{
		{func() error { _, err := s.GetCredential(ctx, "db"); return err }, "label kubeplay.io/component=credential missing"},
		{func() error { _, err := s.GetCredential(ctx, "k"); return err }, `unknown credential kind "password"`},
		{func() error { _, err := s.GetGroup(ctx, "g"); return err }, "its group.json is missing or invalid"},
		{func() error { _, err := s.GetLabel(ctx, "l"); return err }, `its kubeplay.io/label-spec annotation names label "other"`},
	}
	for _, c := range cases {
		err := c.get()
		if !errors.Is(err, ErrNotDefinition) || !strings.Contains(err.Error(), c.reason) || !strings.Contains(err.Error(), "is not a kubeplay") {
			t.Errorf("err = %v, want ErrNotDefinition saying %q", err, c.reason)
		}
	}
	// A foreign object is neither overwritten nor deleted.
	cred := bearer("db")
	if _, err := s.PutCredential(ctx, cred, CreateOrUpdate); !errors.Is(err, ErrNotDefinition) {
		t.Errorf("overwriting a foreign Secret: %v", err)
	}
	if err := s.DeleteCredential(ctx, "db"); !errors.Is(err, ErrNotDefinition) {
		t.Errorf("deleting a foreign Secret: %v", err)
	}
	if sec, err := kube.CoreV1().Secrets(ns).Get(ctx, "db", metav1.GetOptions{}); err != nil || string(sec.Data["password"]) != "p" {
		t.Errorf("the foreign Secret changed: %v, %v", sec, err)
	}
	// Lists skip what does not decode.
	if groups, err := s.ListGroups(ctx); err != nil || len(groups) != 0 {
		t.Errorf("groups = %+v, %v", groups, err)
	}
	if creds, err := s.ListCredentials(ctx); err != nil || len(creds) != 0 {
		t.Errorf("credentials = %+v, %v", creds, err)
	}
}

func TestUpdateKeepsOthersMetadata(t *testing.T) {
	s, kube := newStore()
	ctx := context.Background()
	g := Group{Name: "g", Namespace: "runs", Image: "a"}
	if _, err := s.PutGroup(ctx, g, NewOnly); err != nil {
		t.Fatal(err)
	}
	cms := kube.CoreV1().ConfigMaps(ns)
	cm, _ := cms.Get(ctx, "g", metav1.GetOptions{})
	cm.Finalizers = []string{"example.com/keep"}
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	g.Image = "b"
	e, err := s.PutGroup(ctx, g, CreateOrUpdate)
	if err != nil || e.Value.Image != "b" || !strings.Contains(e.Rendered, "image: b") {
		t.Fatalf("update: %+v, %v", e, err)
	}
	cm, _ = cms.Get(ctx, "g", metav1.GetOptions{})
	if len(cm.Finalizers) != 1 || cm.Labels[managed.LabelContainerGroup] != "g" {
		t.Errorf("metadata after the update: %+v", cm.ObjectMeta)
	}
	// CreateOrUpdate creates what is missing.
	if _, err := s.PutGroup(ctx, Group{Name: "h", Namespace: "runs"}, CreateOrUpdate); err != nil {
		t.Fatal(err)
	}
	if list, err := s.ListGroups(ctx); err != nil || len(list) != 2 {
		t.Errorf("groups = %d, %v", len(list), err)
	}
}

func TestDelete(t *testing.T) {
	s, kube := newStore()
	ctx := context.Background()
	if _, err := s.PutLabel(ctx, podspec.Label{Name: "l", Type: podspec.TypeNamespace}, NewOnly); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteLabel(ctx, "l"); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().PodTemplates(ns).Get(ctx, "l", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the PodTemplate survived: %v", err)
	}
	if err := s.DeleteLabel(ctx, "l"); err != nil {
		t.Errorf("deleting what is gone: %v", err)
	}
	if err := s.DeleteGroup(ctx, "nope"); err != nil {
		t.Errorf("deleting a missing group: %v", err)
	}
	if err := s.DeleteCredential(ctx, "nope"); err != nil {
		t.Errorf("deleting a missing credential: %v", err)
	}
}

func TestEnsureNamespaceOnce(t *testing.T) {
	existing := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	s, kube := newStore(existing)
	ctx := context.Background()
	for range 2 {
		if err := s.EnsureNamespace(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The namespace, and the key Secret read and created.
	if n := len(kube.Actions()); n != 3 {
		t.Errorf("%d API calls for two ensures, want 3", n)
	}
	if _, err := kube.CoreV1().Secrets(ns).Get(ctx, catalogkey.SecretName, metav1.GetOptions{}); err != nil {
		t.Errorf("the key Secret: %v", err)
	}
	s2, kube2 := newStore()
	kube2.PrependReactor("create", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, ns, errors.New("no"))
	})
	if err := s2.EnsureNamespace(ctx); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `creating catalog namespace "kp-catalog"`) {
		t.Errorf("err = %v", err)
	}
}

func TestLabelsRender(t *testing.T) {
	s, _ := newStore()
	ctx := context.Background()
	nsLabel := podspec.Label{Name: "sandbox", Type: podspec.TypeNamespace, Labels: map[string]string{"team": "ci"}}
	y, err := RenderLabel(nsLabel)
	if err != nil || !strings.Contains(y, "kind: Namespace") || !strings.Contains(y, "name: sandbox-{run.id}") || !strings.Contains(y, "team: ci") {
		t.Fatalf("namespace label YAML:\n%s\n%v", y, err)
	}
	pod := podspec.Label{Name: "py", Type: podspec.TypePod, Image: "i", PythonPath: "/usr/bin/python3", ShellType: "sh",
		DynamicLabels: map[string]string{"run": "{run.id}"}}
	e, err := s.PutLabel(ctx, pod, NewOnly)
	if err != nil || !strings.Contains(e.Rendered, "image: i") {
		t.Fatalf("pod label: %+v, %v", e, err)
	}
	list, err := s.ListLabels(ctx)
	if err != nil || len(list) != 1 || list[0].Value.PythonPath != "/usr/bin/python3" || list[0].Value.DynamicLabels["run"] != "{run.id}" {
		t.Errorf("labels = %+v, %v", list, err)
	}
	if _, err := RenderLabel(podspec.Label{Name: "bad", Type: podspec.TypePod, Spec: "containers: ["}); err == nil {
		t.Error("a label whose spec does not parse rendered")
	}
	if _, err := s.PutLabel(ctx, podspec.Label{Name: "bad", Type: podspec.TypePod, Spec: "containers: ["}, NewOnly); err == nil {
		t.Error("a label whose spec does not parse was stored")
	}
}

func TestGroup(t *testing.T) {
	runs, ram := int64(2), int64(512)
	g := Group{Name: "g", Namespace: "runs", Image: "i", MaxConcurrentRuns: &runs, MaxRAM: &ram, MaxCores: "1",
		Labels: map[string]string{"team": "ci"}, PodSpecOverride: "spec:\n  nodeSelector: {disk: ssd}\n"}
	if l := g.Limits(); l.Empty() || *l.MaxConcurrentRuns != 2 || l.MaxCores != "1" {
		t.Errorf("limits = %+v", l)
	}
	if pg := g.PodGroup(); pg.Override != g.PodSpecOverride || pg.Labels["team"] != "ci" || pg.Namespace != "runs" {
		t.Errorf("pod group = %+v", pg)
	}
	y, err := g.RenderPod()
	if err != nil || !strings.Contains(y, "disk: ssd") || !strings.Contains(y, "kubeplay.io/container-group: g") {
		t.Fatalf("pod:\n%s\n%v", y, err)
	}
	g.PodSpecOverride = "kind: Deployment\napiVersion: apps/v1\n"
	if _, err := g.RenderPod(); err == nil {
		t.Error("a Deployment override rendered")
	}
	s, _ := newStore()
	if _, err := s.PutGroup(context.Background(), g, NewOnly); err == nil || !strings.Contains(err.Error(), `encoding container group "g"`) {
		t.Errorf("storing a group whose pod does not render: %v", err)
	}
}

// A credential is used to connect only while its Secret holds what kubeplay
// wrote: an edit, or a digest removed to hide one, is refused.
func TestTrustedCredential(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name, want string
		edit       func(*corev1.Secret)
	}{
		{"edited", "Secret kp-catalog/awx was changed outside kubeplay" + sigMismatch, func(s *corev1.Secret) { s.Data["host"] = []byte("https://evil:1") }},
		{"digest removed", "Secret kp-catalog/awx has lost its digest annotation kubeplay.io/secret-digest",
			func(s *corev1.Secret) { delete(s.Annotations, credential.AnnotationDigest) }},
		{"opt-in added", "Secret kp-catalog/awx was changed outside kubeplay" + sigMismatch, func(s *corev1.Secret) { s.Data["allow-exec-plugin"] = []byte("true") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, kube := newStore()
			if _, err := s.PutCredential(ctx, bearer("awx"), NewOnly); err != nil {
				t.Fatal(err)
			}
			if e, err := s.TrustedCredential(ctx, "awx"); err != nil || e.Value.Spec.Host != "https://h:1" {
				t.Fatalf("untouched: %v", err)
			}
			sec, err := kube.CoreV1().Secrets(ns).Get(ctx, "awx", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			c.edit(sec)
			if _, err := kube.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			e, err := s.TrustedCredential(ctx, "awx")
			var ce *Error
			if !errors.Is(err, ErrTampered) || !errors.As(err, &ce) || ce.Name != "awx" || ce.Reason != c.want {
				t.Fatalf("err = %v, want ErrTampered with reason %q", err, c.want)
			}
			if e.Value.Spec.Host != "" {
				t.Errorf("a refused credential came back with data: %+v", e.Value.Spec)
			}
			if !strings.HasPrefix(err.Error(), `credential "awx" is refused: `+c.want) {
				t.Errorf("message %q", err)
			}
			// GetCredential still reads it, with the drift, for the resource
			// that repairs it; writing it again repairs it.
			if g, err := s.GetCredential(ctx, "awx"); err != nil || g.Drift != c.want {
				t.Errorf("GetCredential: drift %q, %v", g.Drift, err)
			}
			if _, err := s.PutCredential(ctx, bearer("awx"), CreateOrUpdate); err != nil {
				t.Fatal(err)
			}
			if _, err := s.TrustedCredential(ctx, "awx"); err != nil {
				t.Errorf("after the repair: %v", err)
			}
		})
	}
	s, _ := newStore()
	if _, err := s.TrustedCredential(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing: %v, want ErrNotFound", err)
	}
}

func TestNamespaceUID(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore()
	if uid, err := s.NamespaceUID(ctx); err == nil || !apierrors.IsNotFound(err) || uid != "" {
		t.Errorf("NamespaceUID of a missing namespace = %q, %v; want an error that wraps NotFound", uid, err)
	}
	s, _ = newStore(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, UID: "0b6f-uid"}})
	if uid, err := s.NamespaceUID(ctx); err != nil || uid != "0b6f-uid" {
		t.Errorf("NamespaceUID = %q, %v; want 0b6f-uid", uid, err)
	}
}
