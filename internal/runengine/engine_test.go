// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/capacity"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalogkey"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner/runnertest"
)

func testBundle(secretVars string, secretEnv map[string]string) bundle.Bundle {
	b := bundle.Bundle{Command: []string{"true"}, SecretEnv: secretEnv}
	if secretVars != "" {
		b.SecretVars = []byte(secretVars)
	}
	return b
}

// once is an OnceFunc that counts what it ran.
type once struct {
	mu   sync.Mutex
	done map[string]error
	runs int
}

func (o *once) do(key string, f func() error) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err, ok := o.done[key]; ok {
		return err
	}
	if o.done == nil {
		o.done = map[string]error{}
	}
	o.runs++
	o.done[key] = f()
	return o.done[key]
}

type fakeCluster struct {
	t    *testing.T
	kube *fake.Clientset
	e    *Engine
	// podCreated runs when a run pod is created, before it is stored.
	podCreated func(*corev1.Pod)
}

func newFake(t *testing.T, objs ...runtime.Object) *fakeCluster {
	t.Helper()
	f := &fakeCluster{t: t, kube: runnertest.NewClientset(objs...)}
	f.kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if f.podCreated != nil {
			ca, ok := a.(k8stesting.CreateAction)
			if !ok {
				t.Errorf("create reactor got a %T", a)
				return true, nil, fmt.Errorf("create reactor got a %T", a)
			}
			pod, ok := ca.GetObject().(*corev1.Pod)
			if !ok {
				t.Errorf("created a %T in pods", ca.GetObject())
				return true, nil, fmt.Errorf("created a %T in pods", ca.GetObject())
			}
			f.podCreated(pod)
		}
		return false, nil, nil
	})
	f.kube.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "token" {
			return false, nil, nil
		}
		return true, &authv1.TokenRequest{Status: authv1.TokenRequestStatus{Token: "run-token"}}, nil
	})
	f.e = New(&kubeclient.Clients{Config: &rest.Config{Host: "https://fake"}, Kube: f.kube}, Options{})
	return f
}

// refuse makes the fake answer verb on resource with 403 Forbidden.
func (f *fakeCluster) refuse(verb, resource string) {
	f.kube.PrependReactor(verb, resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(podsResource, "", errors.New("no"))
	})
}

func (f *fakeCluster) ledger(kind string, limit int64) capacity.Ledger {
	f.t.Helper()
	l := capacity.Ledger{Kube: f.kube, Namespace: "runs", Group: "g", Kind: kind}
	if err := l.Ensure(f.t.Context(), limit); err != nil {
		f.t.Fatal(err)
	}
	return l
}

func claims(t *testing.T, l capacity.Ledger) []string {
	t.Helper()
	cm, err := l.Kube.CoreV1().ConfigMaps(l.Namespace).Get(t.Context(), l.ConfigMapName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range cm.Data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (f *fakeCluster) count(verb, resource string) int {
	n := 0
	for _, a := range f.kube.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource && a.GetSubresource() == "" {
			n++
		}
	}
	return n
}

// limitedGroup runs one at a time, with at most forks forks.
func limitedGroup(forks int64) Group {
	g := testGroup()
	runs := int64(1)
	g.MaxConcurrentRuns, g.MaxForks, g.PendingTimeout = &runs, &forks, 300*time.Millisecond
	return g
}

func request(g Group) Request {
	return Request{RunInfo: RunInfo{ID: "r1"}, Operation: OperationCreate, Group: g, Bundle: testBundle("", nil),
		Forks: 5, OutputLimit: 1024, Timeout: time.Minute}
}

// A pod that never starts ends the run as error, through the real runner;
// the claims are held while the pod exists and given back afterwards.
func TestRunClaimsAroundThePod(t *testing.T) {
	f := newFake(t)
	runs, forks := f.ledger(capacity.Runs, 1), f.ledger(capacity.Forks, 10)
	var during [][]string
	f.podCreated = func(*corev1.Pod) {
		// Reactors hold the fake's lock: read its tracker.
		for _, l := range []capacity.Ledger{runs, forks} {
			obj, err := f.kube.Tracker().Get(corev1.SchemeGroupVersion.WithResource("configmaps"), "runs", l.ConfigMapName())
			if err != nil {
				t.Error(err)
				return
			}
			cm, ok := obj.(*corev1.ConfigMap)
			if !ok {
				t.Errorf("the ledger %s is a %T", l.ConfigMapName(), obj)
				return
			}
			during = append(during, slices.Sorted(maps.Keys(cm.Data)))
		}
	}
	out, err := f.e.Run(t.Context(), request(limitedGroup(10)))
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != runner.StatusError || !strings.Contains(out.Message, "did not start within the pending timeout") {
		t.Errorf("result %+v", out.Result)
	}
	if want := [][]string{{"r1-create"}, {"r1-create"}}; fmt.Sprint(during) != fmt.Sprint(want) {
		t.Errorf("claims while the pod existed: %v, want %v", during, want)
	}
	if c := append(claims(t, runs), claims(t, forks)...); len(c) != 0 {
		t.Errorf("claims left after the run: %v", c)
	}
	if n := f.count("delete", "pods"); n != 1 {
		t.Errorf("%d pod deletions, want 1", n)
	}
	if !strings.Contains(out.Rendered, "kubeplay-run-") || strings.Contains(out.Rendered, "r1") {
		t.Errorf("rendered pod:\n%s", out.Rendered)
	}
}

func TestRunCapacityErrors(t *testing.T) {
	t.Run("too many forks", func(t *testing.T) {
		f := newFake(t)
		runs, _ := f.ledger(capacity.Runs, 1), f.ledger(capacity.Forks, 2)
		_, err := f.e.Run(t.Context(), request(limitedGroup(2)))
		var ce *CapacityError
		if !errors.As(err, &ce) || ce.Kind != capacity.Forks || ce.N != 5 || ce.Limit != 2 || ce.Waited != 0 {
			t.Fatalf("error %v (%+v)", err, ce)
		}
		if c := claims(t, runs); len(c) != 0 {
			t.Errorf("the run slot was not given back: %v", c)
		}
		if n := f.count("create", "pods"); n != 0 {
			t.Errorf("%d pods created", n)
		}
	})
	t.Run("no room within the pending timeout", func(t *testing.T) {
		f := newFake(t)
		runs := f.ledger(capacity.Runs, 1)
		if _, err := runs.Acquire(t.Context(), "other", 1, time.Hour); err != nil {
			t.Fatal(err)
		}
		_, err := f.e.Run(t.Context(), request(limitedGroup(10)))
		var ce *CapacityError
		if !errors.As(err, &ce) || ce.Kind != capacity.Runs || ce.Waited != 300*time.Millisecond || ce.Limit != 1 {
			t.Fatalf("error %v (%+v)", err, ce)
		}
		if c := claims(t, runs); !slices.Equal(c, []string{"other"}) {
			t.Errorf("claims %v, want only the other run's", c)
		}
	})
}

func TestRunReleaseFailureIsAWarning(t *testing.T) {
	f := newFake(t)
	f.ledger(capacity.Runs, 1)
	f.ledger(capacity.Forks, 10)
	var broken atomic.Bool
	f.kube.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		if broken.Load() {
			return true, nil, apierrors.NewServiceUnavailable("etcd is away")
		}
		return false, nil, nil
	})
	f.e.run = func(context.Context, runner.Spec) runner.Result {
		broken.Store(true)
		return runner.Result{Status: runner.StatusSuccessful}
	}
	out, err := f.e.Run(t.Context(), request(limitedGroup(10)))
	if err != nil || out.Status != runner.StatusSuccessful {
		t.Fatalf("%v %+v", err, out.Result)
	}
	var kinds []string
	for _, w := range out.Warnings {
		var re *ReleaseError
		if !errors.As(w, &re) {
			t.Fatalf("warning %v", w)
		}
		kinds = append(kinds, re.Kind)
	}
	if want := []string{capacity.Forks, capacity.Runs}; !slices.Equal(kinds, want) {
		t.Errorf("released %v, want the last claim first: %v", kinds, want)
	}
}

// The spec the engine hands the runner.
func TestRunSpec(t *testing.T) {
	f := newFake(t)
	var got runner.Spec
	f.e.run = func(_ context.Context, s runner.Spec) runner.Result {
		got = s
		return runner.Result{Status: runner.StatusFailed}
	}
	req := request(testGroup())
	req.Bundle = testBundle(`{"pw": "hunter2"}`, map[string]string{"KEY": "k3y"})
	req.Bundle.Env = map[string]string{"A": "1"}
	req.KeepPodOnFailure, req.Operation = true, OperationDestroy
	req.Label = &podspec.Label{Name: "custom", Type: podspec.TypePod, Spec: "containers:\n  - name: main\n    image: busybox\n"}
	out, err := f.e.Run(t.Context(), req)
	if err != nil || out.Status != runner.StatusFailed || out.Namespace != "" {
		t.Fatalf("%v %+v", err, out)
	}
	if got.Container != "main" || got.Pod.Labels["kubeplay.io/run"] != "r1" || !got.KeepPodOnFailure ||
		got.PendingTimeout != DefaultPendingTimeout || got.OutputLimit != 1024 {
		t.Errorf("spec %+v", got)
	}
	if got.Bundle.Env["KUBEPLAY_OPERATION"] != "destroy" || got.Bundle.Env["A"] != "1" || !strings.HasPrefix(got.Bundle.Marker, "\x1ekubeplay-") {
		t.Errorf("bundle env %v, marker %q", got.Bundle.Env, got.Bundle.Marker)
	}
	if _, ok := req.Bundle.Env["KUBEPLAY_OPERATION"]; ok {
		t.Error("the request's env was changed")
	}
	slices.Sort(got.Secrets)
	if !slices.Equal(got.Secrets, []string{"hunter2", "k3y"}) {
		t.Errorf("secrets %q", got.Secrets)
	}
	if !got.Bundle.PrivateOutput {
		t.Error("a run with secrets copies its output to the container's log, which nothing redacts")
	}
	// Without secrets, kubectl logs shows the output.
	if _, err := f.e.Run(t.Context(), request(testGroup())); err != nil || got.Bundle.PrivateOutput {
		t.Errorf("a run without secrets: %v, PrivateOutput %v", err, got.Bundle.PrivateOutput)
	}
}

// A check (--check --diff) never copies its output, which shows what the
// play renders from secrets, to the container's log, even without secrets.
func TestRunCheckPrivateOutput(t *testing.T) {
	f := newFake(t)
	var got runner.Spec
	f.e.run = func(_ context.Context, s runner.Spec) runner.Result {
		got = s
		return runner.Result{Status: runner.StatusSuccessful}
	}
	req := request(testGroup())
	req.Bundle.Check, req.Bundle.Diff = true, true
	if _, err := f.e.Run(t.Context(), req); err != nil || !got.Bundle.PrivateOutput {
		t.Errorf("a check without secrets: %v, PrivateOutput %v", err, got.Bundle.PrivateOutput)
	}
}

func TestRunGroupUnavailable(t *testing.T) {
	f := newFake(t)
	g := limitedGroup(10)
	g.Pod.Override = "spec: [no]"
	_, err := f.e.Run(t.Context(), request(g))
	if !errors.Is(err, ErrGroupUnavailable) {
		t.Fatalf("error %v", err)
	}
	if len(f.kube.Actions()) != 0 {
		t.Errorf("a run without a pod touched the cluster: %v", f.kube.Actions())
	}
}

func namespaceRequest() Request {
	req := request(testGroup())
	req.Label = &podspec.Label{Name: "sandbox", Type: podspec.TypeNamespace}
	return req
}

func TestRunNamespace(t *testing.T) {
	for _, c := range []struct {
		name string
		kept bool
	}{{"deleted", false}, {"kept with the pod", true}} {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(t)
			var got runner.Spec
			f.e.run = func(_ context.Context, s runner.Spec) runner.Result {
				got = s
				return runner.Result{Status: runner.StatusFailed, PodKept: c.kept}
			}
			out, err := f.e.Run(t.Context(), namespaceRequest())
			if err != nil || out.Namespace != "sandbox-r1" || len(out.Warnings) != 0 {
				t.Fatalf("%v %+v", err, out)
			}
			if got.Bundle.Env["KUBEPLAY_NAMESPACE"] != "sandbox-r1" || !strings.Contains(string(got.Bundle.Kubeconfig), "run-token") {
				t.Errorf("bundle env %v, kubeconfig %s", got.Bundle.Env, got.Bundle.Kubeconfig)
			}
			if !slices.Contains(got.Secrets, "run-token") {
				t.Errorf("the token is not redacted: %q", got.Secrets)
			}
			_, err = f.kube.CoreV1().Namespaces().Get(t.Context(), "sandbox-r1", metav1.GetOptions{})
			if exists := err == nil; exists != c.kept {
				t.Errorf("namespace exists %v, want %v (%v)", exists, c.kept, err)
			}
		})
	}
}

func TestRunNamespaceErrors(t *testing.T) {
	for _, c := range []struct {
		name, refused string
		// deleted: the namespace was made, so the run deletes it.
		deleted bool
	}{{"namespace refused", "namespaces", false}, {"account refused", "roles", true}} {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(t)
			f.refuse("create", c.refused)
			_, err := f.e.Run(t.Context(), namespaceRequest())
			var ne *NamespaceError
			if !errors.As(err, &ne) || ne.Deleting || ne.Namespace != "sandbox-r1" || ne.Label != "sandbox" || ne.Group != "g" {
				t.Fatalf("error %v", err)
			}
			if n := f.count("delete", "namespaces"); (n == 1) != c.deleted {
				t.Errorf("%d namespace deletions; want one only when the run made it", n)
			}
			if _, err := f.kube.CoreV1().Namespaces().Get(t.Context(), "sandbox-r1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("the half-made namespace is left: %v", err)
			}
			if n := f.count("create", "pods"); n != 0 {
				t.Errorf("%d pods created", n)
			}
		})
	}
	t.Run("delete fails", func(t *testing.T) {
		f := newFake(t)
		f.refuse("delete", "namespaces")
		f.e.run = func(context.Context, runner.Spec) runner.Result {
			return runner.Result{Status: runner.StatusSuccessful}
		}
		out, err := f.e.Run(t.Context(), namespaceRequest())
		var ne *NamespaceError
		if err != nil || len(out.Warnings) != 1 || !errors.As(out.Warnings[0], &ne) || !ne.Deleting || ne.Namespace != "sandbox-r1" {
			t.Fatalf("%v %v", err, out.Warnings)
		}
	})
	t.Run("destroy gets its own", func(t *testing.T) {
		f := newFake(t)
		f.e.run = func(context.Context, runner.Spec) runner.Result { return runner.Result{PodKept: true} }
		req := namespaceRequest()
		req.Operation = OperationDestroy
		if out, err := f.e.Run(t.Context(), req); err != nil || out.Namespace != "sandbox-r1-d" {
			t.Fatalf("%v %+v", err, out)
		}
	})
}

func TestClusterCA(t *testing.T) {
	f := newFake(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt", Namespace: "runs"},
		Data: map[string]string{"ca.crt": "root"}})
	if ca := string(f.e.clusterCA(t.Context(), "runs")); ca != "root" {
		t.Errorf("ca %q", ca)
	}
	f.e.clients.Config.CAData = []byte("own")
	if ca := string(f.e.clusterCA(t.Context(), "elsewhere")); ca != "own" {
		t.Errorf("fallback ca %q", ca)
	}
	f.e.clients.Config.CAData, f.e.clients.Config.CAFile = nil, "/nonexistent/ca.crt"
	if _, err := f.e.caData(); err == nil ||
		!strings.Contains(err.Error(), "/nonexistent/ca.crt") || !strings.Contains(err.Error(), "check that the file") {
		t.Errorf("an unreadable CA file: %v", err)
	}
}

func TestLog(t *testing.T) {
	var levels []slog.Level
	kube := fake.NewClientset()
	e := New(&kubeclient.Clients{Config: &rest.Config{}, Kube: kube}, Options{Log: func(l slog.Level, _ string, _ map[string]any) {
		levels = append(levels, l)
	}, Key: func(context.Context) (*catalogkey.Key, error) { return nodeKey, nil }})
	kube.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("down")
	})
	e.reapPods(t.Context(), testGroup())
	if !slices.Equal(levels, []slog.Level{slog.LevelWarn}) {
		t.Errorf("levels %v", levels)
	}
}

// The group's launch_retries reaches the runner, each retry is logged as a
// warning, and the attempts are in the outcome.
func TestRunLaunchRetries(t *testing.T) {
	var logged []string
	kube := runnertest.NewClientset()
	e := New(&kubeclient.Clients{Config: &rest.Config{}, Kube: kube}, Options{Log: func(l slog.Level, msg string, f map[string]any) {
		if l == slog.LevelWarn {
			logged = append(logged, fmt.Sprintf("%s %v %v", msg, f["attempt"], f["run"]))
		}
	}})
	e.run = func(_ context.Context, s runner.Spec) runner.Result {
		if s.LaunchRetries != 2 {
			t.Errorf("launch retries %d, want 2", s.LaunchRetries)
		}
		s.OnLaunchRetry(1, errors.New("pod p was deleted before it ran"))
		return runner.Result{Status: runner.StatusSuccessful, LaunchAttempts: 2}
	}
	g := testGroup()
	g.LaunchRetries = 2
	out, err := e.Run(t.Context(), request(g))
	if err != nil || out.LaunchAttempts != 2 {
		t.Fatalf("%v %+v", err, out)
	}
	if want := []string{"run pod launch failed; retrying with a fresh pod 1 r1"}; !slices.Equal(logged, want) {
		t.Errorf("warnings %q, want %q", logged, want)
	}
}
