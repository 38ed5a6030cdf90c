// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package catalog

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

// Records of plan-time checks (kubeplay_run's plan_check): a ConfigMap of
// the catalog namespace per check, its document signed with the catalog
// key together with its name and expiry, so that a record is trusted only
// under the name it was written for and until it expires. The caller names
// records and encodes their documents; the store keeps, verifies and
// expires them.
const (
	// ComponentCheckRecord is a record's managed.LabelComponent.
	ComponentCheckRecord = "plan-check"
	checkRecordData      = "result.json"
	checkRecordSig       = "signature"
	checkRecordExpires   = "kubeplay.io/expires"
	domainCheckRecord    = "kubeplay-plan-check-record"
)

// GetCheckRecord returns the document of record name. The error wraps
// ErrNotFound when there is none or it expired, and ErrTampered when its
// signature does not verify, so that it is not trusted.
func (s *Store) GetCheckRecord(ctx context.Context, name string) ([]byte, error) {
	key, err := s.Key(ctx)
	if err != nil {
		return nil, err
	}
	cm, err := s.kube.CoreV1().ConfigMaps(s.namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	doc, expires := cm.Data[checkRecordData], cm.Annotations[checkRecordExpires]
	if !key.Verify(cm.Data[checkRecordSig], domainCheckRecord, []byte(name), []byte(doc), []byte(expires)) {
		return nil, ErrTampered
	}
	if t, err := time.Parse(time.RFC3339, expires); err != nil || time.Now().After(t) {
		return nil, ErrNotFound
	}
	return []byte(doc), nil
}

// PutCheckRecord writes record name with doc, valid for ttl, replacing an
// older record (a ConfigMap of the name that kubeplay did not make is an
// error, *managed.NotOwnedError), and deletes expired records.
func (s *Store) PutCheckRecord(ctx context.Context, name string, doc []byte, ttl time.Duration) error {
	key, err := s.Key(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	expires := now.Add(ttl).UTC().Format(time.RFC3339)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: s.namespace,
			Labels:      managed.Labels(managed.LabelComponent, ComponentCheckRecord),
			Annotations: map[string]string{checkRecordExpires: expires},
		},
		Data: map[string]string{
			checkRecordData: string(doc),
			checkRecordSig:  key.Sign(domainCheckRecord, []byte(name), doc, []byte(expires)),
		},
	}
	cms := s.kube.CoreV1().ConfigMaps(s.namespace)
	_, err = write(ctx, cms, cm, CreateOrUpdate, func(dst, src *corev1.ConfigMap) { dst.Data = src.Data })
	if errors.Is(err, ErrNotDefinition) {
		return &managed.NotOwnedError{Kind: "ConfigMap", Namespace: s.namespace, Name: name, Labels: cm.Labels}
	}
	if err != nil {
		return err
	}
	// Expired records of plans never applied (kubeplay's only).
	if list, lerr := cms.List(ctx, metav1.ListOptions{LabelSelector: managed.Selector(managed.LabelComponent, ComponentCheckRecord)}); lerr == nil {
		for _, o := range list.Items {
			if t, perr := time.Parse(time.RFC3339, o.Annotations[checkRecordExpires]); perr == nil && now.After(t) {
				_ = cms.Delete(ctx, o.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &o.ResourceVersion}})
			}
		}
	}
	return nil
}

// DeleteCheckRecord deletes record name if kubeplay made it; a missing
// record, or a ConfigMap of the name that kubeplay did not make, is left
// without error.
func (s *Store) DeleteCheckRecord(ctx context.Context, name string) error {
	_, err := managed.DeleteOwned(ctx, s.kube.CoreV1().ConfigMaps(s.namespace), name, managed.LabelComponent, ComponentCheckRecord)
	return err
}
