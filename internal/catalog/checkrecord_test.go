// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package catalog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

// A check record reads back as written and shows no reader of ConfigMaps
// what it holds; an edited, renamed or expired record is not trusted; a
// write sweeps expired records by name; a delete of a missing record is no
// error.
func TestCheckRecord(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	s := keyedStore(t, kube, "k")
	cms := kube.CoreV1().ConfigMaps(ns)
	if _, err := s.GetCheckRecord(ctx, "kubeplay-check-a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing record: %v", err)
	}
	secret := `{"diff":"+token=hunter2","host":"db1.internal"}`
	if err := s.PutCheckRecord(ctx, "kubeplay-check-a", []byte(secret), time.Hour); err != nil {
		t.Fatal(err)
	}
	rec, err := s.GetCheckRecord(ctx, "kubeplay-check-a")
	if err != nil || string(rec.Doc) != secret || time.Since(rec.Written) > time.Minute || rec.Expires.Sub(rec.Written) != time.Hour {
		t.Fatalf("read back %q (written %s, expires %s), %v", rec.Doc, rec.Written, rec.Expires, err)
	}
	// What a reader of ConfigMaps sees: neither the host nor the diff.
	all, _ := cms.List(ctx, metav1.ListOptions{})
	for _, cm := range all.Items {
		for _, what := range []string{"hunter2", "db1", "token"} {
			if strings.Contains(fmt.Sprint(cm.Data, cm.Annotations, cm.Labels), what) {
				t.Errorf("ConfigMap %s shows %q: %v", cm.Name, what, cm.Data)
			}
		}
	}
	// Written again: replaced.
	if err := s.PutCheckRecord(ctx, "kubeplay-check-a", []byte(`{"x":2}`), time.Hour); err != nil {
		t.Fatal(err)
	}
	if rec, err := s.GetCheckRecord(ctx, "kubeplay-check-a"); err != nil || string(rec.Doc) != `{"x":2}` {
		t.Fatalf("replaced record %q, %v", rec.Doc, err)
	}
	// Edited (its sealed data, or its expiry pushed out), or copied under
	// another name: refused.
	cm, _ := cms.Get(ctx, "kubeplay-check-a", metav1.GetOptions{})
	edited := cm.DeepCopy()
	edited.Annotations[checkRecordExpires] = time.Now().Add(240 * time.Hour).UTC().Format(time.RFC3339)
	if _, err := cms.Update(ctx, edited, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetCheckRecord(ctx, "kubeplay-check-a"); !errors.Is(err, ErrTampered) {
		t.Errorf("record with its expiry edited: %v", err)
	}
	cm.Data[checkRecordData] = flip(cm.Data[checkRecordData])
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetCheckRecord(ctx, "kubeplay-check-a"); !errors.Is(err, ErrTampered) {
		t.Errorf("edited record: %v", err)
	}
	if err := s.PutCheckRecord(ctx, "kubeplay-check-b", []byte(`{}`), time.Hour); err != nil {
		t.Fatal(err)
	}
	cm, _ = cms.Get(ctx, "kubeplay-check-b", metav1.GetOptions{})
	cm.Name, cm.ResourceVersion = "kubeplay-check-c", ""
	if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetCheckRecord(ctx, "kubeplay-check-c"); !errors.Is(err, ErrTampered) {
		t.Errorf("renamed record: %v", err)
	}
	// Another key: refused.
	if _, err := keyedStore(t, kube, "o").GetCheckRecord(ctx, "kubeplay-check-b"); !errors.Is(err, ErrTampered) {
		t.Errorf("a record read with another key: %v", err)
	}
	// Expired: gone, and why; swept by the next write, by name.
	if err := s.PutCheckRecord(ctx, "kubeplay-check-old", []byte(`{}`), time.Minute); err != nil {
		t.Fatal(err)
	}
	later(t, 2*time.Minute)
	var gone *CheckRecordGoneError
	if _, err := s.GetCheckRecord(ctx, "kubeplay-check-old"); !errors.As(err, &gone) || gone.Why != GoneExpired || !errors.Is(err, ErrNotFound) {
		t.Errorf("expired record: %v", err)
	}
	kube.ClearActions()
	if err := s.PutCheckRecord(ctx, "kubeplay-check-b", []byte(`{}`), time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get(ctx, "kubeplay-check-old", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the expired record was not swept: %v", err)
	}
	if g, err := s.CheckRecordGone(ctx, "kubeplay-check-old"); err != nil || g == nil || g.Why != GoneExpired {
		t.Errorf("the index on the swept record: %v, %v", g, err)
	}
	// Deleted; deleting again is no error; marked applied, which is no
	// record gone that a plan relied on.
	for range 2 {
		if err := s.DeleteCheckRecord(ctx, "kubeplay-check-b"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.GetCheckRecord(ctx, "kubeplay-check-b"); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleted record: %v", err)
	}
	if g, err := s.CheckRecordGone(ctx, "kubeplay-check-b"); err != nil || g != nil {
		t.Errorf("an applied record: %v, %v", g, err)
	}
}

// later moves the records' clock d ahead until the test ends.
func later(t *testing.T, d time.Duration) {
	t.Helper()
	t.Cleanup(func() { checkClock = time.Now })
	checkClock = func() time.Time { return time.Now().Add(d) }
}

// flip changes one character of a sealed value's ciphertext.
func flip(sealed string) string {
	b := []byte(sealed)
	i := len(b) - 10
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

// A write asks the API server for no list: it reads and writes the index,
// deletes what it swept by name and creates the record.
func TestCheckRecordSweepByName(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	s := keyedStore(t, kube, "k")
	for i := range 5 {
		if err := s.PutCheckRecord(ctx, fmt.Sprintf("kubeplay-check-old%d", i), []byte(`{}`), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	later(t, 2*time.Hour)
	kube.ClearActions()
	if err := s.PutCheckRecord(ctx, "kubeplay-check-new", []byte(`{}`), time.Hour); err != nil {
		t.Fatal(err)
	}
	verbs := map[string]int{}
	for _, a := range kube.Actions() {
		verbs[a.GetVerb()]++
	}
	if verbs["list"] != 0 || verbs["delete"] != 5 || verbs["create"] != 1 || verbs["update"] != 1 {
		t.Errorf("a write's requests: %v", verbs)
	}
	left, _ := kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{
		LabelSelector: managed.Selector(managed.LabelComponent, ComponentCheckRecord)})
	if len(left.Items) != 1 || left.Items[0].Name != "kubeplay-check-new" {
		t.Errorf("records left: %d", len(left.Items))
	}
	// An unexpired record is one create, one index read and one index write.
	kube.ClearActions()
	if err := s.PutCheckRecord(ctx, "kubeplay-check-next", []byte(`{}`), time.Hour); err != nil {
		t.Fatal(err)
	}
	if n := len(kube.Actions()); n != 3 {
		t.Errorf("a write made %d requests, want 3: %v", n, kube.Actions())
	}
}

// The index keeps at most MaxCheckRecords live records, evicting the
// oldest; tombstones live tombstoneTTL, at most maxTombstones of them.
func TestCheckIndexBounds(t *testing.T) {
	now := time.Now()
	x := checkIndex{Live: map[string]indexEntry{}, Gone: map[string]indexEntry{}}
	for i := range MaxCheckRecords + 3 {
		x.Live[fmt.Sprintf("r%04d", i)] = indexEntry{W: now.Unix() - int64(10000-i), E: now.Add(time.Hour).Unix()}
	}
	x.Live["expired"] = indexEntry{W: now.Unix(), E: now.Unix() - 1}
	swept := x.prune(now)
	if len(x.Live) != MaxCheckRecords || len(swept) != 4 {
		t.Fatalf("%d live, %d swept", len(x.Live), len(swept))
	}
	for _, name := range []string{"r0000", "r0001", "r0002"} {
		if g := x.gone(name, now); g == nil || g.Why != GoneEvicted {
			t.Errorf("%s: %v", name, g)
		}
	}
	if g := x.gone("expired", now); g == nil || g.Why != GoneExpired {
		t.Errorf("expired: %v", g)
	}
	if _, ok := x.Live["r0003"]; !ok {
		t.Error("r0003, the oldest kept, was evicted")
	}
	for i := range maxTombstones + 10 {
		x.Gone[fmt.Sprintf("g%05d", i)] = indexEntry{At: now.Unix() - int64(maxTombstones+10-i), Why: GoneApplied}
	}
	x.Gone["ancient"] = indexEntry{At: now.Add(-tombstoneTTL - time.Hour).Unix(), Why: GoneExpired}
	x.prune(now)
	if len(x.Gone) != maxTombstones {
		t.Errorf("%d tombstones", len(x.Gone))
	}
	if _, ok := x.Gone["ancient"]; ok {
		t.Error("a tombstone older than tombstoneTTL was kept")
	}
	if _, ok := x.Gone["r0000"]; !ok {
		t.Error("the newest tombstones were dropped")
	}
}

// What the index says of a record that is not there: deleted outside
// kubeplay, expired, evicted; nothing for one it never listed or one
// applied. An index that does not open counts as empty, and the next
// write starts it afresh.
func TestCheckRecordGone(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	s := keyedStore(t, kube, "k")
	cms := kube.CoreV1().ConfigMaps(ns)
	if g, err := s.CheckRecordGone(ctx, "kubeplay-check-x"); g != nil || err != nil {
		t.Fatalf("no index: %v, %v", g, err)
	}
	if err := s.PutCheckRecord(ctx, "kubeplay-check-x", []byte(`{}`), time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "kubeplay-check-x", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	g, err := s.CheckRecordGone(ctx, "kubeplay-check-x")
	if err != nil || g == nil || g.Why != GoneDeleted || time.Since(g.Written) > time.Minute ||
		!strings.Contains(g.Error(), "kubeplay-check-x was deleted outside kubeplay") {
		t.Fatalf("deleted record: %v, %v", g, err)
	}
	if g, err := s.CheckRecordGone(ctx, "kubeplay-check-never"); g != nil || err != nil {
		t.Errorf("a record never written: %v, %v", g, err)
	}
	// Another key does not open the index.
	if _, err := keyedStore(t, kube, "o").CheckRecordGone(ctx, "kubeplay-check-x"); !errors.Is(err, ErrIndexReset) {
		t.Errorf("the index read with another key: %v", err)
	}
	// Edited: empty, and the next write starts afresh.
	idx, _ := cms.Get(ctx, CheckIndexName, metav1.GetOptions{})
	idx.Data[checkIndexData] = flip(idx.Data[checkIndexData])
	if _, err := cms.Update(ctx, idx, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CheckRecordGone(ctx, "kubeplay-check-x"); !errors.Is(err, ErrIndexReset) {
		t.Errorf("an edited index: %v", err)
	}
	if err := s.PutCheckRecord(ctx, "kubeplay-check-y", []byte(`{}`), time.Hour); !errors.Is(err, ErrIndexReset) {
		t.Errorf("a write over an edited index: %v", err)
	}
	if _, err := s.GetCheckRecord(ctx, "kubeplay-check-y"); err != nil {
		t.Errorf("the record written over an edited index: %v", err)
	}
	if g, err := s.CheckRecordGone(ctx, "kubeplay-check-x"); g != nil || err != nil {
		t.Errorf("after the reset: %v, %v", g, err)
	}
	// A foreign index is neither trusted nor replaced.
	if err := cms.Delete(ctx, CheckIndexName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: CheckIndexName, Namespace: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var no *managed.NotOwnedError
	if err := s.PutCheckRecord(ctx, "kubeplay-check-z", []byte(`{}`), time.Hour); !errors.As(err, &no) {
		t.Errorf("a write with a foreign index: %v", err)
	}
}

// Writers in parallel each read the index and write it back with the
// resourceVersion read: the losers of a race retry, and no record is lost
// from the index. The fake clientset does not check resourceVersions, so a
// reactor does, as the API server would.
func TestCheckIndexConflict(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	s := keyedStore(t, kube, "k")
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	var conflicts int
	kube.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		u, ok := a.(k8stesting.UpdateAction)
		if !ok {
			return false, nil, nil
		}
		cm, ok := u.GetObject().(*corev1.ConfigMap)
		if !ok {
			return false, nil, nil
		}
		cur, gerr := kube.Tracker().Get(gvr, ns, cm.Name)
		if gerr != nil {
			return false, nil, nil //nolint:nilerr // not there: the tracker's own update answers
		}
		if c, ok := cur.(*corev1.ConfigMap); ok && c.ResourceVersion != cm.ResourceVersion {
			conflicts++
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, cm.Name, errors.New("stale"))
		}
		cm = cm.DeepCopy()
		cm.ResourceVersion = fmt.Sprint(time.Now().UnixNano())
		return true, cm, kube.Tracker().Update(gvr, cm, ns)
	})
	if err := s.PutCheckRecord(ctx, "kubeplay-check-first", []byte(`{}`), time.Hour); err != nil {
		t.Fatal(err)
	}
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() { errs <- s.PutCheckRecord(ctx, fmt.Sprintf("kubeplay-check-p%02d", i), []byte(`{}`), time.Hour) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	idx, _ := kube.CoreV1().ConfigMaps(ns).Get(ctx, CheckIndexName, metav1.GetOptions{})
	key, _ := s.Key(ctx)
	x, ok := openIndex(key, idx.Data)
	if !ok || len(x.Live) != n+1 {
		t.Fatalf("the index lists %d records, want %d", len(x.Live), n+1)
	}
	t.Logf("%d conflicts retried", conflicts)
}

// A ConfigMap of a record's name that kubeplay did not make is neither
// replaced nor deleted, also when the index lists the name as expired.
func TestCheckRecordNotOwned(t *testing.T) {
	ctx := context.Background()
	foreign := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels:      map[string]string{managed.LabelComponent: ComponentCheckRecord},
			Annotations: map[string]string{checkRecordExpires: "2000-01-01T00:00:00Z"}},
			Data: map[string]string{"keep": "me"}}
	}
	s, kube := newStore(foreign("kubeplay-check-x"), foreign("kubeplay-check-y"))
	if err := s.EnsureNamespace(ctx); err != nil { // the key Secret
		t.Fatal(err)
	}
	var no *managed.NotOwnedError
	if err := s.PutCheckRecord(ctx, "kubeplay-check-x", []byte(`{}`), time.Hour); !errors.As(err, &no) {
		t.Errorf("replacing a foreign ConfigMap: %v", err)
	}
	if err := s.DeleteCheckRecord(ctx, "kubeplay-check-y"); err != nil {
		t.Fatal(err)
	}
	if err := s.PutCheckRecord(ctx, "kubeplay-check-w", []byte(`{}`), time.Minute); err != nil {
		t.Fatal(err)
	}
	later(t, 2*time.Minute)
	// The index now lists x (live) and w (expired); the next write sweeps w,
	// and would sweep x by name were it not foreign.
	if err := s.PutCheckRecord(ctx, "kubeplay-check-z", []byte(`{}`), time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"kubeplay-check-x", "kubeplay-check-y"} {
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || cm.Data["keep"] != "me" {
			t.Errorf("foreign ConfigMap %s: %v, %v", name, err, cm)
		}
	}
}

// A plan of the same configuration that ran no check supersedes the record
// an older check left gone, so that its apply is not refused as a saved
// plan's; a record that is there is left alone.
func TestCheckRecordSuperseded(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	s := keyedStore(t, kube, "k")
	cms := kube.CoreV1().ConfigMaps(ns)
	if err := s.PutCheckRecord(ctx, "kubeplay-check-live", []byte(`{}`), time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := s.SupersedeCheckRecord(ctx, "kubeplay-check-live"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetCheckRecord(ctx, "kubeplay-check-live"); err != nil {
		t.Errorf("a record that is there was superseded: %v", err)
	}
	if err := s.PutCheckRecord(ctx, "kubeplay-check-x", []byte(`{}`), time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "kubeplay-check-x", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if g, err := s.CheckRecordGone(ctx, "kubeplay-check-x"); g == nil || err != nil {
		t.Fatalf("a deleted record before it is superseded: %v, %v", g, err)
	}
	if err := s.SupersedeCheckRecord(ctx, "kubeplay-check-x"); err != nil {
		t.Fatal(err)
	}
	if g, err := s.CheckRecordGone(ctx, "kubeplay-check-x"); g != nil || err != nil {
		t.Errorf("a superseded record still reads as gone: %v, %v", g, err)
	}
	// A record never written: nothing to do, and no index write.
	before, _ := cms.Get(ctx, CheckIndexName, metav1.GetOptions{})
	if err := s.SupersedeCheckRecord(ctx, "kubeplay-check-never"); err != nil {
		t.Fatal(err)
	}
	// The index is sealed with a fresh nonce at each write.
	if after, _ := cms.Get(ctx, CheckIndexName, metav1.GetOptions{}); after.Data[checkIndexData] != before.Data[checkIndexData] {
		t.Errorf("superseding a record never written wrote the index")
	}
}
