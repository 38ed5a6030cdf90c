// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalogkey"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/warmpool"
)

var nodeKey = func() *catalogkey.Key {
	k, err := catalogkey.New([]byte("kubeplay-runengine-unit-test-key!!"))
	if err != nil {
		panic(err)
	}
	return k
}()

// nodePod is held node name's pod as the API server returns it, running,
// signed with key unless key is nil.
func nodePod(t *testing.T, name string, key *catalogkey.Key) *corev1.Pod {
	t.Helper()
	p, err := NodePod(testGroup(), nil, name)
	if err != nil {
		t.Fatal(err)
	}
	p.UID = types.UID("uid-" + name)
	if key != nil {
		p.Annotations = warmpool.Signatures(key, nodeOwner(testGroup(), p), p)
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	return p
}

func (f *fakeCluster) withKey(key *catalogkey.Key) {
	f.e.keyFunc = func(context.Context) (*catalogkey.Key, error) { return key, nil }
}

// A run uses a held node's pod only when kubeplay made it as that node and
// its spec is the one made.
func TestHeldNodeVerified(t *testing.T) {
	changed := nodePod(t, "changed", nodeKey)
	changed.Spec.Containers[0].Image = "evil:1"
	renamed := nodePod(t, "other", nodeKey)
	renamed.Name, renamed.Labels["kubeplay.io/node"] = "renamed", "renamed"
	f := newFake(t, nodePod(t, "good", nodeKey), nodePod(t, "unsigned", nil), changed, renamed)
	f.withKey(nodeKey)
	for name, want := range map[string]string{
		"good":     "",
		"unsigned": `(pod runs/unsigned) was not made by kubeplay: it carries kubeplay's labels but no kubeplay signature`,
		"renamed":  `(pod runs/renamed) was not made by kubeplay: it carries a kubeplay signature that is not its own`,
		"changed":  `(pod runs/changed) is refused: it was made by kubeplay, but its spec changed since`,
	} {
		p, _, err := f.e.heldNode(t.Context(), testGroup(), name)
		var ne *NodeError
		switch {
		case want == "" && (err != nil || p == nil || p.Name != name):
			t.Errorf("%s: %v, %v", name, p, err)
		case want != "" && (p != nil || !errors.As(err, &ne) || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v, %v; want a NodeError with %q", name, p, err, want)
		}
	}
	// Without a key nothing is used.
	f.e.keyFunc = nil
	if _, _, err := f.e.heldNode(t.Context(), testGroup(), "good"); err == nil || !strings.Contains(err.Error(), "cannot be verified") {
		t.Errorf("without a key: %v", err)
	}
}

// Release deletes the node's pod, ended or not, with a UID precondition,
// and leaves a pod of its name that is not the node kubeplay made.
func TestReleaseOnlyTheNode(t *testing.T) {
	ended := nodePod(t, "ended", nodeKey)
	ended.Status.Phase = corev1.PodSucceeded
	foreign := nodePod(t, "foreign", nil)
	foreign.Labels = map[string]string{"app": "other"}
	f := newFake(t, ended, nodePod(t, "unsigned", nil), foreign, nodePod(t, "changed", nodeKey))
	f.withKey(nodeKey)
	changed, err := f.kube.CoreV1().Pods("runs").Get(t.Context(), "changed", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	changed.Spec.Containers[0].Image = "evil:1"
	if _, err := f.kube.CoreV1().Pods("runs").Update(t.Context(), changed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var uids []string
	f.kube.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if da, ok := a.(k8stesting.DeleteAction); ok && da.GetDeleteOptions().Preconditions != nil {
			uids = append(uids, string(*da.GetDeleteOptions().Preconditions.UID))
		}
		return false, nil, nil
	})
	for name, want := range map[string]string{
		"ended":    "",
		"changed":  "", // kubeplay's own pod, changed: deleted
		"missing":  "",
		"unsigned": "no kubeplay signature",
		"foreign":  "is not a kubeplay_node of the group",
	} {
		err := f.e.Release(t.Context(), testGroup(), name)
		var r *warmpool.RefusedError
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v, want %q", name, err, want)
		case want == "no kubeplay signature" && (!errors.As(err, &r) || r.Ours):
			t.Errorf("%s: %v is not a refusal", name, err)
		case want == "is not a kubeplay_node of the group" && !errors.Is(err, ErrNotNode):
			t.Errorf("%s: %v is not ErrNotNode", name, err)
		}
		_, gerr := f.kube.CoreV1().Pods("runs").Get(t.Context(), name, metav1.GetOptions{})
		if deleted := apierrors.IsNotFound(gerr); deleted != (want == "") {
			t.Errorf("%s: deleted %v", name, deleted)
		}
	}
	if len(uids) != 2 || !strings.HasPrefix(uids[0], "uid-") || !strings.HasPrefix(uids[1], "uid-") {
		t.Errorf("the deletes' UID preconditions: %q", uids)
	}
}
