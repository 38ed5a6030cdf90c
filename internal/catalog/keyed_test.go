// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package catalog

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalogkey"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/credential"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
)

// hostileOverride is what an attacker with ConfigMap write access puts in a
// group: a privileged pod in the host's PID namespace with / mounted.
const hostileOverride = `{"spec":{"hostPID":true,"volumes":[{"name":"root","hostPath":{"path":"/"}}]}}`

// An edit whose author recomputes the plain digest is still drift: the
// digest is keyed, and the editor does not hold the key (finding 2).
func TestRecomputedDigestIsDrift(t *testing.T) {
	ctx := context.Background()
	s, kube := newStore()
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
	sec.Data["host"] = []byte("https://evil:1")
	sec.Annotations[credential.AnnotationDigest] = credential.Digest(sec.Data)
	_, _ = core.Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{})

	cm, _ := core.ConfigMaps(ns).Get(ctx, "g", metav1.GetOptions{})
	cm.Data[GroupSpecKey] = strings.Replace(cm.Data[GroupSpecKey], `"name": "g",`,
		`"name": "g", "pod_security_level": "privileged", "pod_spec_override": `+quoteJSON(hostileOverride)+`,`, 1)
	cm.Annotations[AnnotationDigest] = plainDigestOf(cm)
	_, _ = core.ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})

	pt, _ := core.PodTemplates(ns).Get(ctx, "l", metav1.GetOptions{})
	pt.Annotations[AnnotationLabelSpec] = `{"name":"l","type":"pod","image":"evil","privileged":true}`
	pt.Annotations[AnnotationDigest] = plainTemplateDigest(pt)
	_, _ = core.PodTemplates(ns).Update(ctx, pt, metav1.UpdateOptions{})

	c, err := s.GetCredential(ctx, "awx")
	if err != nil || c.Drift == "" {
		t.Errorf("credential with a recomputed digest: drift %q, %v", c.Drift, err)
	}
	g, err := s.GetGroup(ctx, "g")
	if err != nil || g.Drift == "" {
		t.Errorf("group with a recomputed digest: drift %q, %v (level %q)", g.Drift, err, g.Value.PodSecurityLevel)
	}
	l, err := s.GetLabel(ctx, "l")
	if err != nil || l.Drift == "" {
		t.Errorf("label with a recomputed digest: drift %q, %v", l.Drift, err)
	}
}

func quoteJSON(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
}

// plainDigestOf and plainTemplateDigest compute the unkeyed digest anyone
// could compute before the catalog was signed.
func plainDigestOf(cm *corev1.ConfigMap) string { return configMapDigest(cm) }

func plainTemplateDigest(pt *corev1.PodTemplate) string { return podTemplateDigest(pt) }

const sigMismatch = " (its signature does not match its content)"

// A plain digest kubeplay wrote before it signed is drift that says so.
func TestUnsignedDigestIsDrift(t *testing.T) {
	cm, err := encodeGroup(Group{Name: "g", Namespace: "runs", Image: "i"}, ns)
	if err != nil {
		t.Fatal(err)
	}
	cm.Annotations = map[string]string{AnnotationDigest: configMapDigest(cm)}
	s, _ := newStore(cm)
	ctx := context.Background()
	if err := s.EnsureNamespace(ctx); err != nil {
		t.Fatal(err)
	}
	g, err := s.GetGroup(ctx, "g")
	if err != nil || !strings.Contains(g.Drift, "written before kubeplay signed its catalog") ||
		!strings.Contains(g.Drift, "apply its definition again") {
		t.Fatalf("drift = %q, %v", g.Drift, err)
	}
	if _, err := s.TrustedGroup(ctx, "g"); !errors.Is(err, ErrTampered) {
		t.Fatalf("TrustedGroup: %v, want ErrTampered", err)
	}
	if _, err := s.PutGroup(ctx, g.Value, CreateOrUpdate); err != nil {
		t.Fatal(err)
	}
	if e, err := s.TrustedGroup(ctx, "g"); err != nil || e.Value.Image != "i" {
		t.Errorf("after the repair: %+v, %v", e, err)
	}
}

// A reader without the key Secret: a missing definition is still plain
// not found, and one that exists cannot be verified, which is drift.
func TestReaderWithoutKey(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore()
	if _, err := s.TrustedGroup(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing group: %v, want ErrNotFound", err)
	}
	if l, err := s.ListGroups(ctx); err != nil || len(l) != 0 {
		t.Errorf("empty list: %v, %v", l, err)
	}
	cm, _ := encodeGroup(Group{Name: "g", Namespace: "runs"}, ns)
	cm.Annotations = map[string]string{AnnotationDigest: "hmac-sha256:00"}
	s, _ = newStore(cm)
	g, err := s.GetGroup(ctx, "g")
	if err != nil || !strings.Contains(g.Drift, "cannot be verified") || !strings.Contains(g.Drift, catalogkey.SecretName) {
		t.Errorf("drift = %q, %v", g.Drift, err)
	}
	if _, err := s.Key(ctx); !errors.Is(err, catalogkey.ErrMissing) {
		t.Errorf("Key: %v, want ErrMissing", err)
	}
}

// With a configured key no Secret is made or read, and a store of another
// key sees the first one's definitions as changed.
func TestConfiguredKey(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	s := keyedStore(t, kube, "k")
	if err := s.EnsureNamespace(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutLabel(ctx, podspec.Label{Name: "l", Type: podspec.TypePod, Image: "i"}, NewOnly); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TrustedLabel(ctx, "l"); err != nil {
		t.Fatalf("own label: %v", err)
	}
	if _, err := kube.CoreV1().Secrets(ns).Get(ctx, catalogkey.SecretName, metav1.GetOptions{}); err == nil {
		t.Error("a key Secret was made although the key is configured")
	}
	_, err := keyedStore(t, kube, "o").TrustedLabel(ctx, "l")
	var ce *Error
	if !errors.Is(err, ErrTampered) || !errors.As(err, &ce) || ce.Kind != KindLabel ||
		!strings.HasPrefix(err.Error(), `node label "l" is refused: PodTemplate kp-catalog/l was changed outside kubeplay`) {
		t.Errorf("another key: %v", err)
	}
	if k, err := s.Key(ctx); err != nil || k == nil {
		t.Errorf("Key: %v", err)
	}
}

// A signed credential copied under another credential's name keeps its
// signature but must not verify there: otherwise whoever can write Secrets
// in the catalog could swap where two credentials point.
func TestSignedCopyUnderAnotherNameIsDrift(t *testing.T) {
	ctx := context.Background()
	s, kube := newStore()
	secrets := kube.CoreV1().Secrets(ns)
	for _, name := range []string{"prod", "lab"} {
		if _, err := s.PutCredential(ctx, bearer(name), NewOnly); err != nil {
			t.Fatal(err)
		}
	}
	lab, _ := secrets.Get(ctx, "lab", metav1.GetOptions{})
	prod, _ := secrets.Get(ctx, "prod", metav1.GetOptions{})
	prod.Data, prod.Annotations = lab.Data, lab.Annotations
	if _, err := secrets.Update(ctx, prod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if c, err := s.GetCredential(ctx, "prod"); err != nil || c.Drift == "" {
		t.Errorf("lab's signed content under the name prod: drift %q, %v", c.Drift, err)
	}
	if c, err := s.GetCredential(ctx, "lab"); err != nil || c.Drift != "" {
		t.Errorf("lab itself: drift %q, %v", c.Drift, err)
	}
}
