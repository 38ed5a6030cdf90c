package acctest

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSweep: what was made at or after the time given goes, namespaces and
// cluster-scoped objects alike; what was made before it, and the system's
// own names, stay. The label confines the sweep to this test's objects.
func TestSweep(t *testing.T) {
	cfg, kube := Clients(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id := fmt.Sprintf("%08x", rand.Uint32())
	labels := map[string]string{"kubeplay.test/sweep": id}
	selector := "kubeplay.test/sweep=" + id

	namespace := func(prefix string) *corev1.Namespace {
		t.Helper()
		ns, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix, Labels: labels}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{}) })
		return ns
	}
	clusterRole := func(name string, extra ...string) {
		t.Helper()
		l := maps.Clone(labels)
		for i := 0; i+1 < len(extra); i += 2 {
			l[extra[i]] = extra[i+1]
		}
		_, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kube.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}

	old := namespace("sweep-old-")
	// creationTimestamp has whole seconds: the next second is the first
	// that the old namespace is not of.
	since := old.CreationTimestamp.Add(time.Second)
	time.Sleep(time.Until(since))
	young := namespace("sweep-young-")
	if young.CreationTimestamp.Before(&metav1.Time{Time: since}) {
		t.Fatalf("namespace %s was created at %s, before %s: the API server's clock is behind this host's", young.Name, young.CreationTimestamp, since)
	}
	clusterRole("kubeplay-sweep-" + id)
	clusterRole("system:kubeplay-sweep-" + id)
	// As the API server's own roles are, on a cluster started after since.
	clusterRole("kubeplay-sweep-bootstrap-"+id, bootstrapLabel, "rbac-defaults")

	deleted, err := Sweep(ctx, cfg, since, selector)
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	want := []string{"clusterroles/kubeplay-sweep-" + id, "namespaces/" + young.Name}
	if !slices.Equal(deleted, want) {
		t.Errorf("Sweep deleted %q, want %q", deleted, want)
	}

	if ns, err := kube.CoreV1().Namespaces().Get(ctx, young.Name, metav1.GetOptions{}); err == nil && ns.DeletionTimestamp == nil {
		t.Errorf("namespace %s is not being deleted", young.Name)
	}
	if _, err := kube.RbacV1().ClusterRoles().Get(ctx, "kubeplay-sweep-"+id, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ClusterRole kubeplay-sweep-%s: want it gone, got %v", id, err)
	}
	if ns, err := kube.CoreV1().Namespaces().Get(ctx, old.Name, metav1.GetOptions{}); err != nil || ns.DeletionTimestamp != nil {
		t.Errorf("namespace %s, made before the time given, was swept (%v)", old.Name, err)
	}
	for _, kept := range []string{"system:kubeplay-sweep-" + id, "kubeplay-sweep-bootstrap-" + id} {
		if _, err := kube.RbacV1().ClusterRoles().Get(ctx, kept, metav1.GetOptions{}); err != nil {
			t.Errorf("ClusterRole %s: want it kept, got %v", kept, err)
		}
	}

	// A namespace already being deleted is not deleted again.
	if again, err := Sweep(ctx, cfg, since, selector); err != nil || len(again) != 0 {
		t.Errorf("second Sweep deleted %q (%v), want nothing", again, err)
	}
}
