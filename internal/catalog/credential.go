// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package catalog

import (
	"context"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/credential"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

// Credential is a credential with the report of its last check.
type Credential struct {
	Spec   credential.Spec
	Report credential.Report
	// CheckedAt is when it was last checked; zero when the Secret does not say.
	CheckedAt time.Time
}

var credentials = &codec[Credential, *corev1.Secret, *corev1.SecretList]{
	kind:      KindCredential,
	resource:  "Secret",
	component: managed.ComponentCredential,
	client: func(kube kubernetes.Interface, ns string) client[*corev1.Secret, *corev1.SecretList] {
		return kube.CoreV1().Secrets(ns)
	},
	items: func(l *corev1.SecretList) []*corev1.Secret { return pointers(l.Items) },
	encode: func(c Credential, ns string) (*corev1.Secret, error) {
		return c.Spec.Secret(ns, c.Report, c.CheckedAt), nil
	},
	decode: func(sec *corev1.Secret) (Credential, string, error) {
		spec, _, err := credential.FromSecret(sec)
		if err != nil {
			return Credential{}, "", err
		}
		rep, at := credential.ReportFromAnnotations(sec.Annotations)
		checked, _ := time.Parse(time.RFC3339, at)
		return Credential{Spec: spec, Report: rep, CheckedAt: checked}, "", nil
	},
	digestKey: credential.AnnotationDigest,
	domain:    domainCredential,
	parts:     secretParts,
	digest:    func(sec *corev1.Secret) string { return credential.Digest(sec.Data) },
	assign: func(dst, src *corev1.Secret) {
		dst.Data, dst.StringData, dst.Type = src.Data, nil, src.Type
	},
}

// secretParts are what a credential's signature covers: its data, which is
// what connects. Annotations hold the description and the last check's
// report, which connect nowhere.
func secretParts(sec *corev1.Secret) [][]byte {
	keys := slices.Sorted(maps.Keys(sec.Data))
	parts := make([][]byte, 0, 2*len(keys))
	for _, k := range keys {
		parts = append(parts, []byte(k), sec.Data[k])
	}
	return parts
}

// GetCredential reads the credential called name.
func (s *Store) GetCredential(ctx context.Context, name string) (Entry[Credential], error) {
	return get(ctx, s, credentials, name)
}

// TrustedCredential reads the credential called name to connect with it. One
// whose Secret was changed outside kubeplay is refused with an *Error that
// wraps ErrTampered: whoever changed it could point kubeplay anywhere, or
// make it run a kubeconfig's programs. Writing the credential again from its
// definition repairs it.
func (s *Store) TrustedCredential(ctx context.Context, name string) (Entry[Credential], error) {
	e, err := s.GetCredential(ctx, name)
	return trusted(s, KindCredential, name, e, err)
}

// PutCredential stores c, checked at c.CheckedAt.
func (s *Store) PutCredential(ctx context.Context, c Credential, mode Mode) (Entry[Credential], error) {
	return put(ctx, s, credentials, c, c.Spec.Name, mode)
}

// DeleteCredential deletes the credential called name; one already gone is
// deleted. An object of the name that is not a credential is left alone and
// reported with ErrNotDefinition.
func (s *Store) DeleteCredential(ctx context.Context, name string) error {
	return remove(ctx, s, credentials, name)
}

// ListCredentials returns every credential.
func (s *Store) ListCredentials(ctx context.Context) ([]Entry[Credential], error) {
	return list(ctx, s, credentials)
}

func pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}
