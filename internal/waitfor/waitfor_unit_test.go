// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package waitfor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// The fake clientset ignores field selectors and resource versions, so each
// test keeps one pod in its namespace and changes it only once the watch is
// open (watched says when).

const ns = "runs"

// limit bounds every wait, so a broken wait fails the test instead of hanging
// it. The fake clientset cannot stream lists (WatchList), so the waits fall
// back to a plain list and watch, which every API server serves too.
func limit(t *testing.T) context.Context {
	t.Helper()
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// podA is the pod the tests wait for: a, with UID uid-a.
func podA() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: ns, UID: types.UID("uid-a")}}
}

// watched wraps a typed client and closes opened when its first watch is open.
type watched[L runtime.Object] struct {
	Deleter[L]
	once   sync.Once
	opened chan struct{}
}

func newWatched[L runtime.Object](c Deleter[L]) *watched[L] {
	return &watched[L]{Deleter: c, opened: make(chan struct{})}
}

func (w *watched[L]) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	wi, err := w.Deleter.Watch(ctx, o)
	if err == nil {
		w.once.Do(func() { close(w.opened) })
	}
	return wi, err
}

func (w *watched[L]) wait(t *testing.T) {
	t.Helper()
	select {
	case <-w.opened:
	case <-time.After(30 * time.Second):
		t.Fatal("the wait never opened a watch")
	}
}

func TestNamedSelectsByName(t *testing.T) {
	kube := fake.NewClientset(podA())
	var (
		mu        sync.Mutex
		selectors = map[string]string{}
	)
	record := func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		switch x := a.(type) {
		case k8stesting.ListAction:
			selectors["list"] = x.GetListRestrictions().Fields.String()
		case k8stesting.WatchAction:
			selectors["watch"] = x.GetWatchRestrictions().Fields.String()
		}
		return false, nil, nil
	}
	kube.PrependReactor("list", "pods", record)
	kube.PrependWatchReactor("pods", func(a k8stesting.Action) (bool, watch.Interface, error) {
		_, _, err := record(a)
		return false, nil, err
	})

	ctx := limit(t)
	lw := cache.ToListerWatcherWithContext(Named(kube.CoreV1().Pods(ns), "a"))
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{FieldSelector: "metadata.name=other"}); err != nil {
		t.Fatal(err)
	}
	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
	mu.Lock()
	defer mu.Unlock()
	for _, verb := range []string{"list", "watch"} {
		if got := selectors[verb]; got != "metadata.name=a" {
			t.Errorf("%s field selector = %q, want metadata.name=a (a caller's selector must not widen it)", verb, got)
		}
	}
}

func TestGoneWhenAlreadyGone(t *testing.T) {
	kube := fake.NewClientset()
	if err := Gone(limit(t), Named(kube.CoreV1().Pods(ns), "a"), &corev1.Pod{}); err != nil {
		t.Fatalf("Gone on a pod that never existed: %v", err)
	}
}

func TestGoneWaitsForTheDeletion(t *testing.T) {
	kube := fake.NewClientset(podA())
	pods := newWatched(kube.CoreV1().Pods(ns))
	done := make(chan error, 1)
	go func() { done <- Gone(limit(t), Named(pods, "a"), &corev1.Pod{}) }()
	pods.wait(t)
	select {
	case err := <-done:
		t.Fatalf("Gone returned (%v) while the pod still exists", err)
	default:
	}
	if err := kube.CoreV1().Pods(ns).Delete(context.Background(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Gone after the deletion: %v", err)
	}
}

func TestGoneEndsWithItsContext(t *testing.T) {
	kube := fake.NewClientset(podA())
	pods := newWatched(kube.CoreV1().Pods(ns))
	ctx, cancel := context.WithCancel(limit(t))
	done := make(chan error, 1)
	go func() { done <- Gone(ctx, Named(pods, "a"), &corev1.Pod{}) }()
	pods.wait(t)
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Gone reported a pod that still exists as gone when its context ended")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Gone did not return when its context ended")
	}

	ended, stop := context.WithCancel(context.Background())
	stop()
	if err := Gone(ended, Named(kube.CoreV1().Pods(ns), "a"), &corev1.Pod{}); err == nil {
		t.Fatal("Gone with an ended context returned nil for a pod that exists")
	}
}

func running(ev watch.Event) (bool, error) {
	p, ok := ev.Object.(*corev1.Pod)
	return ok && p.Status.Phase == corev1.PodRunning, nil
}

func TestUntilSeesTheCurrentState(t *testing.T) {
	p := podA()
	p.Status.Phase = corev1.PodRunning
	kube := fake.NewClientset(p)
	ev, err := Until(limit(t), Named(kube.CoreV1().Pods(ns), "a"), &corev1.Pod{}, running)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := ev.Object.(*corev1.Pod)
	if !ok {
		t.Fatalf("event %s carries a %T, want a pod", ev.Type, ev.Object)
	}
	if ev.Type != watch.Added || got.Name != "a" {
		t.Fatalf("event %s %v, want the pod as listed (Added)", ev.Type, ev.Object)
	}
}

func TestUntilWaitsForTheCondition(t *testing.T) {
	kube := fake.NewClientset(podA())
	pods := newWatched(kube.CoreV1().Pods(ns))
	type result struct {
		ev  *watch.Event
		err error
	}
	done := make(chan result, 1)
	go func() {
		ev, err := Until(limit(t), Named(pods, "a"), &corev1.Pod{}, running)
		done <- result{ev, err}
	}()
	pods.wait(t)
	p := podA()
	p.Status.Phase = corev1.PodRunning
	if _, err := kube.CoreV1().Pods(ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	got, ok := r.ev.Object.(*corev1.Pod)
	if !ok {
		t.Fatalf("event %s carries a %T, want a pod", r.ev.Type, r.ev.Object)
	}
	if r.ev.Type != watch.Modified || got.Status.Phase != corev1.PodRunning {
		t.Fatalf("event %s %+v, want the update to Running", r.ev.Type, r.ev.Object)
	}
}

func TestUntilSeesDeleted(t *testing.T) {
	kube := fake.NewClientset(podA())
	pods := newWatched(kube.CoreV1().Pods(ns))
	var seen []watch.EventType
	done := make(chan error, 1)
	go func() {
		_, err := Until(limit(t), Named(pods, "a"), &corev1.Pod{}, func(ev watch.Event) (bool, error) {
			seen = append(seen, ev.Type)
			if ev.Type == watch.Deleted {
				return false, errors.New("deleted")
			}
			return false, nil
		})
		done <- err
	}()
	pods.wait(t)
	if err := kube.CoreV1().Pods(ns).Delete(context.Background(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil || err.Error() != "deleted" {
		t.Fatalf("Until returned %v, want the condition's error on the Deleted event", err)
	}
	if len(seen) != 2 || seen[0] != watch.Added || seen[1] != watch.Deleted {
		t.Fatalf("the condition saw %v, want [ADDED DELETED]", seen)
	}
}

func TestUntilEndsWithItsContext(t *testing.T) {
	kube := fake.NewClientset(podA())
	ctx, cancel := context.WithTimeout(limit(t), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	ev, err := Until(ctx, Named(kube.CoreV1().Pods(ns), "a"), &corev1.Pod{}, running)
	if err == nil {
		t.Fatalf("Until returned %v without an error for a pod that never runs", ev)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("Until took %s to notice its context ended", d)
	}
}

func TestDeleteAlreadyGone(t *testing.T) {
	kube := fake.NewClientset()
	if err := Delete(limit(t), kube.CoreV1().Pods(ns), "a", metav1.DeleteOptions{}, &corev1.Pod{}); err != nil {
		t.Fatalf("Delete of a missing pod: %v, want nil", err)
	}
}

func TestDeletePassesOptionsAndRemoves(t *testing.T) {
	kube := fake.NewClientset(podA())
	var got metav1.DeleteOptions
	kube.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		da, ok := a.(k8stesting.DeleteAction)
		if !ok {
			t.Errorf("delete reactor got a %T", a)
			return true, nil, fmt.Errorf("delete reactor got a %T", a)
		}
		got = da.GetDeleteOptions()
		return false, nil, nil
	})
	uid := types.UID("uid-a")
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
	if err := Delete(limit(t), kube.CoreV1().Pods(ns), "a", opts, &corev1.Pod{}); err != nil {
		t.Fatal(err)
	}
	if got.Preconditions == nil || got.Preconditions.UID == nil || *got.Preconditions.UID != uid {
		t.Errorf("delete options %+v, want the UID precondition passed through", got)
	}
	if _, err := kube.CoreV1().Pods(ns).Get(context.Background(), "a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after Delete the pod is still there (%v)", err)
	}
}

func TestDeleteReturnsOtherErrors(t *testing.T) {
	kube := fake.NewClientset(podA())
	kube.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("pods"), "a", errors.New("no"))
	})
	err := Delete(limit(t), kube.CoreV1().Pods(ns), "a", metav1.DeleteOptions{}, &corev1.Pod{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("Delete = %v, want the Forbidden error", err)
	}
}

// TestDeleteWaitsForFinalizers: an accepted delete of an object with
// finalizers leaves it in place; Delete returns only once it is removed.
func TestDeleteWaitsForFinalizers(t *testing.T) {
	kube := fake.NewClientset(podA())
	kube.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, nil // accepted; the finalizers keep the pod for now
	})
	pods := newWatched(kube.CoreV1().Pods(ns))
	done := make(chan error, 1)
	go func() { done <- Delete(limit(t), pods, "a", metav1.DeleteOptions{}, &corev1.Pod{}) }()
	pods.wait(t)
	select {
	case err := <-done:
		t.Fatalf("Delete returned (%v) while the pod is still there", err)
	default:
	}
	if err := kube.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), ns, "a"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Delete once the pod is removed: %v", err)
	}
}

func TestUntilPresent(t *testing.T) {
	absent := errors.New("gone before the wait")
	if _, err := UntilPresent(limit(t), Named(fake.NewClientset().CoreV1().Pods(ns), "a"), &corev1.Pod{}, running, absent); !errors.Is(err, absent) {
		t.Fatalf("a pod that is not there: %v, want %v", err, absent)
	}
	p := podA()
	p.Status.Phase = corev1.PodRunning
	kube := fake.NewClientset(p)
	ev, err := UntilPresent(limit(t), Named(kube.CoreV1().Pods(ns), "a"), &corev1.Pod{}, running, absent)
	if err != nil {
		t.Fatalf("a running pod: %v", err)
	}
	if got, ok := ev.Object.(*corev1.Pod); !ok || got.Name != "a" {
		t.Fatalf("a running pod: event %v", ev)
	}
}

// A first list from a lagging watch cache (resourceVersion "0") that does
// not yet hold a pod just created does not make the pod absent: a
// consistent list holds it, and the watch brings it. CI saw a run end as
// "deleted before it ran" while its pod was being scheduled.
func TestUntilPresentStaleFirstList(t *testing.T) {
	absent := errors.New("gone before the wait")
	p := podA()
	p.ResourceVersion, p.Status.Phase = "6", corev1.PodRunning
	var mu sync.Mutex
	var lists []string
	consistent := make(chan struct{}) // the watch brings the pod after the consistent list
	var once sync.Once
	ctx := limit(t)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
			mu.Lock()
			lists = append(lists, o.ResourceVersion)
			mu.Unlock()
			if o.ResourceVersion == "0" { // the watch cache, behind the create
				return &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "5"}}, nil
			}
			once.Do(func() { close(consistent) })
			return &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "6"}, Items: []corev1.Pod{*p}}, nil
		},
		WatchFuncWithContext: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			if o.ResourceVersion != "5" {
				return nil, fmt.Errorf("watch from %q, want from the first list's 5", o.ResourceVersion)
			}
			w := watch.NewFake()
			go func() {
				select {
				case <-consistent:
					w.Add(p.DeepCopy())
				case <-ctx.Done():
				}
			}()
			return w, nil
		},
	}
	ev, err := UntilPresent(ctx, lw, &corev1.Pod{}, running, absent)
	if err != nil {
		t.Fatalf("a pod the first list missed: %v (lists at versions %q)", err, lists)
	}
	if got, ok := ev.Object.(*corev1.Pod); !ok || got.Name != "a" {
		t.Fatalf("event %v", ev)
	}
	if mu.Lock(); len(lists) < 2 || lists[0] != "0" || lists[1] != "" {
		t.Errorf("lists at versions %q, want the informer's \"0\" then a consistent \"\"", lists)
	}
	mu.Unlock()
}

// Gone does not take a lagging watch cache's first list for the object's
// end: it waits until a consistent list lacks it too, or the watch says it
// was deleted.
func TestGoneStaleFirstList(t *testing.T) {
	p := podA()
	p.ResourceVersion = "6"
	consistent, deleted := make(chan struct{}), make(chan struct{})
	var once sync.Once
	ctx := limit(t)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
			if o.ResourceVersion == "0" {
				return &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "5"}}, nil
			}
			once.Do(func() { close(consistent) })
			return &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "6"}, Items: []corev1.Pod{*p}}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			w := watch.NewFake()
			go func() {
				select {
				case <-deleted:
					w.Add(p.DeepCopy())
					w.Delete(p.DeepCopy())
				case <-ctx.Done():
				}
			}()
			return w, nil
		},
	}
	done := make(chan error, 1)
	go func() { done <- Gone(ctx, lw, &corev1.Pod{}) }()
	select {
	case err := <-done:
		t.Fatalf("Gone returned (%v) on a first list that missed a pod that is there", err)
	case <-consistent:
	}
	select {
	case err := <-done:
		t.Fatalf("Gone returned (%v) while a consistent list holds the pod", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(deleted)
	if err := <-done; err != nil {
		t.Fatalf("Gone once the pod is deleted: %v", err)
	}
}

func TestQuotaExceeded(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	if !QuotaExceeded(apierrors.NewForbidden(pods, "p", errors.New("exceeded quota: q"))) ||
		QuotaExceeded(apierrors.NewForbidden(pods, "p", errors.New("no"))) ||
		QuotaExceeded(errors.New("exceeded quota")) {
		t.Error("QuotaExceeded does not tell the quota's refusal from other errors")
	}
}

func TestQuotaConflict(t *testing.T) {
	lost := apierrors.NewConflict(schema.GroupResource{Resource: "resourcequotas"}, "runs", errors.New("the object has been modified"))
	if !QuotaConflict(lost) || !QuotaConflict(fmt.Errorf("creating: %w", lost)) {
		t.Error("QuotaConflict does not know the quota admission's lost race")
	}
	for _, err := range []error{
		apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "p", errors.New("the object has been modified")),
		apierrors.NewAlreadyExists(schema.GroupResource{Resource: "resourcequotas"}, "runs"),
		errors.New(`Operation cannot be fulfilled on resourcequotas "runs"`),
		nil,
	} {
		if QuotaConflict(err) {
			t.Errorf("QuotaConflict(%v) = true", err)
		}
	}
}

// watchedQuota is a fake clientset holding one ResourceQuota; opened
// receives each watch of quotas as it starts.
func watchedQuota() (*fake.Clientset, *corev1.ResourceQuota, chan struct{}) {
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "runs", Namespace: ns}}
	kube := fake.NewClientset(quota)
	opened := make(chan struct{}, 8)
	kube.PrependWatchReactor("resourcequotas", func(k8stesting.Action) (bool, watch.Interface, error) {
		opened <- struct{}{}
		return false, nil, nil
	})
	return kube, quota, opened
}

func TestQuotaChange(t *testing.T) {
	kube, quota, opened := watchedQuota()

	start := time.Now()
	changed, err := QuotaChange(limit(t), kube, ns, 100*time.Millisecond)
	if err != nil || changed || time.Since(start) < 100*time.Millisecond {
		t.Fatalf("without a change QuotaChange must return unchanged after the recheck: changed %v, %v after %s", changed, err, time.Since(start))
	}
	<-opened

	done := make(chan bool, 1)
	go func() {
		changed, err := QuotaChange(limit(t), kube, ns, time.Minute)
		if err != nil {
			t.Error(err)
		}
		done <- changed
	}()
	<-opened
	quota.Status.Used = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}
	if _, err := kube.CoreV1().ResourceQuotas(ns).UpdateStatus(context.Background(), quota, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if !<-done {
		t.Fatal("QuotaChange did not report the quota's change")
	}

	ctx, cancel := context.WithCancel(limit(t))
	cancel()
	if _, err := QuotaChange(ctx, kube, ns, time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("QuotaChange with a canceled context: %v", err)
	}
}

// A QuotaWait rechecks a quota that does not change later each time, and
// at once again after a change.
func TestQuotaWaitBacksOff(t *testing.T) {
	kube, quota, opened := watchedQuota()
	q := QuotaWait{Kube: kube, Namespace: ns}
	start := time.Now()
	if err := q.Wait(limit(t)); err != nil || time.Since(start) < quotaRecheck {
		t.Fatalf("an unchanged quota: %v after %s, want the first recheck of %s", err, time.Since(start), quotaRecheck)
	}
	<-opened
	if q.recheck != 2*quotaRecheck {
		t.Fatalf("after an unchanged wait the recheck is %s, want %s", q.recheck, 2*quotaRecheck)
	}
	done := make(chan error, 1)
	go func() { done <- q.Wait(limit(t)) }()
	<-opened
	quota.Status.Used = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}
	if _, err := kube.CoreV1().ResourceQuotas(ns).UpdateStatus(context.Background(), quota, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || q.recheck != quotaRecheck {
		t.Fatalf("after a change: %v, recheck %s, want %s", err, q.recheck, quotaRecheck)
	}
	q.recheck = maxQuotaRecheck
	ctx, cancel := context.WithTimeout(limit(t), 10*time.Millisecond)
	defer cancel()
	if err := q.Wait(ctx); err == nil || q.recheck != maxQuotaRecheck {
		t.Fatalf("a wait cut by its context: %v, recheck %s, want an error and the cap %s", err, q.recheck, maxQuotaRecheck)
	}
}

func TestListsWatchesBetweenLists(t *testing.T) {
	kube := fake.NewClientset()
	pods := newWatched(kube.CoreV1().Pods(ns))
	lists := 0
	done := make(chan error, 1)
	go func() {
		_, err := Lists(limit(t), pods, metav1.ListOptions{}, func(l *corev1.PodList) (bool, error) {
			lists++
			return len(l.Items) == 1, nil
		})
		done <- err
	}()
	pods.wait(t)
	if _, err := kube.CoreV1().Pods(ns).Create(context.Background(), podA(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || lists != 2 {
		t.Fatalf("Lists: %v after %d lists, want the pod on the second list", err, lists)
	}

	ctx, cancel := context.WithCancel(limit(t))
	cancel()
	got, err := Lists(ctx, kube.CoreV1().Pods(ns), metav1.ListOptions{}, func(*corev1.PodList) (bool, error) { return false, nil })
	if !errors.Is(err, context.Canceled) || got == nil || len(got.Items) != 1 {
		t.Fatalf("Lists with a canceled context: %v, %v", got, err)
	}
}

func TestStartFailure(t *testing.T) {
	pod := func(reasons ...string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
		for i, r := range reasons {
			cs := corev1.ContainerStatus{Name: fmt.Sprintf("c%d", i)}
			if r != "" {
				cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: r, Message: "why"}
			}
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, cs)
		}
		return p
	}
	if msg, ok := StartFailure(pod("", "ContainerCreating", "ErrImageNeverPull")); !ok || msg != "container c2 of pod ns/p cannot start: ErrImageNeverPull: why" {
		t.Errorf("StartFailure = %q, %v", msg, ok)
	}
	if msg, ok := StartFailure(pod("ContainerCreating", "")); ok {
		t.Errorf("a container still being created is not a failure: %q", msg)
	}
}
