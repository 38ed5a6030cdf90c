// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

// Package warmpool keeps a container group's warm pods, Nodepool's
// min-ready nodes: pods of a run pod's template started ahead of the runs
// that will use them. A run claims a ready warm pod with an update that
// carries the pod's resourceVersion, so two runs, in one process or two,
// never get the same pod; the claimed pod becomes a run pod (it gets the
// run's labels and deadline) and is deleted after its run like any other.
// Fill tops the pool up again.
//
// A warm pod's spec is the run pod's, with a deadline of MaxAge and a
// worker that waits for its run without a start timeout: a pool
// nobody fills or drains any more (its group was removed from a lost state)
// ends by itself, and the group's next sweep deletes what is left.
//
// Whoever may create pods in the group's namespace can copy a warm pod's
// labels, so a fill signs each pod it creates with the catalog key (see
// Sign), and a run claims, and a fill or drain deletes, only pods whose
// signatures hold. Others are reported (Template.OnRefused) and left.
package warmpool

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalogkey"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/waitfor"
)

const (
	// LabelRevision marks a warm pod and names its template's revision.
	LabelRevision = "kubeplay.io/warm-revision"
	// MaxAge is a warm pod's activeDeadlineSeconds. A claim may only lower a
	// deadline, so a run whose timeout reaches past what is left of it
	// takes another pod.
	MaxAge = 24 * time.Hour
	// podNamePrefix is the generateName of warm pods; they keep their name
	// when claimed.
	podNamePrefix = "kubeplay-warm-"
)

// Template is one pool: the pods of one group, for its own pod or for one
// node label.
type Template struct {
	Group, Namespace string
	// Label names the node label; "" for the group's own pod.
	Label string
	// Pod is the run pod as the engine renders it, without a run id.
	Pod *corev1.Pod
	// Key signs the pods a fill creates and verifies those a run claims;
	// without it nothing is created or claimed.
	Key *catalogkey.Key
	// OnRefused, when set, is told of each pod that carries the pool's
	// labels but whose signatures do not hold: it is neither claimed nor,
	// unless kubeplay made it (Ours), deleted.
	OnRefused func(*RefusedError)
	// OnFill, when set, is called once a fill holds the pool (no other fill
	// of it in this process is under way) and is about to list it.
	OnFill func()
}

// check verifies p as a warm pod of t's group and label at revision rev.
func (t Template) check(p *corev1.Pod, rev string) *RefusedError {
	var r *RefusedError
	if err := Verify(t.Key, t.owner(rev), p); errors.As(err, &r) {
		return r
	}
	return nil
}

func (t Template) refused(r *RefusedError) {
	if t.OnRefused != nil {
		t.OnRefused(r)
	}
}

// Revision identifies the pod spec a pool keeps: warm pods of another
// revision never serve a run. Metadata is left out, since a claim sets it,
// and so is the deadline, which a claim lowers.
func Revision(pod *corev1.Pod) string {
	spec := pod.Spec.DeepCopy()
	spec.ActiveDeadlineSeconds = nil
	b, _ := json.Marshal(spec)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// selector selects the warm pods of t's pool, of any revision, that no run
// has claimed.
func (t Template) selector() string {
	return GroupSelector(t.Group) + "," + labelTerm(t.Label)
}

// GroupSelector selects the group's unclaimed warm pods, of every pool.
func GroupSelector(group string) string {
	return managed.Selector(managed.LabelContainerGroup, group, LabelRevision, "") + ",!" + managed.LabelRun
}

func labelTerm(label string) string {
	if label == "" {
		return "!" + managed.LabelNodeLabel
	}
	return managed.LabelNodeLabel + "=" + label
}

// warmPod is a fresh warm pod of t.
func (t Template) warmPod(rev string) *corev1.Pod {
	p := t.Pod.DeepCopy()
	p.Name, p.GenerateName, p.Namespace = "", podNamePrefix, t.Namespace
	p.ResourceVersion = ""
	p.Labels = maps.Clone(p.Labels)
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	delete(p.Labels, managed.LabelRun)
	p.Labels[managed.LabelManagedBy] = managed.ManagedByValue
	p.Labels[managed.LabelContainerGroup] = t.Group
	p.Labels[LabelRevision] = rev
	if t.Label != "" {
		p.Labels[managed.LabelNodeLabel] = t.Label
	} else {
		delete(p.Labels, managed.LabelNodeLabel)
	}
	p.Spec.ActiveDeadlineSeconds = ptr.To(int64(MaxAge / time.Second))
	// The default worker ends a pod that no run used within 45 s; a warm
	// pod waits for its run as long as its deadline lets it.
	podspec.WaitForRuns(p)
	return p
}

// Counts is a pool's state.
type Counts struct {
	// Ready pods can be claimed at once; Starting ones are on their way.
	Ready, Starting int
}

// Ready reports a warm pod whose first container runs.
func Ready(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || len(p.Spec.Containers) == 0 {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == p.Spec.Containers[0].Name {
			return cs.State.Running != nil
		}
	}
	return false
}

// usable reports a warm pod that is ready or may still become so.
func usable(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
		return false
	}
	_, failed := waitfor.StartFailure(p)
	return !failed
}

// Count gives the state of the group's pools, all revisions and labels
// together: the pods that key verifies as the group's.
func Count(ctx context.Context, kube kubernetes.Interface, key *catalogkey.Key, namespace, group string) (Counts, error) {
	list, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: GroupSelector(group)})
	if err != nil {
		return Counts{}, err
	}
	pods := slices.DeleteFunc(list.Items, func(p corev1.Pod) bool { return Verify(key, groupOwner(group, &p), &p) != nil })
	return Tally(pods), nil
}

// groupOwner is what a warm pod of group says it was made for.
func groupOwner(group string, p *corev1.Pod) Owner {
	return Owner{Kind: KindWarm, Group: group, Label: p.Labels[managed.LabelNodeLabel], Revision: p.Labels[LabelRevision]}
}

// Tally counts the warm pods among pods.
func Tally(pods []corev1.Pod) Counts {
	var c Counts
	for i := range pods {
		switch p := &pods[i]; {
		case Ready(p):
			c.Ready++
		case usable(p):
			c.Starting++
		}
	}
	return c
}

// fills serializes the fills of one pool in this process, so that ten runs
// ending together create its missing pods once, not ten times.
var fills sync.Map // pool key -> *sync.Mutex

// Fill makes t's pool hold n pods of its revision: it deletes pods of other
// revisions and pods that ended or cannot start, creates the missing ones
// without waiting for them to start, and deletes the surplus that another
// process's fill may have made. It returns how many pods it created. A
// quota that refuses a pod ends the fill without an error: a group that
// is being applied does not wait for room its runs may never give back.
func Fill(ctx context.Context, kube kubernetes.Interface, t Template, n int) (int, error) {
	return fill(ctx, kube, t, n, false)
}

// Refill is Fill after a run claimed a pod or ended, in the background:
// a quota that refuses a pod is waited out until ctx ends. The quota
// counts a finished run's pod until the kubelet has stopped it, which
// takes a second or two on a busy node; a refill that waited for that
// pod to be gone started its replacement later, and one that gave up at
// the refusal left the pool short until the next run ended.
func Refill(ctx context.Context, kube kubernetes.Interface, t Template, n int) (int, error) {
	return fill(ctx, kube, t, n, true)
}

func fill(ctx context.Context, kube kubernetes.Interface, t Template, n int, waitQuota bool) (int, error) {
	if t.Key == nil {
		return 0, fmt.Errorf("filling the warm pool of container group %q: %w", t.Group, ErrNoKey)
	}
	v, _ := fills.LoadOrStore(t.Namespace+"\x00"+t.selector(), &sync.Mutex{})
	if mu, ok := v.(*sync.Mutex); ok {
		mu.Lock()
		defer mu.Unlock()
	}
	if t.OnFill != nil {
		t.OnFill()
	}
	total, room := 0, waitfor.QuotaWait{Kube: kube, Namespace: t.Namespace}
	for {
		created, refused, err := fillOnce(ctx, kube, t, n)
		total += created
		if !refused || !waitQuota || err != nil {
			return total, err
		}
		// The pool may have changed while the quota was full (claims,
		// another process's fill): the next round lists it again.
		if room.Wait(ctx) != nil {
			return total, nil // ctx ended: the pool is short, which is no error
		}
	}
}

// fillOnce is one round of fill: it reports whether a quota refused a pod.
func fillOnce(ctx context.Context, kube kubernetes.Interface, t Template, n int) (created int, refused bool, err error) {
	pods := kube.CoreV1().Pods(t.Namespace)
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: t.selector()})
	if err != nil {
		return 0, false, err
	}
	rev := Revision(t.Pod)
	var keep, drop []*corev1.Pod
	for i := range list.Items {
		p := &list.Items[i]
		r := t.check(p, p.Labels[LabelRevision])
		if r != nil && p.DeletionTimestamp == nil {
			t.refused(r)
		}
		switch {
		case r != nil && !r.Ours:
			// Not ours: neither kept, nor deleted, nor waited for.
		case p.DeletionTimestamp != nil:
			drop = append(drop, p) // only waited for
		case r == nil && p.Labels[LabelRevision] == rev && usable(p):
			keep = append(keep, p)
		default:
			drop = append(drop, p)
		}
	}
	// Surplus: starting pods go first, ready ones are worth more.
	for len(keep) > n {
		i := len(keep) - 1
		for j, p := range keep {
			if !Ready(p) {
				i = j
				break
			}
		}
		drop = append(drop, keep[i])
		keep = append(keep[:i], keep[i+1:]...)
	}
	gone, err := deleteUnclaimed(ctx, kube, drop)
	errs := []error{err}
	if len(keep) < n {
		// The quota counts a deleted pod until it is gone: wait for that
		// before creating its replacement.
		errs = append(errs, waitGone(ctx, kube, t.Namespace, gone))
	}
	for range n - len(keep) {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		err := t.create(ctx, kube, rev)
		// A quota full, or contended past create's resends: not an error,
		// the pool is short until room comes.
		if waitfor.QuotaExceeded(err) || waitfor.QuotaConflict(err) {
			refused = true
			break
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("creating a warm pod of container group %q: %w", t.Group, err))
			break
		}
		created++
	}
	return created, refused, errors.Join(errs...)
}

// createTimeout bounds the creation and signing of one warm pod.
const createTimeout = 10 * time.Second

// create creates and signs a warm pod of revision rev. A cancel of ctx
// (Ctrl-C, a provider that Terraform stops) does not split the two: a
// create canceled while the API server answers may have made a pod whose
// name the client never read, which nothing could sign, claim or delete.
func (t Template) create(ctx context.Context, kube kubernetes.Interface, rev string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
	defer cancel()
	// Quota admission's lost race made nothing: sent again.
	pace := kubeclient.NewRetry(conflictBackoff)
	for {
		p, err := kube.CoreV1().Pods(t.Namespace).Create(ctx, t.warmPod(rev), metav1.CreateOptions{})
		if err == nil {
			return t.sign(ctx, kube, p, rev)
		}
		if !pace.AgainIf(ctx, waitfor.QuotaConflict(err)) {
			return err
		}
	}
}

// conflictBackoff paces the resends of a warm pod's create that quota
// admission refused with a conflict: the other creates' update is done at
// once, so the steps are short.
var conflictBackoff = wait.Backoff{Steps: 6, Duration: 50 * time.Millisecond, Factor: 2, Jitter: 0.5}

// sign signs p, just created at revision rev; an unsigned pod is never
// claimed, so one that cannot be signed is deleted again.
func (t Template) sign(ctx context.Context, kube kubernetes.Interface, p *corev1.Pod, rev string) error {
	_, err := Sign(ctx, kube, t.Key, t.owner(rev), p)
	if err != nil {
		derr := kube.CoreV1().Pods(p.Namespace).Delete(context.WithoutCancel(ctx), p.Name, managed.DeleteOptions(p.UID))
		if derr != nil && !apierrors.IsNotFound(derr) && !apierrors.IsConflict(derr) {
			err = fmt.Errorf("%w; deleting the unsigned pod failed: %v", err, derr)
		}
	}
	return err
}

// deletePod deletes an unclaimed warm pod. The delete is conditioned on
// the resourceVersion read, so a pod that a run claimed meanwhile is left
// to it; a conflict caused by anything else (the kubelet's status updates)
// reads the pod again and retries.
func deletePod(ctx context.Context, kube kubernetes.Interface, p *corev1.Pod) (deleted bool, err error) {
	pods := kube.CoreV1().Pods(p.Namespace)
	for {
		err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &p.UID, ResourceVersion: &p.ResourceVersion}})
		switch {
		case err == nil:
			return true, nil
		case apierrors.IsNotFound(err):
			return false, nil
		case !apierrors.IsConflict(err):
			return false, fmt.Errorf("deleting warm pod %s: %w", p.Name, err)
		}
		q, err := pods.Get(ctx, p.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("deleting warm pod %s: %w", p.Name, err)
		case q.UID != p.UID:
			return false, nil // gone, and its name taken by another pod: not this one to delete
		}
		if _, claimed := q.Labels[managed.LabelRun]; claimed {
			return false, nil
		}
		if q.DeletionTimestamp != nil {
			return true, nil // deleted by someone else: gone soon
		}
		p = q
	}
}

// Drain deletes all the group's unclaimed warm pods, of every pool: those
// that key verifies as the group's (see Retain).
func Drain(ctx context.Context, kube kubernetes.Interface, key *catalogkey.Key, namespace, group string, onRefused func(*RefusedError)) error {
	return Retain(ctx, kube, key, namespace, group, nil, onRefused)
}

// Claim is what a run sets on the warm pod it takes.
type Claim struct {
	// Labels and Annotations are the run pod's; they replace the warm
	// pod's labels and are added to its annotations.
	Labels, Annotations map[string]string
	// Timeout is the deadline a fresh pod of the run would get: the claimed
	// pod's deadline becomes its age plus this.
	Timeout time.Duration
}

// Take claims a ready pod of t's pool for a run. While none is ready and
// some are starting it watches them, so a run that comes just after a
// claim waits the rest of a pod's start, not the whole of it. It returns
// nil, without an error, when the pool has no pod it can use: the run then
// makes its own.
func Take(ctx context.Context, kube kubernetes.Interface, t Template, c Claim) (*corev1.Pod, error) {
	pods := kube.CoreV1().Pods(t.Namespace)
	rev := Revision(t.Pod)
	sel := t.selector() + "," + LabelRevision + "=" + rev
	var got *corev1.Pod
	reported := map[types.UID]bool{}
	_, err := waitfor.Lists(ctx, pods, metav1.ListOptions{LabelSelector: sel}, func(list *corev1.PodList) (bool, error) {
		var ready []*corev1.Pod
		starting := false
		for i := range list.Items {
			p := &list.Items[i]
			r := t.check(p, rev)
			switch {
			case r != nil:
				// Not a pod kubeplay made of this template, or changed since:
				// never a run's. A fill deletes it when it is ours.
				if Ready(p) && !reported[p.UID] {
					reported[p.UID] = true
					t.refused(r)
				}
			case !outlives(p, c.Timeout):
				// Its deadline comes before the run's would: never this run's.
			case Ready(p):
				ready = append(ready, p)
			case usable(p):
				starting = true
			}
		}
		// Runs that start together spread over the ready pods.
		rand.Shuffle(len(ready), func(i, j int) { ready[i], ready[j] = ready[j], ready[i] })
		for _, p := range ready {
			claimed, err := claim(ctx, kube, t.Key, p, c)
			if claimed != nil || err != nil {
				got = claimed
				return true, err
			}
		}
		// Every ready pod went to another run, whose claims the watch sees,
		// or some are starting; with neither, the run makes its own pod.
		return len(ready) == 0 && !starting, nil
	})
	return got, err
}

// claimDeadline is the activeDeadlineSeconds p gets when a run of timeout
// claims it, its age plus the timeout, and whether p may get it: a claim
// may only lower a deadline.
func claimDeadline(p *corev1.Pod, timeout time.Duration) (int64, bool) {
	deadline := int64(timeout/time.Second) + 1
	if p.Status.StartTime != nil {
		deadline += int64(time.Since(p.Status.StartTime.Time) / time.Second)
	}
	cur := p.Spec.ActiveDeadlineSeconds
	return deadline, cur == nil || deadline <= *cur
}

// outlives reports whether p's deadline leaves room for a run of timeout.
func outlives(p *corev1.Pod, timeout time.Duration) bool {
	_, ok := claimDeadline(p, timeout)
	return ok
}

// claim takes p for a run, or returns nil when another run took it first
// or its deadline is too near. The claim signs p as the run's pod in the
// same update, so that the orphan sweep knows it as kubeplay's.
func claim(ctx context.Context, kube kubernetes.Interface, key *catalogkey.Key, p *corev1.Pod, c Claim) (*corev1.Pod, error) {
	deadline, ok := claimDeadline(p, c.Timeout)
	if !ok {
		return nil, nil
	}
	q := p.DeepCopy()
	q.Labels = maps.Clone(c.Labels)
	if q.Annotations == nil {
		q.Annotations = map[string]string{}
	}
	maps.Copy(q.Annotations, c.Annotations)
	if key != nil {
		q.Annotations[AnnotationRunSignature] = RunSignature(key, q)
	}
	q.Spec.ActiveDeadlineSeconds = &deadline
	// The update carries p's resourceVersion: of two claims, one conflicts.
	got, err := kube.CoreV1().Pods(p.Namespace).Update(ctx, q, metav1.UpdateOptions{FieldManager: managed.FieldManager})
	switch {
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("claiming warm pod %s: %w", p.Name, err)
	}
	if !Ready(got) {
		// It stopped between the list and the claim: it is the run's now,
		// so the run deletes it, and makes its own pod.
		_ = kube.CoreV1().Pods(got.Namespace).Delete(context.WithoutCancel(ctx), got.Name, managed.DeleteOptions(got.UID))
		return nil, nil
	}
	return got, nil
}

// Retain deletes the group's unclaimed warm pods of every pool but those of
// labels ("" for the group's own pod), and waits until they are gone. It
// deletes only the pods whose identity signature key verifies as the
// group's; it tells onRefused (when set) of the others and leaves them.
func Retain(ctx context.Context, kube kubernetes.Interface, key *catalogkey.Key, namespace, group string, labels []string, onRefused func(*RefusedError)) error {
	if key == nil {
		return fmt.Errorf("removing the warm pods of container group %q: %w", group, ErrNoKey)
	}
	list, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: GroupSelector(group)})
	if err != nil {
		return err
	}
	var drop []*corev1.Pod
	for i := range list.Items {
		p := &list.Items[i]
		var r *RefusedError
		if errors.As(Verify(key, groupOwner(group, p), p), &r) && !r.Ours {
			if onRefused != nil {
				onRefused(r)
			}
			continue
		}
		if !slices.Contains(labels, p.Labels[managed.LabelNodeLabel]) {
			drop = append(drop, p)
		}
	}
	gone, err := deleteUnclaimed(ctx, kube, drop)
	return errors.Join(err, waitGone(ctx, kube, namespace, gone))
}

// deleteUnclaimed deletes the pods that no run claimed meanwhile (see
// deletePod) and gives those that are going: deleted now, or before.
func deleteUnclaimed(ctx context.Context, kube kubernetes.Interface, pods []*corev1.Pod) (gone []*corev1.Pod, err error) {
	var errs []error
	for _, p := range pods {
		deleted := p.DeletionTimestamp != nil
		if !deleted {
			deleted, err = deletePod(ctx, kube, p)
			errs = append(errs, err)
		}
		if deleted {
			gone = append(gone, p)
		}
	}
	return gone, errors.Join(errs...)
}

// waitGone waits, watching, until the pods are gone; a pod that took the
// name of one of them since does not hold the wait.
func waitGone(ctx context.Context, kube kubernetes.Interface, namespace string, pods []*corev1.Pod) error {
	var errs []error
	for _, p := range pods {
		errs = append(errs, waitfor.GoneUID(ctx, waitfor.Named(kube.CoreV1().Pods(namespace), p.Name), &corev1.Pod{}, p.UID))
	}
	return errors.Join(errs...)
}
