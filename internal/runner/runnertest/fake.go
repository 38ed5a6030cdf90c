// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

// Package runnertest gives unit tests of runs a fake clientset that does
// what run pods need of the API server and client-go's fake leaves out.
// Set KUBE_FEATURE_WatchListClient=false in TestMain: the fake has no
// streaming lists, and waitfor's ListerWatchers do not tell the reflector.
package runnertest

import (
	"fmt"
	"slices"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// NewClientset returns a fake clientset holding objs whose pods get names
// from generateName and whose pod lists honour field selectors on
// metadata.name, as runner.DeletePod's wait needs.
func NewClientset(objs ...runtime.Object) *fake.Clientset {
	kube := fake.NewClientset(objs...)
	var n atomic.Int32
	kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca, ok := a.(k8stesting.CreateAction)
		if !ok {
			return true, nil, fmt.Errorf("pod create reactor got a %T", a)
		}
		if p, ok := ca.GetObject().(*corev1.Pod); ok && p.Name == "" && p.GenerateName != "" {
			p.Name = fmt.Sprintf("%s%d", p.GenerateName, n.Add(1))
		}
		return false, nil, nil
	})
	kube.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		la, ok := a.(k8stesting.ListAction)
		if !ok {
			return true, nil, fmt.Errorf("pod list reactor got a %T", a)
		}
		r := la.GetListRestrictions()
		if r.Fields == nil || r.Fields.Empty() {
			return false, nil, nil
		}
		obj, err := kube.Tracker().List(corev1.SchemeGroupVersion.WithResource("pods"), corev1.SchemeGroupVersion.WithKind("Pod"), a.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		list, ok := obj.(*corev1.PodList)
		if !ok {
			return true, nil, fmt.Errorf("the tracker listed pods as a %T", obj)
		}
		list.Items = slices.DeleteFunc(list.Items, func(p corev1.Pod) bool {
			return !r.Fields.Matches(fields.Set{"metadata.name": p.Name}) || !r.Labels.Matches(labels.Set(p.Labels))
		})
		return true, list, nil
	})
	return kube
}
