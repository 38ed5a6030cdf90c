package acctest

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/waitfor"
)

// StartPod creates a pod named from prefix with one container, "worker",
// that sleeps in image, and waits with a watch until it runs. It returns the
// pod's name. A pod that ends before it runs (on a slower machine under
// make test-all's load the kubelet failed one whose sandbox took 60 s to
// start) is deleted and created again, twice at most; the error says why
// the last ended.
func StartPod(ctx context.Context, kube kubernetes.Interface, namespace, prefix, image string) (string, error) {
	var name string
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		if name != "" {
			_ = kube.CoreV1().Pods(namespace).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		}
		var ended bool
		name, ended, err = startPod(ctx, kube, namespace, prefix, image)
		if !ended {
			break
		}
	}
	return name, err
}

// startPod is one attempt of StartPod; ended says the pod ended before it ran.
func startPod(ctx context.Context, kube kubernetes.Interface, namespace, prefix, image string) (string, bool, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			AutomountServiceAccountToken:  ptr.To(false),
			Containers: []corev1.Container{{
				Name:            "worker",
				Image:           image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"sleep", "infinity"},
				Resources:       HelperResources(),
			}},
		},
	}
	created, err := kube.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return "", false, err
	}
	name := created.Name
	ended := false
	lw := waitfor.Named(kube.CoreV1().Pods(namespace), name)
	_, err = waitfor.Until(ctx, lw, &corev1.Pod{}, func(ev watch.Event) (bool, error) {
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			return false, nil
		}
		switch p.Status.Phase {
		case corev1.PodRunning:
			return true, nil
		case corev1.PodFailed, corev1.PodSucceeded:
			ended = true
			return false, fmt.Errorf("pod %s/%s ended (%s) before it ran: reason %q, message %q, containers %v",
				namespace, name, p.Status.Phase, p.Status.Reason, p.Status.Message, p.Status.ContainerStatuses)
		}
		return false, nil
	})
	if err != nil {
		return name, ended, fmt.Errorf("waiting for pod %s/%s to run: %w", namespace, name, err)
	}
	return name, false, nil
}

// HelperResources requests a little CPU for the pods tests make themselves
// (builds, SSH targets, pods that bundles run in, impostors, Jobs). Without a request a pod is
// BestEffort, and all BestEffort pods share a CPU weight of 2 against the
// Burstable pods' 256 each: under make test-all's load on a slower machine a
// collection build's exec in one passed 5 minutes. Pods that tests make from
// YAML (Jobs, Deployments, a node label's spec, the Cluster API manager) carry
// the same request written out: change both together.
func HelperResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}
}

// Namespace creates a namespace named from prefix, deleted when the test
// ends, and waits with a watch for its default ServiceAccount: until the
// controller creates it, admission refuses pods there.
func Namespace(t testing.TB, kube kubernetes.Interface, prefix string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating namespace %s-*: %v", prefix, err)
	}
	t.Cleanup(func() {
		err := kube.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", ns.Name, err)
		}
	})
	lw := waitfor.Named(kube.CoreV1().ServiceAccounts(ns.Name), "default")
	if _, err := waitfor.Until(ctx, lw, &corev1.ServiceAccount{}, func(ev watch.Event) (bool, error) {
		return ev.Type != watch.Deleted, nil
	}); err != nil {
		t.Fatalf("waiting for ServiceAccount %s/default: %v", ns.Name, err)
	}
	return ns.Name
}
