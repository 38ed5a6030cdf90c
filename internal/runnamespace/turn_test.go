// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runnamespace_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runengine"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runnamespace"
)

// heldNamespace makes a held node's namespace, deleted when the test ends.
func heldNamespace(t *testing.T) (kubernetes.Interface, string) {
	t.Helper()
	kube := acctest.Kube(t)
	acctest.Parallel(t)
	name := "kp-node-" + runengine.NewID()
	s := runnamespace.Spec{Label: "nsl", Group: "g", Node: name}
	if err := runnamespace.Make(context.Background(), kube, s); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := runnamespace.Delete(context.Background(), kube, name, managed.LabelNode, name); err != nil {
			t.Errorf("deleting %s: %v", name, err)
		}
	})
	ns, err := kube.CoreV1().Namespaces().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ns.Labels[managed.LabelNode] != name || ns.Labels[managed.LabelRun] != "" || ns.Annotations[managed.AnnotationDeadline] != "" {
		t.Fatalf("a held node's namespace has labels %v and annotations %v", ns.Labels, ns.Annotations)
	}
	return kube, name
}

// TestAccTakeTurn: of six runs that want one held namespace at once, one at
// a time has it, and the others are told who does; a turn whose holder's
// time passed is taken without waiting.
func TestAccTakeTurn(t *testing.T) {
	kube, ns := heldNamespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var inside, most, busy atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run := fmt.Sprintf("run-%d", i)
			release, err := runnamespace.TakeTurn(ctx, kube, ns, run, time.Now().Add(time.Minute), func(holder string) {
				if !strings.HasPrefix(holder, "run-") || holder == run {
					errs <- fmt.Errorf("%s told the holder is %q", run, holder)
				}
				busy.Add(1)
			})
			if err != nil {
				errs <- err
				return
			}
			n := inside.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(300 * time.Millisecond)
			inside.Add(-1)
			if err := release(ctx); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if most.Load() != 1 || busy.Load() < 1 {
		t.Fatalf("%d runs held the node at once (want 1); %d were told it was busy", most.Load(), busy.Load())
	}
	got, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil || got.Annotations[runnamespace.AnnotationHolder] != "" {
		t.Fatalf("the last release left %q (%v)", got.Annotations[runnamespace.AnnotationHolder], err)
	}

	// A holder whose provider was killed: its time passed, the turn is free.
	mark := func(holder string, until time.Time) {
		t.Helper()
		got, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Annotations == nil {
			got.Annotations = map[string]string{}
		}
		got.Annotations[runnamespace.AnnotationHolder] = holder + " " + until.UTC().Format(time.RFC3339)
		if _, err := kube.CoreV1().Namespaces().Update(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mark("ghost", time.Now().Add(-time.Minute))
	release, err := runnamespace.TakeTurn(ctx, kube, ns, "after-ghost", time.Now().Add(time.Minute), func(h string) {
		t.Errorf("told %q holds a turn that expired", h)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := release(ctx); err != nil {
		t.Fatal(err)
	}

	// A live holder that never gives back: the wait ends at its time.
	mark("stuck", time.Now().Add(3*time.Second))
	start, told := time.Now(), ""
	release, err = runnamespace.TakeTurn(ctx, kube, ns, "patient", time.Now().Add(time.Minute), func(h string) { told = h })
	if err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); told != "stuck" || waited < 1500*time.Millisecond {
		t.Fatalf("waited %s, told %q: want the wait for stuck's turn to end", waited, told)
	}
	// A release after another run took the turn leaves that run's mark.
	mark("other", time.Now().Add(time.Minute))
	if err := release(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !strings.HasPrefix(got.Annotations[runnamespace.AnnotationHolder], "other ") {
		t.Fatalf("a stale release removed another run's turn: %q", got.Annotations[runnamespace.AnnotationHolder])
	}
	if _, err := runnamespace.TakeTurn(ctx, kube, "kp-no-such-node", "r", time.Now().Add(time.Minute), nil); !errors.Is(err, runnamespace.ErrNodeGone) {
		t.Fatalf("a missing node's turn: %v, want ErrNodeGone", err)
	}
}

// TestAccAccess: a held node's kubeconfig reaches the API server as the
// node's service account, which may create in the node's namespace and
// not elsewhere.
func TestAccAccess(t *testing.T) {
	kube, ns := heldNamespace(t)
	ctx := context.Background()
	cfg := acctest.RESTConfig(t)
	raw, token, err := runnamespace.Access(ctx, kube, ns, cfg.Host, cfg.CAData, 0)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := clientcmd.Load(raw)
	if err != nil || token == "" || kc.Contexts[kc.CurrentContext].Namespace != ns || !strings.Contains(string(raw), token) {
		t.Fatalf("kubeconfig %v, err %v", kc, err)
	}
	rc, err := clientcmd.NewDefaultClientConfig(*kc, nil).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	as, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	// The RBAC authorizer reads the namespace's RoleBinding from its own
	// cache, which on a loaded 2-core machine has lagged the write by more
	// than the few milliseconds this test takes (CI). Nothing can be
	// watched for that, so ask the authorizer itself, with a backoff.
	allowed := func(ctx context.Context) (bool, error) {
		r, err := as.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authv1.SelfSubjectAccessReview{
			Spec: authv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authv1.ResourceAttributes{
				Namespace: ns, Verb: "create", Resource: "configmaps"}}}, metav1.CreateOptions{})
		return err == nil && r.Status.Allowed, nil
	}
	if err := wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 50 * time.Millisecond, Factor: 2, Cap: 2 * time.Second, Steps: 30}, allowed); err != nil {
		t.Fatalf("the node's account was not allowed to create ConfigMaps in its namespace within the backoff: %v", err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}
	if _, err := as.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the node's account may not create in its namespace: %v", err)
	}
	if _, err := as.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the node's account creating in namespace default: %v, want 403", err)
	}
}
