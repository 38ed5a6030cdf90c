// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package warmpool

import (
	"context"
	"errors"
	"io"
	"maps"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalogkey"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner/runnertest"
)

var unitKey = mustKey("kubeplay-warmpool-unit-test-key-32b")

func mustKey(s string) *catalogkey.Key {
	k, err := catalogkey.New([]byte(s))
	if err != nil {
		panic(err)
	}
	return k
}

// signedWarm is a warm pod of t as the API server would return it, signed.
func signedWarm(t Template, name string) *corev1.Pod {
	rev := Revision(t.Pod)
	p := t.warmPod(rev)
	p.Name, p.UID = name, types.UID("uid-"+name)
	p.Annotations = Signatures(t.Key, t.owner(rev), p)
	return p
}

func refusal(t *testing.T, err error) *RefusedError {
	t.Helper()
	var r *RefusedError
	if err != nil && !errors.As(err, &r) {
		t.Fatalf("error %v is not a *RefusedError", err)
	}
	return r
}

func TestVerify(t *testing.T) {
	tmpl := Template{Group: "g", Namespace: "ns", Label: "big", Pod: runPod(), Key: unitKey}
	rev := Revision(tmpl.Pod)
	o := tmpl.owner(rev)
	good := signedWarm(tmpl, "kubeplay-warm-a")
	if err := Verify(unitKey, o, good); err != nil {
		t.Fatalf("a signed pod: %v", err)
	}
	// What changes after a create without anyone's intent keeps it valid.
	bound := good.DeepCopy()
	bound.Spec.NodeName, bound.Spec.ActiveDeadlineSeconds = "node-1", ptr.To[int64](60)
	bound.Labels = map[string]string{"claimed": "yes"}
	bound.Status.Phase = corev1.PodRunning
	if err := Verify(unitKey, o, bound); err != nil {
		t.Errorf("a bound, claimed pod: %v", err)
	}
	for _, c := range []struct {
		name   string
		change func(p *corev1.Pod)
		o      Owner
		key    *catalogkey.Key
		ours   bool
		reason string
	}{
		{"unsigned", func(p *corev1.Pod) { p.Annotations = nil }, o, unitKey, false, "no kubeplay signature"},
		{"another pod with its signatures", func(p *corev1.Pod) { p.UID = "uid-impostor" }, o, unitKey, false, "not its own"},
		{"renamed", func(p *corev1.Pod) { p.Name = "kubeplay-warm-b" }, o, unitKey, false, "not its own"},
		{"another group", func(*corev1.Pod) {}, Owner{Kind: KindWarm, Group: "h", Label: "big", Revision: rev}, unitKey, false, "not its own"},
		{"another label", func(*corev1.Pod) {}, Owner{Kind: KindWarm, Group: "g", Revision: rev}, unitKey, false, "not its own"},
		{"another revision", func(*corev1.Pod) {}, Owner{Kind: KindWarm, Group: "g", Label: "big", Revision: "0000"}, unitKey, false, "not its own"},
		{"a node's signature", func(*corev1.Pod) {}, Owner{Kind: KindNode, Group: "g", Label: "big", Revision: rev}, unitKey, false, "not its own"},
		{"another key", func(*corev1.Pod) {}, o, mustKey("another-catalog-key-of-32-bytes-long"), false, "not its own"},
		{"no key", func(*corev1.Pod) {}, o, nil, false, "no catalog key"},
		{"image changed", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "evil:1" }, o, unitKey, true, "spec changed"},
		{"toleration added", func(p *corev1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists})
		}, o, unitKey, true, "spec changed"},
		{"ephemeral container", func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox"}}}
		}, o, unitKey, true, "spec changed"},
		{"resized", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}
		}, o, unitKey, true, "spec changed"},
		{"spec signature of another pod", func(p *corev1.Pod) {
			p.Annotations[AnnotationSpecSignature] = signedWarm(tmpl, "kubeplay-warm-c").Annotations[AnnotationSpecSignature]
		}, o, unitKey, true, "spec changed"},
	} {
		p := good.DeepCopy()
		c.change(p)
		r := refusal(t, Verify(c.key, c.o, p))
		switch {
		case r == nil:
			t.Errorf("%s: accepted", c.name)
		case r.Ours != c.ours || !strings.Contains(r.Error(), c.reason) || !strings.Contains(r.Error(), "pod ns/"):
			t.Errorf("%s: %v (ours %v), want %q (ours %v)", c.name, r, r.Ours, c.reason, c.ours)
		}
	}
}

// A spec read back through another client may hold [] where the create's
// answer held nil: that is no change.
func TestSpecDigestIgnoresNilAndEmpty(t *testing.T) {
	a := runPod()
	a.Spec.Volumes, a.Spec.Containers[0].VolumeMounts = nil, nil // the default pod's /tmp
	b := a.DeepCopy()
	b.Spec.Containers[0].Command, b.Spec.Volumes, b.Spec.Tolerations = []string{}, []corev1.Volume{}, []corev1.Toleration{}
	if string(specDigest(a)) != string(specDigest(b)) {
		t.Errorf("nil and empty lists digest differently")
	}
	b.Spec.Containers[0].Command = []string{""}
	if string(specDigest(a)) == string(specDigest(b)) {
		t.Errorf("a command of one empty word digests as none")
	}
}

// Sign writes both signatures onto the pod created; when the pod changed
// since (a conflict), it reads it again and signs it if it is still the
// pod created, and not when another pod took its name.
func TestSign(t *testing.T) {
	tmpl := Template{Group: "g", Namespace: "ns", Pod: runPod(), Key: unitKey}
	o := tmpl.owner(Revision(tmpl.Pod))
	created := tmpl.warmPod(Revision(tmpl.Pod))
	created.Name, created.UID = "kubeplay-warm-x", "uid-x"
	kube := fake.NewClientset(created)
	conflicts := 1
	kube.PrependReactor("update", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "kubeplay-warm-x", errors.New("bound"))
		}
		return false, nil, nil
	})
	got, err := Sign(context.Background(), kube, unitKey, o, created)
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(unitKey, o, got); err != nil || conflicts != 0 {
		t.Errorf("the signed pod: %v (%d conflicts left)", err, conflicts)
	}
	// Another pod took the name between the create and the signature.
	other := created.DeepCopy()
	other.UID, other.Annotations = "uid-other", nil
	if _, err := kube.CoreV1().Pods("ns").Update(context.Background(), other, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	conflicts = 1
	if _, err := Sign(context.Background(), kube, unitKey, o, created); err == nil || !strings.Contains(err.Error(), "replaced") {
		t.Errorf("signing a pod whose name another took: %v", err)
	}
	if q, _ := kube.CoreV1().Pods("ns").Get(context.Background(), "kubeplay-warm-x", metav1.GetOptions{}); len(q.Annotations) != 0 {
		t.Errorf("the other pod was signed: %v", q.Annotations)
	}
	if _, err := Sign(context.Background(), kube, nil, tmpl.owner(""), created); !errors.Is(err, ErrNoKey) {
		t.Errorf("signing without a key: %v", err)
	}
}

// A signature lives through an API server restart: the update that met a
// refused connection is sent again, and one the server carried out before
// the connection broke (sent again, it conflicts) is found signed.
func TestSignThroughRestart(t *testing.T) {
	tmpl := Template{Group: "g", Namespace: "ns", Pod: runPod(), Key: unitKey}
	o := tmpl.owner(Revision(tmpl.Pod))
	created := tmpl.warmPod(Revision(tmpl.Pod))
	created.Name, created.UID, created.ResourceVersion = "kubeplay-warm-x", "uid-x", "1"
	kube := fake.NewClientset(created)
	refused := 1
	kube.PrependReactor("update", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if refused > 0 {
			refused--
			return true, nil, syscall.ECONNREFUSED
		}
		return false, nil, nil
	})
	got, err := Sign(context.Background(), kube, unitKey, o, created)
	if err != nil || refused != 0 {
		t.Fatalf("signing through a refused connection: %v (%d refusals left)", err, refused)
	}
	if err := Verify(unitKey, o, got); err != nil {
		t.Errorf("the signed pod: %v", err)
	}
	// Carried out, then the connection broke: the update is sent again and
	// conflicts on the resourceVersion it had; the read finds the same pod.
	kube = fake.NewClientset(created)
	cut := 1
	kube.PrependReactor("update", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if cut > 0 {
			cut--
			ua, ok := a.(k8stesting.UpdateAction)
			if !ok {
				return false, nil, nil
			}
			p, ok := ua.GetObject().(*corev1.Pod)
			if !ok {
				return false, nil, nil
			}
			applied := p.DeepCopy()
			applied.ResourceVersion = "2"
			if err := kube.Tracker().Update(a.GetResource(), applied, a.GetNamespace()); err != nil {
				return true, nil, err
			}
			return true, nil, io.ErrUnexpectedEOF
		}
		ua, ok := a.(k8stesting.UpdateAction)
		if !ok {
			return false, nil, nil
		}
		if p, ok := ua.GetObject().(*corev1.Pod); ok && p.ResourceVersion != "2" {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, p.Name, errors.New("changed"))
		}
		return false, nil, nil
	})
	got, err = Sign(context.Background(), kube, unitKey, o, created)
	if err != nil || cut != 0 {
		t.Fatalf("signing after a cut update: %v", err)
	}
	if err := Verify(unitKey, o, got); err != nil || got.UID != created.UID {
		t.Errorf("the pod signed after a cut update: %v (uid %s)", err, got.UID)
	}
}

// A fill leaves pods that carry the pool's labels but that kubeplay did not
// make, and deletes its own that changed.
func TestFillLeavesForeignPods(t *testing.T) {
	tmpl := Template{Group: "g", Namespace: "ns", Pod: runPod(), Key: unitKey}
	running := func(p *corev1.Pod) *corev1.Pod {
		p.Status.Phase = corev1.PodRunning
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		return p
	}
	good := running(signedWarm(tmpl, "good"))
	foreign := running(signedWarm(tmpl, "foreign"))
	foreign.UID = "uid-impostor"
	changed := running(signedWarm(tmpl, "changed"))
	changed.Spec.Containers[0].Image = "evil:1"
	kube := runnertest.NewClientset(good, foreign, changed)
	var refused []string
	tmpl.OnRefused = func(r *RefusedError) { refused = append(refused, r.Name) }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if n, err := Fill(ctx, kube, tmpl, 1); err != nil || n != 0 {
		t.Fatalf("fill: %d, %v; want nothing created (good is there)", n, err)
	}
	list, err := kube.CoreV1().Pods("ns").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	if strings.Join(names, ",") != "foreign,good" {
		t.Errorf("pods after the fill: %v, want foreign and good (changed deleted)", names)
	}
	if strings.Join(refused, ",") != "foreign,changed" && strings.Join(refused, ",") != "changed,foreign" {
		t.Errorf("refused %v", refused)
	}
	if c, err := Count(ctx, kube, unitKey, "ns", "g"); err != nil || c != (Counts{Ready: 1}) {
		t.Errorf("count %+v, %v; want the good pod only", c, err)
	}
	if err := Drain(ctx, kube, unitKey, "ns", "g", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Pods("ns").Get(ctx, "foreign", metav1.GetOptions{}); err != nil {
		t.Errorf("the drain deleted the foreign pod: %v", err)
	}
	if _, err := Fill(ctx, kube, Template{Group: "g", Namespace: "ns", Pod: runPod()}, 1); !errors.Is(err, ErrNoKey) {
		t.Errorf("a fill without a key: %v", err)
	}
}

// FuzzVerify: whatever pod an override renders and whatever is changed on
// it after it was signed (the second input, merged into its spec),
// Verify never panics, accepts the pod as signed, and refuses it whenever
// its spec differs from the one signed (but for node, deadline and
// scheduling gates), or when it is given another identity.
func FuzzVerify(f *testing.F) {
	f.Add("spec:\n  containers:\n  - name: worker\n    env:\n    - {name: X, value: '1'}\n", `{"containers":[{"name":"worker","image":"evil:1"}]}`, "big", "")
	f.Add("", `{"hostPID":true}`, "", "uid-2")
	f.Add("", `{"nodeName":"n1","activeDeadlineSeconds":5}`, "", "")
	f.Add("", `{"tolerations":[{"operator":"Exists"}]}`, "l", "")
	f.Add("", `{"ephemeralContainers":[{"name":"d","image":"busybox"}]}`, "", "")
	f.Add("", `{"volumes":[{"name":"root","hostPath":{"path":"/"}}]}`, "", "")
	f.Add("", `{"containers":[]}`, "", "")
	f.Add("", `{"containers":[{"name":"worker","resources":{"limits":{"cpu":"1000m"}}}]}`, "", "")
	f.Add("spec: {securityContext: {runAsUser: 0}}\n", `{"securityContext":{"runAsUser":0}}`, "", "")
	f.Fuzz(func(t *testing.T, override, change, label, uid string) {
		pod, err := podspec.RenderGroup(podspec.Group{Name: "g", Namespace: "ns", Image: "img:1", Override: override})
		if err != nil || len(pod.Spec.Containers) == 0 {
			return
		}
		tmpl := Template{Group: "g", Namespace: "ns", Label: label, Pod: pod, Key: unitKey}
		rev := Revision(pod)
		p := signedWarm(tmpl, "kubeplay-warm-f")
		o := tmpl.owner(rev)
		if err := Verify(unitKey, o, p); err != nil {
			t.Fatalf("the pod as signed: %v", err)
		}
		q := p.DeepCopy()
		if b, err := yaml.YAMLToJSON([]byte(change)); err == nil && yaml.Unmarshal(b, &q.Spec) != nil {
			return
		}
		if uid != "" {
			q.UID = types.UID(uid)
		}
		q.Annotations = maps.Clone(p.Annotations)
		err = Verify(unitKey, o, q)
		was, is := p.Spec.DeepCopy(), q.Spec.DeepCopy()
		for _, s := range []*corev1.PodSpec{was, is} {
			s.NodeName, s.ActiveDeadlineSeconds, s.SchedulingGates = "", nil, nil
		}
		if err == nil && (q.UID != p.UID || !equality.Semantic.DeepEqual(was, is)) {
			t.Fatalf("accepted a pod that is not the one signed: uid %s (was %s), spec %s", q.UID, p.UID, diff(was, is))
		}
		if err != nil && q.UID == p.UID && equality.Semantic.DeepEqual(was, is) {
			t.Fatalf("refused the pod as signed: %v", err)
		}
	})
}

func diff(a, b *corev1.PodSpec) string {
	x, _ := yaml.Marshal(a)
	y, _ := yaml.Marshal(b)
	return "\n" + string(x) + "\nvs\n" + string(y)
}

// TestRotationDeletesPreviousKeysPods: after a rotation, warm pods signed
// under a key in previous_catalog_keys are kubeplay's own, not strangers: a
// run never takes one, and a fill deletes them and makes pods signed under
// the new key. Without the previous key they are left as strangers.
func TestRotationDeletesPreviousKeysPods(t *testing.T) {
	oldKey := "kubeplay-warmpool-old-key-of-32-bytes"
	newSource := func(prev ...string) *catalogkey.Key {
		src, err := catalogkey.NewSource(nil, "cat", []byte("kubeplay-warmpool-new-key-of-32-bytes"))
		if err != nil {
			t.Fatal(err)
		}
		var b [][]byte
		for _, p := range prev {
			b = append(b, []byte(p))
		}
		if src, err = src.WithPrevious(b); err != nil {
			t.Fatal(err)
		}
		k, _ := src.Key(context.Background(), false)
		return k
	}
	running := func(p *corev1.Pod) *corev1.Pod {
		p.Status.Phase = corev1.PodRunning
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		return p
	}
	before := Template{Group: "g", Namespace: "ns", Pod: runPod(), Key: mustKey(oldKey)}
	old := running(signedWarm(before, "old"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// Without the previous key: a stranger, left.
	kube := runnertest.NewClientset(old.DeepCopy())
	if err := Drain(ctx, kube, newSource(), "ns", "g", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Pods("ns").Get(ctx, "old", metav1.GetOptions{}); err != nil {
		t.Errorf("without previous_catalog_keys the drain deleted the old pod: %v", err)
	}

	after := Template{Group: "g", Namespace: "ns", Pod: runPod(), Key: newSource(oldKey)}
	if r := refusal(t, Verify(after.Key, after.owner(Revision(after.Pod)), old)); r == nil || !r.Ours ||
		!strings.Contains(r.Reason, "previous catalog key") {
		t.Fatalf("the old pod under the rotated key: %+v, want refused as ours", r)
	}
	kube = runnertest.NewClientset(old.DeepCopy())
	if got, err := Take(ctx, kube, after, Claim{Labels: runPod().Labels, Timeout: time.Minute}); err != nil || got != nil {
		t.Fatalf("a run took %v, %v; want the old pod refused", got, err)
	}
	if n, err := Fill(ctx, kube, after, 1); err != nil || n != 1 {
		t.Fatalf("fill: %d, %v", n, err)
	}
	list, err := kube.CoreV1().Pods("ns").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name == "old" {
		t.Fatalf("pods after the fill: %d, first %q; want one new pod", len(list.Items), list.Items[0].Name)
	}
	// The fake gives no UID: the signature is checked against what it binds.
	p := &list.Items[0]
	if sig := p.Annotations[AnnotationSignature]; !after.Key.Verify(sig, KindWarm, identity(groupOwner("g", p), p)...) {
		t.Errorf("the new pod is not signed under the new key: %v", p.Annotations)
	}
}

// TestClaimSignsTheRun: a claim signs the pod as the run's in its update,
// so that the orphan sweep knows it; the signature binds the pod and the
// run's labels.
func TestClaimSignsTheRun(t *testing.T) {
	tmpl := Template{Group: "g", Namespace: "ns", Pod: runPod(), Key: unitKey}
	p := signedWarm(tmpl, "w")
	p.Status.Phase = corev1.PodRunning
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	kube := runnertest.NewClientset(p)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := Take(ctx, kube, tmpl, Claim{Labels: runPod().Labels, Timeout: time.Minute})
	if err != nil || got == nil {
		t.Fatalf("take: %v, %v", got, err)
	}
	if !VerifyRun(unitKey, "g", got, false) {
		t.Errorf("the claimed pod's run signature does not hold: %v", got.Annotations)
	}
	moved := got.DeepCopy()
	moved.Labels[managed.LabelRun] = "another"
	if VerifyRun(unitKey, "g", moved, false) || VerifyRun(unitKey, "h", got, false) {
		t.Error("the run signature held for another run or group")
	}
}

// TestCreateResendsQuotaConflicts: a warm pod's create that quota admission
// refused with a conflict (another create updated the quota at the same
// time; nothing was made) is sent again, so a group's apply does not warn
// of a pool it could fill; any other conflict is returned at once.
func TestCreateResendsQuotaConflicts(t *testing.T) {
	tmpl := Template{Group: "g", Namespace: "ns", Pod: runPod(), Key: unitKey}
	rev := Revision(tmpl.Pod)
	kube := runnertest.NewClientset()
	refusals, creates := 2, 0
	kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		creates++
		if refusals > 0 {
			refusals--
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "resourcequotas"}, "q", errors.New("the object has been modified"))
		}
		if ca, ok := a.(k8stesting.CreateAction); ok {
			if p, ok := ca.GetObject().(*corev1.Pod); ok {
				p.UID = "uid-made" // as the API server sets it; the signature covers it
			}
		}
		return false, nil, nil
	})
	if err := tmpl.create(t.Context(), kube, rev); err != nil || creates != 3 {
		t.Fatalf("create after two quota conflicts: %v after %d creates, want made on the third", err, creates)
	}
	pods, err := kube.CoreV1().Pods("ns").List(t.Context(), metav1.ListOptions{})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("%d pods (%v), want one", len(pods.Items), err)
	}
	if err := Verify(unitKey, tmpl.owner(rev), &pods.Items[0]); err != nil {
		t.Errorf("the pod made after the conflicts is not signed: %v", err)
	}
	creates = 0
	kube.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		creates++
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "", errors.New("the object has been modified"))
	})
	if err := tmpl.create(t.Context(), kube, rev); !apierrors.IsConflict(err) || creates != 1 {
		t.Errorf("a conflict on the pod: %v after %d creates, want it returned after one", err, creates)
	}
}

// TestFillTreatsLastingQuotaConflictsAsAFullQuota: conflicts past the
// create's resends leave the pool short, as a full quota does, without an
// error (a group's apply would warn "Warm Pods Not Started").
func TestFillTreatsLastingQuotaConflictsAsAFullQuota(t *testing.T) {
	saved := conflictBackoff
	conflictBackoff = wait.Backoff{Steps: 3, Duration: time.Millisecond}
	t.Cleanup(func() { conflictBackoff = saved })
	tmpl := Template{Group: "g", Namespace: "ns", Pod: runPod(), Key: unitKey}
	kube := runnertest.NewClientset()
	creates := 0
	kube.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		creates++
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "resourcequotas"}, "q", errors.New("the object has been modified"))
	})
	if created, err := Fill(t.Context(), kube, tmpl, 2); err != nil || created != 0 || creates != 3 {
		t.Errorf("Fill = %d, %v after %d creates; want none made, no error, after the backoff's 3 sends", created, err, creates)
	}
}
