// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package capacity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

// AnnotationMaxForks holds the group's max_forks on its ledger.
const AnnotationMaxForks = "kubeplay.io/max-forks"

// LedgerName is the name of a group's forks ledger ConfigMap.
func LedgerName(group string) string { return "kubeplay-forks-" + group }

// Ledger coordinates max_forks across every process that runs in a group.
// It is a ConfigMap in the group's namespace whose data maps a run id to the
// forks it holds and a deadline. A run acquires by adding its entry with an
// update conditioned on the resourceVersion it read (a 409 Conflict means
// another process wrote first: read again); when the entries leave no room
// it watches the ConfigMap until a release or a deadline frees some. A live
// run renews its claim's deadline (Keep), so entries past their deadline
// belong to runs that died without releasing and are reaped by the next
// writer; a waiting run wakes at the earliest deadline. Within a process, runs that share a client and ask for as many forks take turns.
type Ledger struct {
	Kube      kubernetes.Interface
	Namespace string
	Group     string
	// Kind is Forks (the default) or Runs: max_concurrent_runs gets a ledger
	// of its own, each run holding 1, because the ResourceQuota alone can let
	// one pod too many in while its controller recounts after deletions.
	Kind string
	// Limit is the group's limit as its spec says. Acquire trusts it over the
	// ledger's annotation, which whoever may write the ConfigMap can raise;
	// 0 falls back to the annotation.
	Limit int64
	// OnWait, when set, is told once that Acquire has to wait for capacity.
	OnWait func()
	// Owner is the group definition the ledger belongs to: a ConfigMap of
	// the ledger's name with another owner id is no ledger of the group's
	// (runs need only Owner.ID; Ensure writes the rest). Adopt lets Ensure
	// take over a ledger from before owner ids.
	Owner managed.Owner
	Adopt bool
}

// The kinds of ledger.
const (
	Forks = "forks"
	Runs  = "runs"
)

// ConfigMapName is the ConfigMap of the ledger.
func (l Ledger) ConfigMapName() string { return l.name() }

func (l Ledger) name() string {
	if l.Kind == Runs {
		return "kubeplay-runs-" + l.Group
	}
	return LedgerName(l.Group)
}

// Entry is one run's claim.
type Entry struct {
	Forks   int64     `json:"forks"`
	Expires time.Time `json:"expires"`
}

// Grant describes how an acquisition went.
type Grant struct {
	// Waited: the run had to wait for capacity.
	Waited bool
	// Conflicts counts writes lost to another writer (409).
	Conflicts int
	// Reaped lists expired entries this acquisition removed.
	Reaped []string
}

// ErrNoLedger: the group has no ledger (max_forks is unset, or the group was
// deleted).
var ErrNoLedger = errors.New("the container group has no such ledger")

var runKey = regexp.MustCompile(`^[-._a-zA-Z0-9]{1,253}$`)

// Ensure creates the ledger or sets its limit; entries are kept.
func (l Ledger) Ensure(ctx context.Context, maxForks int64) error {
	cms := l.Kube.CoreV1().ConfigMaps(l.Namespace)
	for {
		cm, err := cms.Get(ctx, l.name(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
				Name:        l.name(),
				Namespace:   l.Namespace,
				Labels:      map[string]string{managed.LabelManagedBy: managed.ManagedByValue, managed.LabelContainerGroup: l.Group},
				Annotations: managed.Merge(l.Owner.Annotations(), map[string]string{AnnotationMaxForks: strconv.FormatInt(maxForks, 10)}),
			}}
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: managed.ManagedByValue})
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			return err
		}
		if err != nil {
			return err
		}
		if rel := l.relation(cm); rel != managed.Mine && (rel != managed.Legacy || !l.Adopt) {
			return l.notOwned(cm)
		}
		cm.Annotations = managed.Merge(cm.Annotations, l.Owner.Annotations(),
			map[string]string{AnnotationMaxForks: strconv.FormatInt(maxForks, 10)})
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: managed.ManagedByValue})
		if apierrors.IsConflict(err) {
			continue
		}
		return err
	}
}

// Delete removes the ledger when it is the group's, by its labels and
// owner id (managed.DeleteMine): a ConfigMap of its name that kubeplay did
// not make, or made for another definition, is left alone.
func (l Ledger) Delete(ctx context.Context) error {
	_, err := managed.DeleteMine(ctx, l.Kube.CoreV1().ConfigMaps(l.Namespace), l.name(), l.Owner, managed.LabelContainerGroup, l.Group)
	return err
}

func (l Ledger) relation(cm *corev1.ConfigMap) managed.Relation {
	return managed.RelationOf(cm, l.Owner, managed.LabelContainerGroup, l.Group)
}

// notOwned is the error that cm is not the group's ledger.
func (l Ledger) notOwned(cm *corev1.ConfigMap) error {
	if managed.Owns(cm, managed.LabelContainerGroup, l.Group) {
		o := l.Owner
		if o.Name == "" {
			o.Kind, o.Name = "container group", l.Group
		}
		return managed.OtherOwner("ConfigMap", cm, o)
	}
	return &managed.NotOwnedError{Kind: "ConfigMap", Namespace: l.Namespace, Name: l.name(),
		Labels: managed.Labels(managed.LabelContainerGroup, l.Group)}
}

// Acquire claims forks for run, waiting until the sum of live claims plus
// forks fits the ledger's max_forks. The claim lasts ttl.
func (l Ledger) Acquire(ctx context.Context, run string, forks int64, ttl time.Duration) (Grant, error) {
	var g Grant
	if !runKey.MatchString(run) {
		return g, fmt.Errorf("run id %q is not a valid ConfigMap key", run)
	}
	if forks < 1 {
		return g, fmt.Errorf("forks must be at least 1, got %d", forks)
	}
	cms := l.Kube.CoreV1().ConfigMaps(l.Namespace)
	// Runs of one process that share a client and ask for as many forks
	// take turns: when the one at the gate does not fit, neither would the
	// others, and a freed slot costs one write, not one lost write per
	// waiting run. Other processes, and other sizes, meet at the
	// resourceVersion.
	gt := gateFor(l, forks)
	if !gt.enter(ctx) {
		return g, fmt.Errorf("waiting for %s in container group %q: %w", l.unit(), l.Group, ctx.Err())
	}
	// One watch serves every wait, and the ConfigMap it delivers is
	// evaluated as it comes: a wake-up costs no extra read. Both pass to the
	// next run at the gate.
	cm, w := gt.cm, gt.w
	defer func() { gt.leave(w, cm) }()
	// Without the gate's, the ConfigMap this process last wrote or read
	// saves a read, as in modifyConfigMap: a write of a stale copy fails on
	// its resourceVersion, and an error or a wait is decided on a fresh read.
	fresh := cm != nil
	if cm == nil {
		cm = l.written()
	}
	r := kubeclient.NewRetry(ledgerBackoff)
	for {
		if cm == nil {
			var err error
			if cm, err = l.get(ctx); err != nil {
				if r.Again(ctx, err) {
					continue
				}
				return g, err
			}
			fresh = true
		}
		entries, maxForks, err := l.decode(cm)
		if err == nil && forks > maxForks {
			err = fmt.Errorf("the run asks for %d %s but container group %q allows at most %d", forks, l.unit(), l.Group, maxForks)
		}
		if err != nil {
			if !fresh {
				cm = nil
				continue
			}
			return g, err
		}
		now := time.Now()
		reaped := reap(entries, now)
		delete(entries, run) // acquiring again replaces the run's claim
		fits := forks <= maxForks-used(entries, maxForks)
		if fits {
			entries[run] = Entry{Forks: forks, Expires: now.Add(ttl)}
		}
		if fits || len(reaped) > 0 {
			next := cm.DeepCopy()
			if err := encode(next, entries); err != nil {
				return g, err
			}
			updated, err := cms.Update(ctx, next, metav1.UpdateOptions{FieldManager: managed.ManagedByValue})
			switch {
			case apierrors.IsConflict(err) && !fresh:
				cm = nil // the copy was stale, no other writer's win
				continue
			case apierrors.IsConflict(err):
				g.Conflicts++
				cm = nil // another writer was first: read its version
				if w != nil {
					// or take it from the watch, which brings it anyway.
					if cm, err = l.next(ctx, &w, next, time.Time{}); err != nil {
						return g, err
					}
				}
				continue
			case err != nil && r.Again(ctx, err):
				// Read afresh: a claim written before the connection broke
				// is this run's, which acquiring again replaces.
				cm = nil
				continue
			case err != nil:
				return g, fmt.Errorf("updating ledger %s/%s: %w", l.Namespace, cm.Name, err)
			}
			g.Reaped = append(g.Reaped, reaped...)
			cm, fresh = updated, true
			l.remember(updated)
			if fits {
				return g, nil
			}
			continue
		}
		if !fresh {
			cm = nil
			continue
		}
		if !g.Waited && l.OnWait != nil {
			l.OnWait()
		}
		g.Waited = true
		if cm, err = l.next(ctx, &w, cm, earliest(entries)); err != nil {
			return g, err
		}
	}
}

// Release removes run's claim, and claims past their deadline; releasing
// twice is harmless.
func (l Ledger) Release(ctx context.Context, run string) error {
	return l.ReleaseRecording(ctx, run, "")
}

// AnnotationRecentRuns holds the records of the group's last MaxRecentRuns
// runs, one per line, oldest first: what a run's release writes anyway
// carries them, so that they cost no request of their own.
const AnnotationRecentRuns = "kubeplay.io/recent-runs"

// MaxRecentRuns bounds the records a ledger keeps.
const MaxRecentRuns = 50

// maxRecord bounds one record: a longer one is not kept.
const maxRecord = 1 << 10

// ReleaseRecording is Release that also appends record, one line of the
// caller's, to the ledger's recent runs, in the same update; "" records
// nothing.
func (l Ledger) ReleaseRecording(ctx context.Context, run, record string) error {
	keep := record != "" && len(record) <= maxRecord && !strings.ContainsAny(record, "\n\r")
	err := l.modifyConfigMap(ctx, func(cm *corev1.ConfigMap, entries map[string]Entry) (bool, error) {
		_, ok := entries[run]
		delete(entries, run)
		// Claims past their deadline are of runs that died: every writer
		// removes them, or a group whose next run did not have to wait
		// keeps a killed run's claim.
		reaped := reap(entries, time.Now())
		if ok && keep {
			if cm.Annotations == nil {
				cm.Annotations = map[string]string{}
			}
			cm.Annotations[AnnotationRecentRuns] = appendRecent(cm.Annotations[AnnotationRecentRuns], record)
		}
		return ok || len(reaped) > 0, nil
	})
	if errors.Is(err, ErrNoLedger) {
		return nil
	}
	return err
}

// appendRecent adds record to lines, keeping the last MaxRecentRuns.
func appendRecent(lines, record string) string {
	all := append(strings.Split(strings.TrimSpace(lines), "\n"), record)
	all = slices.DeleteFunc(all, func(s string) bool { return s == "" })
	return strings.Join(all[max(0, len(all)-MaxRecentRuns):], "\n")
}

// RecentRuns are the records of the ledger's last runs, oldest first;
// none when the group has no such ledger.
func (l Ledger) RecentRuns(ctx context.Context) ([]string, error) {
	cm, err := l.get(ctx)
	if errors.Is(err, ErrNoLedger) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if l.relation(cm) != managed.Mine {
		return nil, l.notOwned(cm)
	}
	lines := strings.Split(strings.TrimSpace(cm.Annotations[AnnotationRecentRuns]), "\n")
	return slices.DeleteFunc(lines, func(s string) bool { return s == "" }), nil
}

func (l Ledger) modify(ctx context.Context, change func(map[string]Entry) (bool, error)) error {
	return l.modifyConfigMap(ctx, func(_ *corev1.ConfigMap, entries map[string]Entry) (bool, error) { return change(entries) })
}

// modifyConfigMap applies change to the ledger and writes it. It starts from
// the ConfigMap this process last wrote or read (written), not a read of its
// own: a release or renewal after an uncontended acquire costs one request.
// That copy may be stale, which is safe: a write of it fails on its
// resourceVersion and the loop reads again, and a conclusion that nothing
// is to be written (or an error) is drawn only from a fresh read.
func (l Ledger) modifyConfigMap(ctx context.Context, change func(*corev1.ConfigMap, map[string]Entry) (bool, error)) error {
	cms := l.Kube.CoreV1().ConfigMaps(l.Namespace)
	cm := l.written()
	r := kubeclient.NewRetry(ledgerBackoff)
	for {
		fresh := cm == nil
		if fresh {
			var err error
			if cm, err = l.get(ctx); err != nil {
				if r.Again(ctx, err) {
					continue
				}
				return err
			}
		}
		entries, _, err := l.decode(cm)
		changed := false
		if err == nil {
			changed, err = change(cm, entries)
		}
		if err == nil && changed {
			err = encode(cm, entries)
		}
		if err != nil || !changed {
			if fresh {
				return err
			}
			cm = nil
			continue
		}
		updated, err := cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: managed.ManagedByValue})
		if apierrors.IsConflict(err) || err != nil && r.Again(ctx, err) {
			// A write carried out before its connection broke is seen
			// done on the fresh read: change finds nothing left to do.
			cm = nil
			continue
		}
		if err == nil {
			l.remember(updated)
		}
		return err
	}
}

// ledgerBackoff is kubeclient's: an API server restart, or a connection the
// soak's proxy cut, is over by then. Every ledger write is conditioned on
// the resourceVersion it read and is decided again on a fresh read, so
// repeating one is safe.
var ledgerBackoff = kubeclient.TransientBackoff

func (l Ledger) read(ctx context.Context) (map[string]Entry, error) {
	cm, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	entries, _, err := l.decode(cm)
	return entries, err
}

func (l Ledger) get(ctx context.Context) (*corev1.ConfigMap, error) {
	cm, err := l.Kube.CoreV1().ConfigMaps(l.Namespace).Get(ctx, l.name(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l.remember(nil)
		return nil, fmt.Errorf("%w %s/%s", ErrNoLedger, l.Namespace, l.name())
	}
	if err != nil {
		return nil, fmt.Errorf("reading ledger %s/%s: %w", l.Namespace, l.name(), err)
	}
	l.remember(cm)
	return cm, nil
}

// lastSeen holds, per client and ledger, the ConfigMap this process last
// wrote or read, as the API server returned it: see modifyConfigMap.
var lastSeen sync.Map // lastKey -> *corev1.ConfigMap

type lastKey struct {
	kube            kubernetes.Interface
	namespace, name string
}

func (l Ledger) remember(cm *corev1.ConfigMap) {
	k := lastKey{l.Kube, l.Namespace, l.name()}
	if cm == nil {
		lastSeen.Delete(k)
		return
	}
	lastSeen.Store(k, cm.DeepCopy())
}

// written is a copy of the ConfigMap remembered, nil for none.
func (l Ledger) written() *corev1.ConfigMap {
	v, _ := lastSeen.Load(lastKey{l.Kube, l.Namespace, l.name()})
	cm, ok := v.(*corev1.ConfigMap)
	if !ok {
		return nil
	}
	return cm.DeepCopy()
}

// decode reads the entries and the limit: the group's (l.Limit) when set,
// else the annotation, which must be at least 1. A ConfigMap of the
// ledger's name that kubeplay did not make, or made for a definition with
// another owner id, is no ledger.
func (l Ledger) decode(cm *corev1.ConfigMap) (map[string]Entry, int64, error) {
	if cm == nil {
		return nil, 0, fmt.Errorf("%w %s/%s", ErrNoLedger, l.Namespace, l.name())
	}
	if l.relation(cm) != managed.Mine {
		return nil, 0, l.notOwned(cm)
	}
	maxForks := l.Limit
	if maxForks < 1 {
		var err error
		maxForks, err = strconv.ParseInt(cm.Annotations[AnnotationMaxForks], 10, 64)
		if err != nil || maxForks < 1 {
			return nil, 0, fmt.Errorf("ledger %s/%s has no valid %s annotation", l.Namespace, cm.Name, AnnotationMaxForks)
		}
	}
	entries := make(map[string]Entry, len(cm.Data))
	for k, v := range cm.Data {
		var e Entry
		if json.Unmarshal([]byte(v), &e) != nil || !e.valid() {
			// An unreadable or invalid entry holds nothing, and the next
			// write drops it: a claim of -5 forks must not make room.
			continue
		}
		entries[k] = e
	}
	return entries, maxForks, nil
}

// valid: a claim holds at least one fork and expires at some time.
func (e Entry) valid() bool { return e.Forks >= 1 && !e.Expires.IsZero() }

// used sums what entries hold, each at most limit (a claim taken before
// the limit was lowered holds the whole ledger, not more), and stops at
// limit: no sum of entries overflows.
func used(entries map[string]Entry, limit int64) int64 {
	var n int64
	for _, e := range entries {
		if !e.valid() {
			continue
		}
		held := min(e.Forks, limit)
		if held >= limit-n {
			return max(limit, 0)
		}
		n += held
	}
	return n
}

// unit names what the ledger counts, for messages.
func (l Ledger) unit() string {
	if l.Kind == Runs {
		return "run slots (max_concurrent_runs)"
	}
	return "forks (max_forks)"
}

func encode(cm *corev1.ConfigMap, entries map[string]Entry) error {
	cm.Data = make(map[string]string, len(entries))
	for k, e := range entries {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		cm.Data[k] = string(b)
	}
	return nil
}

func reap(entries map[string]Entry, now time.Time) []string {
	var out []string
	for k, e := range entries {
		if !e.Expires.After(now) {
			delete(entries, k)
			out = append(out, k)
		}
	}
	return out
}

func earliest(entries map[string]Entry) time.Time {
	var t time.Time
	for _, e := range entries {
		if t.IsZero() || e.Expires.Before(t) {
			t = e.Expires
		}
	}
	return t
}

// next waits for the ledger to change after cm, for deadline to pass (an
// entry expires and can be reaped), or for ctx to end. It returns the
// ConfigMap to evaluate next, or nil when it must be read again. *w is the
// watch it opens on first use and keeps for later waits.
func (l Ledger) next(ctx context.Context, w *watch.Interface, cm *corev1.ConfigMap, deadline time.Time) (*corev1.ConfigMap, error) {
	if *w == nil {
		// The watch outlives this run's context: the next run at the gate
		// keeps it, and leave stops it when no run is waiting.
		nw, err := l.Kube.CoreV1().ConfigMaps(l.Namespace).Watch(context.WithoutCancel(ctx), metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", l.name()).String(),
			ResourceVersion: cm.ResourceVersion,
		})
		if err != nil {
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				return nil, nil // the version is compacted away: read again
			}
			return nil, fmt.Errorf("watching ledger %s/%s: %w", l.Namespace, l.name(), err)
		}
		*w = nw
	}
	expire, stop := expiry(deadline)
	defer stop()
	select {
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for %s in container group %q: %w", l.unit(), l.Group, ctx.Err())
	case ev, ok := <-(*w).ResultChan():
		if next, isCM := ev.Object.(*corev1.ConfigMap); ok && isCM && (ev.Type == watch.Added || ev.Type == watch.Modified) {
			return l.latest(w, next)
		}
		if ok && ev.Type == watch.Deleted {
			return nil, fmt.Errorf("%w %s/%s (deleted while waiting)", ErrNoLedger, l.Namespace, l.name())
		}
		// An error event or a closed watch: read again, and watch anew.
		(*w).Stop()
		*w = nil
		return nil, nil
	case <-expire:
		return cm, nil // re-evaluate: the expired entry is reaped
	}
}

// latest skips versions the watch has already queued behind cm: writing
// over any but the newest would only conflict.
func (l Ledger) latest(w *watch.Interface, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	for {
		select {
		case ev, ok := <-(*w).ResultChan():
			if !ok {
				(*w).Stop()
				*w = nil
				return cm, nil
			}
			switch next, isCM := ev.Object.(*corev1.ConfigMap); {
			case isCM && (ev.Type == watch.Added || ev.Type == watch.Modified):
				cm = next
			case ev.Type == watch.Deleted:
				return nil, fmt.Errorf("%w %s/%s (deleted while waiting)", ErrNoLedger, l.Namespace, l.name())
			default:
				(*w).Stop()
				*w = nil
				return cm, nil
			}
		default:
			return cm, nil
		}
	}
}

// gate lets one run at a time of a process acquire a given number of forks
// from a ledger through one client, and keeps the newest ConfigMap and the
// open watch for the next.
type gate struct {
	turn    chan struct{}
	waiting atomic.Int32
	cm      *corev1.ConfigMap
	w       watch.Interface
}

type gateKey struct {
	kube            kubernetes.Interface
	namespace, name string
	forks           int64
}

var (
	gatesMu sync.Mutex
	gates   = map[gateKey]*gate{}
)

func gateFor(l Ledger, forks int64) *gate {
	gatesMu.Lock()
	defer gatesMu.Unlock()
	k := gateKey{l.Kube, l.Namespace, l.name(), forks}
	if gates[k] == nil {
		gates[k] = &gate{turn: make(chan struct{}, 1)}
	}
	return gates[k]
}

// enter waits for the gate's turn; false if ctx ended first.
func (g *gate) enter(ctx context.Context) bool {
	g.waiting.Add(1)
	defer g.waiting.Add(-1)
	select {
	case g.turn <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// leave hands w and cm to the next run, or stops the watch when no run is
// waiting: an idle gate holds no watch open on the API server. The ConfigMap
// passes only with its watch, which brings whatever is newer.
func (g *gate) leave(w watch.Interface, cm *corev1.ConfigMap) {
	if g.waiting.Load() == 0 && w != nil {
		w.Stop()
		w = nil
	}
	if w == nil {
		cm = nil
	}
	g.w, g.cm = w, cm
	<-g.turn
}

// Claims returns the ledger's claims by run key, expired ones included:
// a claim whose Expires has passed belongs to a run whose process stopped
// renewing it. ErrNoLedger when the group has no such ledger.
func (l Ledger) Claims(ctx context.Context) (map[string]Entry, error) {
	return l.read(ctx)
}
