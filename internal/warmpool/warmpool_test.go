// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package warmpool_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/warmpool"
)

func testEnv(t *testing.T) (kubernetes.Interface, string) {
	t.Helper()
	kube := acctest.Kube(t)
	acctest.Parallel(t)
	return kube, acctest.Namespace(t, kube, "kp-warm")
}

func template(ns, image string) warmpool.Template {
	p := podspec.DefaultPod(ns, image)
	p.GenerateName = "kubeplay-run-"
	p.Labels = managed.Labels(managed.LabelContainerGroup, "g")
	p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	return keyed(warmpool.Template{Group: "g", Namespace: ns, Pod: p}, nil)
}

// TestAccTakeRace: of eight runs that claim one warm pod at once, exactly
// one gets it; the others are told the pool is empty.
func TestAccTakeRace(t *testing.T) {
	kube, ns := testEnv(t)
	tmpl := template(ns, acctest.TestImage())
	ctx := context.Background()
	if n, err := warmpool.Fill(ctx, kube, tmpl, 1); err != nil || n != 1 {
		t.Fatalf("fill: %d, %v", n, err)
	}
	acctest.WaitWarmReady(t, kube, ns, "g", 1)
	var (
		mu  sync.Mutex
		got []*corev1.Pod
		wg  sync.WaitGroup
	)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			labels := managed.Labels(managed.LabelContainerGroup, "g", managed.LabelRun, "run"+string(rune('a'+i)))
			p, err := warmpool.Take(ctx, kube, tmpl, warmpool.Claim{Labels: labels, Annotations: map[string]string{"k": "v"}, Timeout: time.Minute})
			if err != nil {
				t.Errorf("take: %v", err)
			}
			if p != nil {
				mu.Lock()
				got = append(got, p)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(got) != 1 {
		t.Fatalf("%d runs claimed the one warm pod", len(got))
	}
	p := got[0]
	if _, ok := p.Labels[warmpool.LabelRevision]; ok || p.Labels[managed.LabelRun] == "" || p.Annotations["k"] != "v" {
		t.Errorf("the claimed pod's metadata: labels %v, annotations %v", p.Labels, p.Annotations)
	}
	if d := *p.Spec.ActiveDeadlineSeconds; d < 60 || d > 120 {
		t.Errorf("the claimed pod's deadline is %d s; the run's timeout is 60 s", d)
	}
	if c, err := count(ctx, kube, ns); err != nil || c != (warmpool.Counts{}) {
		t.Errorf("after the claim the pool holds %+v (%v)", c, err)
	}
}

// TestAccFillReplacesAndDrains: a fill replaces pods of an old revision,
// a claim waits for a starting pod, and a drain leaves nothing.
func TestAccFillReplacesAndDrains(t *testing.T) {
	kube, ns := testEnv(t)
	ctx := context.Background()
	old := template(ns, acctest.TestImage())
	if _, err := warmpool.Fill(ctx, kube, old, 2); err != nil {
		t.Fatal(err)
	}
	acctest.WaitWarmReady(t, kube, ns, "g", 2)
	// A second fill of the same pool makes nothing more.
	if n, err := warmpool.Fill(ctx, kube, old, 2); err != nil || n != 0 {
		t.Fatalf("refill of a full pool: %d, %v", n, err)
	}
	changed := template(ns, acctest.TestImage())
	changed.Pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "X", Value: "1"}}
	if n, err := warmpool.Fill(ctx, kube, changed, 1); err != nil || n != 1 {
		t.Fatalf("fill of a changed pool: %d, %v", n, err)
	}
	// The new pod is starting: a claim waits for it rather than going cold.
	start := time.Now()
	p, err := warmpool.Take(ctx, kube, changed, warmpool.Claim{Labels: managed.Labels(managed.LabelRun, "x"), Timeout: time.Minute})
	if err != nil || p == nil {
		t.Fatalf("take from a starting pool: %v, %v", p, err)
	}
	if p.Spec.Containers[0].Env[0].Name != "X" {
		t.Errorf("claimed a pod of the old revision")
	}
	t.Logf("claimed a starting warm pod %s after %s", p.Name, time.Since(start).Round(time.Millisecond))
	// The old revision's pods were deleted.
	list, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: warmpool.LabelRevision + "=" + warmpool.Revision(old.Pod)})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range list.Items {
		if q.DeletionTimestamp == nil {
			t.Errorf("pod %s of the old revision is still live", q.Name)
		}
	}
	if _, err := warmpool.Fill(ctx, kube, changed, 2); err != nil {
		t.Fatal(err)
	}
	if err := drain(ctx, kube, ns); err != nil {
		t.Fatal(err)
	}
	if c, err := count(ctx, kube, ns); err != nil || c != (warmpool.Counts{}) {
		t.Errorf("after a drain the pool holds %+v (%v)", c, err)
	}
	// The claimed pod is a run's now: the drain left it.
	if q, err := kube.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{}); err != nil || q.DeletionTimestamp != nil {
		t.Errorf("the drain deleted the claimed pod: %v", err)
	}
}

// TestAccRefillWaitsForQuota: with the quota full (a warm pod and a run's
// claimed pod), Fill gives up at the refusal while Refill waits, watching
// the quota, and creates the missing pod once the run's pod is deleted.
func TestAccRefillWaitsForQuota(t *testing.T) {
	kube, ns := testEnv(t)
	ctx := context.Background()
	tmpl := template(ns, acctest.TestImage())
	acctest.PodQuota(t, kube, ns, "pool", 2)
	if n, err := warmpool.Fill(ctx, kube, tmpl, 2); err != nil || n != 2 {
		t.Fatalf("fill: %d, %v", n, err)
	}
	acctest.WaitWarmReady(t, kube, ns, "g", 2)
	run, err := warmpool.Take(ctx, kube, tmpl, warmpool.Claim{Labels: managed.Labels(managed.LabelContainerGroup, "g", managed.LabelRun, "r"), Timeout: time.Minute})
	if err != nil || run == nil {
		t.Fatalf("take: %v, %v", run, err)
	}
	acctest.WaitQuota(t, kube, ns, "pool", func(q *corev1.ResourceQuota) bool { return q.Status.Used.Pods().Value() == 2 })
	if n, err := warmpool.Fill(ctx, kube, tmpl, 2); err != nil || n != 0 {
		t.Fatalf("fill into a full quota: %d, %v; want 0 created and no error", n, err)
	}

	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	go func() {
		n, err := warmpool.Refill(rctx, kube, tmpl, 2)
		done <- result{n, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("refill returned (%d, %v) while the quota was full and no pod was going", r.n, r.err)
	case <-time.After(3 * time.Second):
	}
	deleted := time.Now()
	if err := kube.CoreV1().Pods(ns).Delete(ctx, run.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.n != 1 {
		t.Fatalf("refill after the run's pod was deleted: %d created, %v; want 1", r.n, r.err)
	}
	t.Logf("the refill created its pod %s after the run's pod was deleted", time.Since(deleted).Round(time.Millisecond))
	if c, err := count(ctx, kube, ns); err != nil || c.Ready+c.Starting != 2 {
		t.Errorf("after the refill the pool holds %+v (%v), want 2", c, err)
	}
}

// TestAccFillSignsAfterCancel: a fill whose context ends just as the API
// server created its pod (Ctrl-C, or a provider that Terraform stops) still
// signs that pod and keeps it for the next run.
func TestAccFillSignsAfterCancel(t *testing.T) {
	_, ns := testEnv(t)
	tmpl := template(ns, acctest.TestImage())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := acctest.RESTConfig(t)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(r)
			if err == nil && r.Method == http.MethodPost && resp.StatusCode == http.StatusCreated && strings.HasSuffix(r.URL.Path, "/pods") {
				cancel() // the pod exists now; its fill's context ends
			}
			return resp, err
		})
	})
	kube := kubernetes.NewForConfigOrDie(cfg)
	if _, err := warmpool.Fill(ctx, kube, tmpl, 1); err != nil {
		t.Logf("fill: %v", err) // it may report ctx's end; the pod it made is what counts
	}
	if ctx.Err() == nil {
		t.Fatal("the fill created no pod")
	}
	check := acctest.Kube(t)
	list, err := check.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: warmpool.GroupSelector("g")})
	if err != nil {
		t.Fatal(err)
	}
	signed, err := count(context.Background(), check, ns)
	if err != nil {
		t.Fatal(err)
	}
	// The pod is kept, signed, for the next run: not deleted as unsigned.
	if all := warmpool.Tally(list.Items); len(list.Items) != 1 || all != signed || signed.Ready+signed.Starting != 1 {
		t.Fatalf("%d pods after the fill; all %+v, signed %+v", len(list.Items), all, signed)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
