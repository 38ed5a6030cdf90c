package acctest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/waitfor"
)

// TestAccClusterAPICore installs the Cluster API core provider, built from
// module source, on the second cluster as clusterctl init would (the
// cert-manager API, then the components with their variables substituted,
// applied server-side), and waits until the manager is Ready on the second
// cluster's node. It deletes all of it at the end.
func TestAccClusterAPICore(t *testing.T) {
	if os.Getenv("TF_ACC") == "" {
		t.Skip("acceptance test against the test cluster: set TF_ACC=1 (the cluster is tools/testcluster's, or KUBEPLAY_TEST_KUBECONFIG's)")
	}
	const cluster, node = 2, "kubeplay-node2"
	path := SecondKubeconfig(t)
	ClusterAPIImage(t, cluster)
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	kube := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))

	components, err := SubstituteVariables(ClusterAPICoreComponents(t), ClusterAPIVariables(cluster))
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, doc := range append(SplitYAML(CertManagerAPI()), SplitYAML(components)...) {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, obj)
	}
	resource := func(obj *unstructured.Unstructured) dynamic.ResourceInterface {
		t.Helper()
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s: %v", gvk, err)
		}
		if ns := obj.GetNamespace(); ns != "" {
			return dyn.Resource(m.Resource).Namespace(ns)
		}
		return dyn.Resource(m.Resource)
	}

	// Undone in three steps, each deleting all at once and then waiting: the
	// Deployment and its pods; the namespace; the cluster-scoped objects.
	// (The namespace controller takes twice as long when pods are still there
	// or CustomResourceDefinitions disappear meanwhile.)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		start := time.Now()
		for _, step := range []func(*unstructured.Unstructured) bool{
			func(o *unstructured.Unstructured) bool { return o.GetKind() == "Deployment" },
			func(o *unstructured.Unstructured) bool { return o.GetKind() == "Namespace" },
			func(o *unstructured.Unstructured) bool { return o.GetNamespace() == "" && o.GetKind() != "Namespace" },
		} {
			var deleted []*unstructured.Unstructured
			for _, obj := range objs {
				if !step(obj) {
					continue
				}
				foreground := metav1.DeletePropagationForeground // the Deployment's pods too
				err := resource(obj).Delete(ctx, obj.GetName(), metav1.DeleteOptions{PropagationPolicy: &foreground})
				if err != nil && !apierrors.IsNotFound(err) {
					t.Errorf("deleting %s %s: %v", obj.GetKind(), obj.GetName(), err)
					continue
				}
				deleted = append(deleted, obj)
			}
			for _, obj := range deleted {
				lw := waitfor.Named(dynamicLister{resource(obj)}, obj.GetName())
				if err := waitfor.Gone(ctx, lw, &unstructured.Unstructured{}); err != nil {
					t.Errorf("waiting for %s %s to go: %v", obj.GetKind(), obj.GetName(), err)
				}
			}
			t.Logf("deleted %d objects after %s", len(deleted), time.Since(start).Round(10*time.Millisecond))
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	for _, obj := range objs {
		data, err := json.Marshal(obj.Object)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := resource(obj).Patch(ctx, obj.GetName(), types.ApplyPatchType, data,
			metav1.PatchOptions{FieldManager: "kubeplay-acctest", Force: ptr.To(true)}); err != nil {
			t.Fatalf("applying %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	applied := time.Since(start)

	selector := ClusterAPIProviderLabel + "=cluster-api,control-plane=controller-manager"
	var ready *corev1.Pod
	_, err = waitfor.Lists(ctx, kube.CoreV1().Pods(ClusterAPINamespace), metav1.ListOptions{LabelSelector: selector},
		func(l *corev1.PodList) (bool, error) {
			for i, p := range l.Items {
				if err := podFailed(&p); err != nil {
					return false, err
				}
				if p.Spec.NodeName == node && podReady(&p) {
					ready = &l.Items[i]
					return true, nil
				}
			}
			return false, nil
		})
	if err != nil {
		t.Errorf("waiting for the manager to be Ready on %s: %v", node, err)
		logManager(t, kube, selector)
		t.FailNow()
	}
	t.Logf("applied %d objects in %s; pod %s Ready on %s %s after the first apply",
		len(objs), applied.Round(10*time.Millisecond), ready.Name, node, time.Since(start).Round(10*time.Millisecond))
	logManagerMemory(t, kube, node, ready.Name)

	// The manager must lack no permission (its role is role.yaml's).
	logs, err := kube.CoreV1().Pods(ClusterAPINamespace).GetLogs(ready.Name, &corev1.PodLogOptions{Container: "manager"}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(logs), "\n") {
		if strings.Contains(line, "forbidden") {
			t.Errorf("the manager lacks a permission: %s", line)
		}
	}
}

// dynamicLister is a dynamic client as a waitfor.ListWatcher.
type dynamicLister struct{ dynamic.ResourceInterface }

// podFailed reports a pod that waiting longer will not make Ready.
func podFailed(p *corev1.Pod) error {
	if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
		return fmt.Errorf("pod %s ended (%s)", p.Name, p.Status.Phase)
	}
	for _, c := range p.Status.ContainerStatuses {
		if w := c.State.Waiting; w != nil && (w.Reason == "CrashLoopBackOff" || slices.Contains(waitfor.StartFailures, w.Reason)) {
			return fmt.Errorf("pod %s: container %s: %s: %s", p.Name, c.Name, w.Reason, w.Message)
		}
	}
	return nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// logManager logs the status and the last lines of log of the manager's pods.
func logManager(t *testing.T, kube kubernetes.Interface, selector string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods, err := kube.CoreV1().Pods(ClusterAPINamespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Logf("listing the manager's pods: %v", err)
		return
	}
	for _, p := range pods.Items {
		status, _ := json.Marshal(p.Status)
		t.Logf("pod %s: %s", p.Name, status)
		for _, previous := range []bool{true, false} {
			logs, err := kube.CoreV1().Pods(ClusterAPINamespace).GetLogs(p.Name,
				&corev1.PodLogOptions{Container: "manager", TailLines: ptr.To[int64](40), Previous: previous}).DoRaw(ctx)
			if err == nil {
				t.Logf("pod %s log (previous %v):\n%s", p.Name, previous, logs)
			}
		}
	}
}

// logManagerMemory logs the manager container's memory as the node's
// kubelet reports it (its summary API, through the API server's node proxy;
// it may not have sampled a container that started a moment ago).
func logManagerMemory(t *testing.T, kube kubernetes.Interface, node, pod string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	data, err := kube.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy/stats/summary").DoRaw(ctx)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			t.Logf("kubelet summary of %s: %v", node, err)
		}
		return
	}
	var summary struct {
		Pods []struct {
			PodRef     struct{ Name, Namespace string }
			Containers []struct {
				Name   string
				Memory struct{ RSSBytes, WorkingSetBytes *uint64 }
			}
		}
	}
	if err := json.Unmarshal(data, &summary); err != nil {
		t.Logf("kubelet summary of %s: %v", node, err)
		return
	}
	for _, p := range summary.Pods {
		if p.PodRef.Name != pod || p.PodRef.Namespace != ClusterAPINamespace {
			continue
		}
		for _, c := range p.Containers {
			if c.Name != "manager" {
				continue
			}
			// On this cgroup v1 node the kubelet reports the working set only.
			var figures []string
			for _, f := range []struct {
				name string
				v    *uint64
			}{{"RSS", c.Memory.RSSBytes}, {"working set", c.Memory.WorkingSetBytes}} {
				if f.v != nil {
					figures = append(figures, fmt.Sprintf("%s %.1f MiB", f.name, float64(*f.v)/(1<<20)))
				}
			}
			if len(figures) > 0 {
				t.Logf("manager container memory (kubelet): %s", strings.Join(figures, ", "))
				return
			}
		}
	}
	t.Logf("the kubelet of %s has no memory figures of pod %s yet", node, pod)
}
