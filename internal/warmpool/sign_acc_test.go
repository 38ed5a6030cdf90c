// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package warmpool_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/warmpool"
)

// TestAccSignReplacedPod: Sign patches the pod it created naming its UID;
// the API server refuses that patch on another pod that took the name
// since, which stays unsigned. The unit test TestSign assumes this.
func TestAccSignReplacedPod(t *testing.T) {
	kube, ns := testEnv(t)
	ctx := context.Background()
	pods := kube.CoreV1().Pods(ns)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "signed", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: impostorImage}}}}
	first, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	o := warmpool.Owner{Kind: warmpool.KindWarm, Group: "g", Revision: "r"}
	signed, err := warmpool.Sign(ctx, kube, testKey, o, first)
	if err != nil {
		t.Fatalf("signing the pod created: %v", err)
	}
	if err := warmpool.Verify(testKey, o, signed); err != nil {
		t.Fatalf("the signed pod: %v", err)
	}
	if err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	second, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := warmpool.Sign(ctx, kube, testKey, o, first); !apierrors.IsInvalid(err) {
		t.Errorf("signing the first pod after another took its name: %v; want the API server's refusal", err)
	}
	got, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.UID != second.UID || got.Annotations[warmpool.AnnotationSignature] != "" {
		t.Errorf("the second pod (%s) was signed: %v", got.UID, got.Annotations)
	}
}
