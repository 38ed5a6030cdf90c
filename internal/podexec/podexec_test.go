package podexec_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podexec"
)

// TestRunAcc runs commands in a real container of the test cluster: stdin
// reaches the command and is closed at EOF, exit codes come back intact,
// stdout is captured, and exec errors name the pod.
func TestRunAcc(t *testing.T) {
	cfg, client := accClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	ns := testNamespace(ctx, t, client)
	start := time.Now()
	pod := createPod(ctx, t, client, ns, "exec", acctest.TestImage())
	waitPod(ctx, t, client, ns, pod.Name, 90*time.Second, func(p *corev1.Pod) (bool, error) {
		if p.Status.Phase == corev1.PodRunning {
			return true, nil
		}
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" {
				return false, fmt.Errorf("container %s waiting: %s: %s", cs.Name, w.Reason, w.Message)
			}
		}
		return false, nil
	})
	t.Logf("pod %s/%s Running %s after create", ns, pod.Name, time.Since(start).Round(time.Millisecond))

	t.Run("stdin, checksum and exit code 7", func(t *testing.T) {
		payload := make([]byte, 4<<20)
		if _, err := rand.Read(payload); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(payload)
		want := hex.EncodeToString(sum[:])
		var stdout, stderr bytes.Buffer
		start := time.Now()
		code, err := podexec.Run(ctx, cfg, client, ns, pod.Name, "main",
			[]string{"sh", "-c", "cat > /tmp/x && sha256sum /tmp/x && exit 7"},
			bytes.NewReader(payload), &stdout, &stderr)
		if err != nil {
			t.Fatalf("Run: %v (stderr %q)", err, stderr.String())
		}
		if code != 7 {
			t.Errorf("exit code %d, want 7 (stderr %q)", code, stderr.String())
		}
		got := strings.Fields(stdout.String())
		if len(got) != 2 || got[0] != want || got[1] != "/tmp/x" {
			t.Errorf("stdout %q, want %q", stdout.String(), want+"  /tmp/x")
		}
		t.Logf("4 MiB through stdin, sha256 matches, exit code %d, in %s", code, time.Since(start).Round(time.Millisecond))
	})

	t.Run("python3 prints 1", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		start := time.Now()
		code, err := podexec.Run(ctx, cfg, client, ns, pod.Name, "main",
			[]string{"python3", "-c", "print(1)"}, nil, &stdout, &stderr)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if code != 0 || stdout.String() != "1\n" || stderr.Len() != 0 {
			t.Errorf("exit code %d, stdout %q, stderr %q; want 0, %q, empty", code, stdout.String(), "1\n", stderr.String())
		}
		t.Logf("exec round trip %s", time.Since(start).Round(time.Millisecond))
	})

	t.Run("stderr is separate", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		code, err := podexec.Run(ctx, cfg, client, ns, pod.Name, "main",
			[]string{"sh", "-c", "echo out; echo err >&2; exit 3"}, nil, &stdout, &stderr)
		if err != nil || code != 3 || stdout.String() != "out\n" || stderr.String() != "err\n" {
			t.Errorf("got code %d, err %v, stdout %q, stderr %q; want 3, nil, %q, %q",
				code, err, stdout.String(), stderr.String(), "out\n", "err\n")
		}
	})

	t.Run("errors name the pod", func(t *testing.T) {
		var stdout bytes.Buffer
		code, err := podexec.Run(ctx, cfg, client, ns, "no-such-pod", "main", []string{"true"}, nil, &stdout, nil)
		if err == nil || code != -1 || !strings.Contains(err.Error(), ns+"/no-such-pod") {
			t.Errorf("got code %d, err %v; want -1 and an error naming %s/no-such-pod", code, err, ns)
		}
		if podexec.Transient(err) {
			t.Errorf("an exec in a missing pod is Transient: %v", err)
		}
		// A container the pod does not have: the API server refuses the upgrade for good, nothing runs.
		code, err = podexec.Run(ctx, cfg, client, ns, pod.Name, "nope", []string{"true"}, nil, &stdout, nil)
		if err == nil || code != -1 || podexec.Transient(err) {
			t.Errorf("exec in container nope: got code %d, err %v; want -1 and an error that is not Transient", code, err)
		}
		code, err = podexec.Run(ctx, cfg, client, ns, pod.Name, "main", []string{"/no/such/binary"}, nil, &stdout, nil)
		if err == nil && code == 0 {
			t.Errorf("running a missing binary succeeded")
		}
		t.Logf("missing binary: code %d, err %v", code, err)
		// A stream that started, then ended with its context: Transient, as a cut stream is.
		short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
		defer cancelShort()
		_, err = podexec.Run(short, cfg, client, ns, pod.Name, "main", []string{"sleep", "30"}, nil, &stdout, nil)
		if err == nil || !podexec.Transient(err) {
			t.Errorf("an exec cut by its context: err %v, Transient %v; want a Transient error", err, podexec.Transient(err))
		}
	})
}

// TestMissingImageAcc checks that a pod whose image is neither imported nor
// pullable reports ErrImagePull or ImagePullBackOff, and that the test
// cluster refused the pull locally, without a DNS lookup. The wait is long:
// on a loaded 2-core CI runner the pod's sandbox alone has taken 50 s.
func TestMissingImageAcc(t *testing.T) {
	_, client := accClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	ns := testNamespace(ctx, t, client)
	start := time.Now()
	pod := createPod(ctx, t, client, ns, "missing", "kubeplay.test/missing:v1")
	var reason, message string
	waitPod(ctx, t, client, ns, pod.Name, 100*time.Second, func(p *corev1.Pod) (bool, error) {
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") {
				reason, message = w.Reason, w.Message
				return true, nil
			}
		}
		if p.Status.Phase == corev1.PodRunning {
			return false, fmt.Errorf("pod with a missing image is Running")
		}
		return false, nil
	})
	t.Logf("waiting reason %s after %s: %s", reason, time.Since(start).Round(time.Millisecond), message)
	if os.Getenv(acctest.EnvKubeconfig) == "" && strings.Contains(message, "lookup kubeplay.test") {
		t.Errorf("the local test cluster resolved kubeplay.test through DNS; its pulls should go to 127.0.0.1:1")
	}
}

// accClient skips the test unless TF_ACC is set, and returns a client for
// the acceptance test cluster.
func accClient(t *testing.T) (*rest.Config, kubernetes.Interface) {
	t.Helper()
	cfg, client := acctest.Clients(t)
	acctest.Parallel(t)
	return cfg, client
}

// testNamespace creates a fresh namespace, deleted when the test ends, and
// waits until its default ServiceAccount exists (pods are refused before).
func testNamespace(ctx context.Context, t *testing.T, client kubernetes.Interface) string {
	t.Helper()
	ns, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "kubeplay-podexec-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		// Do not wait: namespace deletion takes seconds (pods get a 1s grace).
		err := client.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", ns.Name, err)
		}
	})
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = watchtools.UntilWithSync(waitCtx, listWatch(
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.CoreV1().ServiceAccounts(ns.Name).List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return client.CoreV1().ServiceAccounts(ns.Name).Watch(ctx, o)
		}, "default"),
		&corev1.ServiceAccount{}, nil,
		func(ev watch.Event) (bool, error) { return ev.Type == watch.Added || ev.Type == watch.Modified, nil })
	if err != nil {
		t.Fatalf("waiting for ServiceAccount %s/default: %v", ns.Name, err)
	}
	return ns.Name
}

// createPod creates a pod with one container "main" running image's command
// (sleep infinity for the test image).
func createPod(ctx context.Context, t *testing.T, client kubernetes.Interface, ns, name, image string) *corev1.Pod {
	t.Helper()
	grace := int64(1)
	pod, err := client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			// No cluster DNS in the test cluster; this also keeps the pod from
			// being told about any.
			DNSPolicy: corev1.DNSDefault,
			Containers: []corev1.Container{{
				Name:            "main",
				Image:           image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"/bin/sleep", "infinity"},
				Resources:       acctest.HelperResources(),
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s/%s: %v", ns, name, err)
	}
	return pod
}

// waitPod watches one pod until cond returns true or an error, or timeout.
func waitPod(ctx context.Context, t *testing.T, client kubernetes.Interface, ns, name string,
	timeout time.Duration, cond func(*corev1.Pod) (bool, error)) {
	t.Helper()
	waitCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last *corev1.Pod
	_, err := watchtools.UntilWithSync(waitCtx, listWatch(
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.CoreV1().Pods(ns).List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return client.CoreV1().Pods(ns).Watch(ctx, o)
		}, name),
		&corev1.Pod{}, nil,
		func(ev watch.Event) (bool, error) {
			switch ev.Type {
			case watch.Deleted:
				return false, fmt.Errorf("pod %s/%s was deleted", ns, name)
			case watch.Added, watch.Modified:
				p, ok := ev.Object.(*corev1.Pod)
				if !ok {
					return false, nil
				}
				last = p
				return cond(p)
			}
			return false, nil
		})
	if err != nil {
		state := "never seen"
		if last != nil {
			state = fmt.Sprintf("phase %s, conditions %v, containers %v", last.Status.Phase, last.Status.Conditions, last.Status.ContainerStatuses)
		}
		t.Fatalf("waiting for pod %s/%s: %v (%s)", ns, name, err, state)
	}
}

// listWatch lists and watches the single object called name.
func listWatch(list cache.ListWithContextFunc, watchFn cache.WatchFuncWithContext, name string) *cache.ListWatch {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return watchFn(ctx, o)
		},
	}
}
