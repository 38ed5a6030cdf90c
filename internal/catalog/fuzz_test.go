// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package catalog

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalogkey"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/credential"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
)

// fuzzStore is a store that verifies with a fixed key and never calls the
// API server: entry needs only the key.
func fuzzStore(t *testing.T) (*Store, *catalogkey.Key) {
	src, err := catalogkey.NewSource(nil, ns, []byte(strings.Repeat("f", catalogkey.MinLength)))
	if err != nil {
		t.Fatal(err)
	}
	k, _ := src.Key(context.Background(), false)
	return &Store{namespace: ns, keys: src}, k
}

// checkEntry decodes o as c does for every read, and fails when the entry
// claims no drift for content whose signature does not verify, or for
// content edited after it was signed.
func checkEntry[T any, O object, L runtime.Object](t *testing.T, c *codec[T, O, L], o O, sign bool, edit func(O)) {
	s, key := fuzzStore(t)
	if sign {
		a := o.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[c.digestKey] = key.Sign(c.domain, c.signed(o)...)
		o.SetAnnotations(a)
	}
	before := c.signed(o)
	edit(o)
	edited := !equalParts(before, c.signed(o))
	en, err := c.entry(context.Background(), s, o)
	if err != nil {
		if en.Drift != "" || en.Object != "" {
			t.Fatalf("an error came with an entry: %v, %+v", err, en)
		}
		return
	}
	verifies := key.Verify(o.GetAnnotations()[c.digestKey], c.domain, c.signed(o)...)
	if en.Drift == "" && (!verifies || (sign && edited)) {
		t.Fatalf("no drift for content that does not verify (signed %v, edited %v)", sign, edited)
	}
	if en.Drift != "" && verifies {
		t.Fatalf("drift %q for content that verifies", en.Drift)
	}
}

func equalParts(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if string(a[i]) != string(b[i]) {
			return false
		}
	}
	return true
}

func ownedMeta(name, component string, digest string) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: name, Namespace: ns, Labels: managed.Labels(managed.LabelComponent, component)}
	if digest != "" {
		m.Annotations = map[string]string{AnnotationDigest: digest, credential.AnnotationDigest: digest}
	}
	return m
}

func FuzzGroupConfigMap(f *testing.F) {
	good, _ := encodeGroup(Group{Name: "g", Namespace: "runs", Image: "i"}, ns)
	f.Add(good.Data[GroupSpecKey], good.Data[GroupPodKey], "", true, "")
	f.Add(good.Data[GroupSpecKey], good.Data[GroupPodKey], configMapDigest(good), false, "")
	f.Add(strings.Replace(good.Data[GroupSpecKey], `"image": "i"`, `"image": "i", "pod_security_level": "privileged", `+
		`"pod_spec_override": "{\"spec\":{\"hostPID\":true,\"volumes\":[{\"name\":\"r\",\"hostPath\":{\"path\":\"/\"}}]}}"`, 1),
		good.Data[GroupPodKey], "hmac-sha256:"+strings.Repeat("0", 64), false, "")
	f.Add(good.Data[GroupSpecKey], good.Data[GroupPodKey], "", true, "privileged: true")
	f.Add(`{"name":"g"}`, "", "hmac-sha256:", false, "")
	f.Add(`{"name":"other"}`, "x", "", true, "")
	f.Add("{", "\x00\xff", "plain", false, "\n")
	f.Add(`{"name":"g","warm_labels":{"a":-1},"max_ram":-9223372036854775808}`, "", "", true, "")
	f.Fuzz(func(t *testing.T, spec, pod, digest string, sign bool, tamper string) {
		cm := &corev1.ConfigMap{ObjectMeta: ownedMeta("g", managed.ComponentContainerGroup, digest),
			Data: map[string]string{GroupSpecKey: spec, GroupPodKey: pod}}
		checkEntry(t, groups, cm, sign, func(cm *corev1.ConfigMap) {
			if tamper != "" {
				cm.Data[GroupPodKey] += tamper
			}
		})
	})
}

func FuzzLabelPodTemplate(f *testing.F) {
	good, _, _ := labelTemplate(podLabelForFuzz(), ns)
	spec := good.Annotations[AnnotationLabelSpec]
	f.Add(spec, "i", "", "", "", true, "")
	f.Add(spec, "i", podTemplateDigest(good), "", "", false, "")
	f.Add(`{"name":"l","type":"pod","image":"evil","privileged":true}`, "evil", "", "", "", false, "")
	f.Add(spec, "i", "", AnnotationLabelType, "namespace", true, "")
	f.Add(spec, "i", "", "kubeplay.io/extra", "x", true, "evil")
	f.Add(`{"name":"l","type":"namespace","labels":{"pod-security.kubernetes.io/enforce":"privileged"}}`, "", "", "", "", true, "")
	f.Add(`{"name":"l","type":"pod","spec":"{\"hostNetwork\":true}"}`, "", "hmac-sha256:zz", "", "", false, "")
	f.Add("{", "", "", "", "", true, "")
	f.Fuzz(func(t *testing.T, spec, image, digest, annKey, annValue string, sign bool, tamper string) {
		pt := &corev1.PodTemplate{ObjectMeta: ownedMeta("l", managed.ComponentNodeLabel, digest)}
		if pt.Annotations == nil {
			pt.Annotations = map[string]string{}
		}
		pt.Annotations[AnnotationLabelSpec] = spec
		if annKey != "" && annKey != AnnotationDigest {
			pt.Annotations[annKey] = annValue
		}
		pt.Template.Spec.Containers = []corev1.Container{{Name: "worker", Image: image}}
		checkEntry(t, labels, pt, sign, func(pt *corev1.PodTemplate) {
			if tamper != "" {
				pt.Template.Spec.Containers[0].Image += tamper
			}
		})
	})
}

func FuzzCredentialSecret(f *testing.F) {
	good := bearer("awx").Spec.Secret(ns, credential.Report{}, bearer("").CheckedAt)
	f.Add("kind", "bearer_token", "host", "https://h:1", "", true, "")
	f.Add("kind", "bearer_token", "host", "https://h:1", credential.Digest(good.Data), false, "")
	f.Add("kind", "kubeconfig", "allow-exec-plugin", "true", "", true, "")
	f.Add("kind", "kubeconfig", "kubeconfig", "users:\n- user:\n    exec:\n      command: sh\n", "hmac-sha256:", false, "")
	f.Add("kind", "bearer_token", "verify-ssl", "maybe", "", true, "https://evil:1")
	f.Add("", "", "", "", "", false, "")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2, digest string, sign bool, tamper string) {
		sec := &corev1.Secret{ObjectMeta: ownedMeta("awx", managed.ComponentCredential, digest),
			Data: map[string][]byte{"host": []byte("https://h:1"), "token": []byte("t")}}
		sec.Data[k1] = []byte(v1)
		sec.Data[k2] = []byte(v2)
		checkEntry(t, credentials, sec, sign, func(sec *corev1.Secret) {
			if tamper != "" {
				sec.Data["host"] = []byte(tamper)
			}
		})
	})
}

func podLabelForFuzz() podspec.Label {
	return podspec.Label{Name: "l", Type: podspec.TypePod, Image: "i"}
}
