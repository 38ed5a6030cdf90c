// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package catalog

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalogkey"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

// Records of plan-time checks (kubeplay_run's plan_check): a ConfigMap of
// the catalog namespace per check, its document sealed (AES-256-GCM) with
// a key derived from the catalog key, bound to its name, when it was
// written and its expiry, so that a reader of ConfigMaps learns nothing of
// hosts, tasks or diffs, and a record is trusted only under the name it was
// written for and until it expires.
//
// One index ConfigMap, sealed the same way, lists the live records and, for
// a while, the ones removed and why: a write sweeps expired and surplus
// records by name (it never lists ConfigMaps), and the apply of a saved plan
// whose record is gone can say what became of it.
const (
	// ComponentCheckRecord is a record's managed.LabelComponent.
	ComponentCheckRecord = "plan-check"
	// ComponentCheckIndex is the index's managed.LabelComponent.
	ComponentCheckIndex = "plan-check-index"
	// CheckIndexName is the index ConfigMap.
	CheckIndexName = "kubeplay-check-index"

	checkRecordData    = "sealed"
	checkRecordExpires = "kubeplay.io/expires"
	checkRecordWritten = "kubeplay.io/written"
	checkIndexData     = "sealed"
	domainCheckRecord  = "kubeplay-plan-check-record"
	domainCheckIndex   = "kubeplay-plan-check-index"

	// MaxCheckRecords bounds the live records: a write evicts the oldest
	// beyond it.
	MaxCheckRecords = 256
	// maxTombstones and tombstoneTTL bound what the index remembers of
	// removed records.
	maxTombstones = 2048
	tombstoneTTL  = 14 * 24 * time.Hour
	// maxIndexSize bounds the sealed index read back (a ConfigMap holds at
	// most 1 MiB).
	maxIndexSize = 1 << 20
)

// Why a record is gone, as the index keeps it.
const (
	GoneExpired = "expired"
	GoneEvicted = "evicted"
	GoneApplied = "applied"
	// GoneDeleted: the index lists the record as live, but its ConfigMap is
	// not there (deleted outside kubeplay).
	GoneDeleted = "deleted"
	// GoneSuperseded: a later plan of the same configuration could not
	// check, so its apply must not take the old record's absence for a
	// saved plan's.
	GoneSuperseded = "superseded"
)

// ErrIndexReset: the index did not open with the catalog key (edited, or
// written under another key), so a write started it afresh; the write
// itself succeeded.
var ErrIndexReset = errors.New("the plan-check index was not sealed with the catalog key and was started afresh")

// CheckRecord is a record as read back.
type CheckRecord struct {
	Doc              []byte
	Written, Expires time.Time
}

// CheckRecordGoneError: a record that was written is not there anymore.
// It wraps ErrNotFound.
type CheckRecordGoneError struct {
	Name string
	// Why is GoneExpired, GoneEvicted, GoneApplied or GoneDeleted.
	Why string
	// At is when it expired or was removed; zero when unknown (deleted).
	At time.Time
	// Written is when the check wrote it; zero when unknown.
	Written time.Time
}

func (e *CheckRecordGoneError) Error() string {
	switch e.Why {
	case GoneExpired:
		return fmt.Sprintf("the plan-time check's record %s expired at %s", e.Name, e.At.UTC().Format(time.RFC3339))
	case GoneDeleted:
		return fmt.Sprintf("the plan-time check's record %s was deleted outside kubeplay", e.Name)
	case GoneEvicted:
		return fmt.Sprintf("the plan-time check's record %s was removed at %s to make room for newer ones (at most %d are kept)",
			e.Name, e.At.UTC().Format(time.RFC3339), MaxCheckRecords)
	}
	return fmt.Sprintf("the plan-time check's record %s was %s at %s", e.Name, e.Why, e.At.UTC().Format(time.RFC3339))
}

func (e *CheckRecordGoneError) Unwrap() error { return ErrNotFound }

// indexEntry is a record in the index, times in Unix seconds: W written,
// E expires; for a tombstone also At removed and Why.
type indexEntry struct {
	W   int64  `json:"w"`
	E   int64  `json:"e"`
	At  int64  `json:"at,omitempty"`
	Why string `json:"why,omitempty"`
}

// checkIndex is the index's sealed document.
type checkIndex struct {
	Live map[string]indexEntry `json:"live"`
	Gone map[string]indexEntry `json:"gone"`
}

// sweep is a record that an index update removed, to delete by name.
type sweep struct {
	name    string
	expires int64
}

// prune moves expired records to the tombstones, evicts the oldest live
// records beyond MaxCheckRecords, and drops old and surplus tombstones;
// it returns the records to delete.
func (x *checkIndex) prune(now time.Time) []sweep {
	var out []sweep
	for name, e := range x.Live {
		if e.E <= now.Unix() {
			out = append(out, x.bury(name, GoneExpired, e.E))
		}
	}
	if n := len(x.Live) - MaxCheckRecords; n > 0 {
		names := slices.SortedFunc(maps.Keys(x.Live), func(a, b string) int {
			return cmp.Or(cmp.Compare(x.Live[a].W, x.Live[b].W), cmp.Compare(a, b))
		})
		for _, name := range names[:n] {
			out = append(out, x.bury(name, GoneEvicted, now.Unix()))
		}
	}
	for name, e := range x.Gone {
		if e.At < now.Add(-tombstoneTTL).Unix() {
			delete(x.Gone, name)
		}
	}
	if n := len(x.Gone) - maxTombstones; n > 0 {
		names := slices.SortedFunc(maps.Keys(x.Gone), func(a, b string) int {
			return cmp.Or(cmp.Compare(x.Gone[a].At, x.Gone[b].At), cmp.Compare(a, b))
		})
		for _, name := range names[:n] {
			delete(x.Gone, name)
		}
	}
	return out
}

// bury moves record name, live or a tombstone already, to the tombstones
// with why.
func (x *checkIndex) bury(name, why string, at int64) sweep {
	e, ok := x.Live[name]
	if !ok {
		e = x.Gone[name]
	}
	delete(x.Live, name)
	e.At, e.Why = at, why
	x.Gone[name] = e
	return sweep{name: name, expires: e.E}
}

// openIndex decodes the index's ConfigMap data; ok is false when it does
// not open with key (the index is then empty).
func openIndex(key *catalogkey.Key, data map[string]string) (checkIndex, bool) {
	x := checkIndex{Live: map[string]indexEntry{}, Gone: map[string]indexEntry{}}
	sealed := data[checkIndexData]
	if len(sealed) > maxIndexSize {
		return x, false
	}
	doc, err := key.Open(domainCheckIndex, sealed, []byte(CheckIndexName))
	if err != nil {
		return x, false
	}
	var got checkIndex
	if err := json.Unmarshal(doc, &got); err != nil {
		return x, false
	}
	maps.Copy(x.Live, got.Live)
	maps.Copy(x.Gone, got.Gone)
	return x, true
}

// checkClock is the time records expire by; tests move it.
var checkClock = time.Now

// indexBackoff retries index updates that lost a race with another plan's:
// many runs plan in parallel.
var indexBackoff = wait.Backoff{Steps: 12, Duration: 10 * time.Millisecond, Factor: 2, Jitter: 0.5, Cap: 2 * time.Second}

// updateIndex applies change to the index and prunes it, and writes it
// back, retrying when another writer got there first; then it deletes the
// records pruned. The error wraps ErrIndexReset, after a successful
// update, when the stored index did not open.
func (s *Store) updateIndex(ctx context.Context, key *catalogkey.Key, change func(x *checkIndex, now time.Time)) error {
	cms := s.kube.CoreV1().ConfigMaps(s.namespace)
	var swept []sweep
	var reset bool
	err := retry.OnError(indexBackoff, func(err error) bool {
		return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
	}, func() error {
		cm, err := cms.Get(ctx, CheckIndexName, metav1.GetOptions{})
		exists := err == nil
		switch {
		case apierrors.IsNotFound(err):
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: CheckIndexName, Namespace: s.namespace,
				Labels: managed.Labels(managed.LabelComponent, ComponentCheckIndex)}}
		case err != nil:
			return err
		case !managed.Owns(cm, managed.LabelComponent, ComponentCheckIndex):
			return &managed.NotOwnedError{Kind: "ConfigMap", Namespace: s.namespace, Name: CheckIndexName,
				Labels: managed.Labels(managed.LabelComponent, ComponentCheckIndex)}
		}
		x, ok := openIndex(key, cm.Data)
		reset = exists && !ok
		now := checkClock()
		change(&x, now)
		swept = x.prune(now)
		doc, err := json.Marshal(x)
		if err != nil {
			return err
		}
		sealed, err := key.Seal(domainCheckIndex, doc, []byte(CheckIndexName))
		if err != nil {
			return err
		}
		cm.Data = map[string]string{checkIndexData: sealed}
		if !exists {
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: managed.FieldManager})
			return err
		}
		// The resourceVersion of the read: a concurrent update is a conflict.
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: managed.FieldManager})
		return err
	})
	if err != nil {
		return err
	}
	for _, sw := range swept {
		s.deleteRecord(ctx, sw.name, sw.expires)
	}
	if reset {
		return ErrIndexReset
	}
	return nil
}

// deleteRecord deletes record name if it is kubeplay's and still the one
// that expires at expires (not written again since the index dropped it);
// it is best effort: a record left behind is refused once expired.
func (s *Store) deleteRecord(ctx context.Context, name string, expires int64) {
	cms := s.kube.CoreV1().ConfigMaps(s.namespace)
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	if err != nil || !managed.Owns(cm, managed.LabelComponent, ComponentCheckRecord) {
		return
	}
	if t, err := time.Parse(time.RFC3339, cm.Annotations[checkRecordExpires]); err != nil || t.Unix() != expires {
		return
	}
	rv := cm.ResourceVersion
	_ = cms.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
}

// GetCheckRecord returns record name. The error wraps ErrNotFound when
// there is none, and is a *CheckRecordGoneError when it expired; it wraps
// ErrTampered when the record does not open with the catalog key, so that
// it is not trusted.
func (s *Store) GetCheckRecord(ctx context.Context, name string) (CheckRecord, error) {
	key, err := s.Key(ctx)
	if err != nil {
		return CheckRecord{}, err
	}
	cm, err := s.kube.CoreV1().ConfigMaps(s.namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return CheckRecord{}, ErrNotFound
	}
	if err != nil {
		return CheckRecord{}, err
	}
	return openRecord(key, name, cm.Annotations, cm.Data, checkClock())
}

// openRecord decodes the record name from its ConfigMap's annotations and
// data.
func openRecord(key *catalogkey.Key, name string, annotations, data map[string]string, now time.Time) (CheckRecord, error) {
	written, expires := annotations[checkRecordWritten], annotations[checkRecordExpires]
	doc, err := key.Open(domainCheckRecord, data[checkRecordData], []byte(name), []byte(written), []byte(expires))
	if err != nil {
		return CheckRecord{}, ErrTampered
	}
	w, werr := time.Parse(time.RFC3339, written)
	e, eerr := time.Parse(time.RFC3339, expires)
	if werr != nil || eerr != nil {
		return CheckRecord{}, ErrTampered // sealed by kubeplay, so never
	}
	if !now.Before(e) {
		return CheckRecord{}, &CheckRecordGoneError{Name: name, Why: GoneExpired, At: e, Written: w}
	}
	return CheckRecord{Doc: doc, Written: w, Expires: e}, nil
}

// CheckRecordGone says, from the index, what became of record name that
// is not there (or does not open): nil when the index knows nothing of it
// or it was applied, so that no plan is known to have relied on it.
func (s *Store) CheckRecordGone(ctx context.Context, name string) (*CheckRecordGoneError, error) {
	key, err := s.Key(ctx)
	if err != nil {
		return nil, err
	}
	cm, err := s.kube.CoreV1().ConfigMaps(s.namespace).Get(ctx, CheckIndexName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !managed.Owns(cm, managed.LabelComponent, ComponentCheckIndex) {
		return nil, nil
	}
	x, ok := openIndex(key, cm.Data)
	if !ok {
		return nil, ErrIndexReset
	}
	return x.gone(name, checkClock()), nil
}

// gone is what the index says of record name that is not there.
func (x checkIndex) gone(name string, now time.Time) *CheckRecordGoneError {
	if e, ok := x.Live[name]; ok {
		if e.E <= now.Unix() {
			return &CheckRecordGoneError{Name: name, Why: GoneExpired, At: time.Unix(e.E, 0), Written: time.Unix(e.W, 0)}
		}
		return &CheckRecordGoneError{Name: name, Why: GoneDeleted, Written: time.Unix(e.W, 0)}
	}
	if e, ok := x.Gone[name]; ok && e.Why != GoneApplied && e.Why != GoneSuperseded {
		return &CheckRecordGoneError{Name: name, Why: e.Why, At: time.Unix(e.At, 0), Written: time.Unix(e.W, 0)}
	}
	return nil
}

// PutCheckRecord writes record name with doc, valid for ttl, replacing an
// older record (a ConfigMap of the name that kubeplay did not make is an
// error, *managed.NotOwnedError), and lists it in the index, which sweeps
// expired and surplus records. An error that wraps ErrIndexReset comes
// after a successful write.
func (s *Store) PutCheckRecord(ctx context.Context, name string, doc []byte, ttl time.Duration) error {
	key, err := s.Key(ctx)
	if err != nil {
		return err
	}
	now := checkClock().Truncate(time.Second)
	written, expires := now.UTC().Format(time.RFC3339), now.Add(ttl).UTC().Format(time.RFC3339)
	sealed, err := key.Seal(domainCheckRecord, doc, []byte(name), []byte(written), []byte(expires))
	if err != nil {
		return err
	}
	// The index first: a record is never there without the index knowing
	// of it, so a sweep finds every record by name.
	ierr := s.updateIndex(ctx, key, func(x *checkIndex, _ time.Time) {
		delete(x.Gone, name)
		x.Live[name] = indexEntry{W: now.Unix(), E: now.Add(ttl).Unix()}
	})
	if ierr != nil && !errors.Is(ierr, ErrIndexReset) {
		return ierr
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: s.namespace,
			Labels:      managed.Labels(managed.LabelComponent, ComponentCheckRecord),
			Annotations: map[string]string{checkRecordWritten: written, checkRecordExpires: expires},
		},
		Data: map[string]string{checkRecordData: sealed},
	}
	cms := s.kube.CoreV1().ConfigMaps(s.namespace)
	_, err = cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: managed.FieldManager})
	if apierrors.IsAlreadyExists(err) {
		_, err = write(ctx, cms, cm, CreateOrUpdate, func(dst, src *corev1.ConfigMap) { dst.Data = src.Data })
	}
	if errors.Is(err, ErrNotDefinition) {
		return &managed.NotOwnedError{Kind: "ConfigMap", Namespace: s.namespace, Name: name, Labels: cm.Labels}
	}
	if err != nil {
		return err
	}
	return ierr
}

// SupersedeCheckRecord marks record name, when it is gone (expired,
// evicted or deleted), as superseded: a plan of the same configuration ran
// no check, so an apply that finds no record is that plan's and not a
// saved plan's whose record is gone. A record that is there stays.
func (s *Store) SupersedeCheckRecord(ctx context.Context, name string) error {
	if _, err := s.GetCheckRecord(ctx, name); err == nil {
		return nil
	}
	g, err := s.CheckRecordGone(ctx, name)
	if g == nil || err != nil {
		if errors.Is(err, ErrIndexReset) {
			return nil // the next write starts the index afresh
		}
		return err
	}
	key, err := s.Key(ctx)
	if err != nil {
		return err
	}
	err = s.updateIndex(ctx, key, func(x *checkIndex, now time.Time) {
		x.bury(name, GoneSuperseded, now.Unix())
	})
	if errors.Is(err, ErrIndexReset) {
		return nil
	}
	return err
}

// DeleteCheckRecord deletes record name, which a run's create used, if
// kubeplay made it, and marks it applied in the index; a missing record,
// or a ConfigMap of the name that kubeplay did not make, is left without
// error.
func (s *Store) DeleteCheckRecord(ctx context.Context, name string) error {
	key, err := s.Key(ctx)
	if err != nil {
		return err
	}
	ierr := s.updateIndex(ctx, key, func(x *checkIndex, now time.Time) {
		x.bury(name, GoneApplied, now.Unix())
	})
	if _, err := managed.DeleteOwned(ctx, s.kube.CoreV1().ConfigMaps(s.namespace), name, managed.LabelComponent, ComponentCheckRecord); err != nil {
		return err
	}
	if errors.Is(ierr, ErrIndexReset) {
		return nil
	}
	return ierr
}
