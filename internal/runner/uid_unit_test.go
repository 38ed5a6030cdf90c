// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runner

import (
	"context"
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner/runnertest"
)

// TestFinishDeletesOnlyThePodItRan: the run's pod went and another pod of
// its name took its place; the run's clean-up deletes with a UID
// precondition, which the API server refuses for the other pod. The fake
// clientset knows no preconditions, so a reactor does what the API server
// does with one.
func TestFinishDeletesOnlyThePodItRan(t *testing.T) {
	for _, async := range []bool{false, true} {
		other := testPod("p")
		other.UID = "uid-of-another"
		kube := runnertest.NewClientset(other)
		var preconditions []types.UID
		kube.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			da, ok := a.(k8stesting.DeleteAction)
			if !ok {
				return true, nil, errors.New("not a delete")
			}
			if pre := da.GetDeleteOptions().Preconditions; pre != nil && pre.UID != nil {
				preconditions = append(preconditions, *pre.UID)
				if *pre.UID != other.UID {
					return true, nil, apierrors.NewConflict(podsResource, "p", errors.New("Precondition failed: UID in precondition: "+
						string(*pre.UID)+", UID in object meta: "+string(other.UID)))
				}
			}
			return false, nil, nil
		})
		ran := testPod("p")
		ran.UID = "uid-of-the-run"
		r := &Runner{Kube: kube}
		res := r.finish(context.Background(), Spec{DeleteAsync: async}, Result{Status: StatusSuccessful}, ran, nil)
		if res.Status != StatusSuccessful || res.Message != "" {
			t.Errorf("async %v: result %s: %s; a pod gone before the clean-up is no error", async, res.Status, res.Message)
		}
		if len(preconditions) == 0 || preconditions[0] != ran.UID {
			t.Errorf("async %v: the delete carried UID preconditions %q, want %q", async, preconditions, ran.UID)
		}
		if _, err := kube.CoreV1().Pods("runs").Get(context.Background(), "p", metav1.GetOptions{}); err != nil {
			t.Errorf("async %v: the run's clean-up deleted another pod of its name: %v", async, err)
		}
	}
}
