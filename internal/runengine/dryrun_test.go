// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
)

// dryRunFake answers creates as a dry run does: the object back, nothing
// stored; refuse, when set, refuses creates of that resource.
func dryRunFake(t *testing.T, refuse string, err error) (*fakeCluster, *[]k8stesting.CreateActionImpl) {
	f := newFake(t)
	dryRuns := &once{}
	f.e.dryRuns = dryRuns.do
	var seen []k8stesting.CreateActionImpl
	f.kube.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		c, ok := a.(k8stesting.CreateActionImpl)
		if !ok {
			t.Errorf("create reactor got a %T", a)
			return true, nil, fmt.Errorf("create reactor got a %T", a)
		}
		seen = append(seen, c)
		if a.GetResource().Resource == refuse {
			return true, nil, err
		}
		return true, c.GetObject(), nil
	})
	return f, &seen
}

func TestDryRunOncePerPod(t *testing.T) {
	f, seen := dryRunFake(t, "", nil)
	pod, err := RenderPod(testGroup(), nil, RunInfo{}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := f.e.DryRun(t.Context(), testGroup(), nil, pod); err != nil {
			t.Fatal(err)
		}
	}
	if len(*seen) != 1 {
		t.Fatalf("%d creates for one pod, want 1", len(*seen))
	}
	c := (*seen)[0]
	created, ok := c.GetObject().(*corev1.Pod)
	if !ok {
		t.Fatalf("created a %T, want a pod", c.GetObject())
	}
	if created.Labels[managed.LabelRun] != "dry-run" || len(c.CreateOptions.DryRun) != 1 || c.CreateOptions.DryRun[0] != metav1.DryRunAll {
		t.Errorf("create %v with options %+v", created.Labels, c.CreateOptions)
	}
	if _, ok := pod.Labels[managed.LabelRun]; ok {
		t.Error("DryRun changed the caller's pod")
	}
	// A namespace label is another dry run: pod and namespace.
	l := &podspec.Label{Name: "sandbox", Type: podspec.TypeNamespace}
	if err := f.e.DryRun(t.Context(), testGroup(), l, pod); err != nil {
		t.Fatal(err)
	}
	if len(*seen) != 3 || (*seen)[2].GetResource().Resource != "namespaces" {
		t.Errorf("creates %d, want the pod and the namespace again", len(*seen))
	}
}

func TestDryRunRefusals(t *testing.T) {
	pod, err := RenderPod(testGroup(), nil, RunInfo{}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	quota := apierrors.NewForbidden(podsResource, "", errors.New("exceeded quota: kubeplay-g, requested: pods=1"))
	f, _ := dryRunFake(t, "pods", quota)
	err = f.e.DryRun(t.Context(), testGroup(), nil, pod)
	var re *RefusedError
	if !errors.As(err, &re) || re.Reason != RefusedQuota || re.Namespace != "runs" || re.Host != "https://fake" {
		t.Errorf("quota: %v (%+v)", err, re)
	}

	f, _ = dryRunFake(t, "namespaces", apierrors.NewForbidden(podsResource, "", errors.New("cannot create namespaces")))
	err = f.e.DryRun(t.Context(), testGroup(), &podspec.Label{Name: "sandbox", Type: podspec.TypeNamespace}, pod)
	if !errors.As(err, &re) || re.Reason != RefusedOther || !strings.Contains(err.Error(), `creating the namespace of node label "sandbox"`) {
		t.Errorf("namespace: %v", err)
	}
}
