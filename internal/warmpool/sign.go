// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package warmpool

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalogkey"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

// Labels say what a pod claims to be; anyone who may create pods in the
// namespace can copy them. What kubeplay claims for a run, or deletes, it
// signed with the catalog key when it made it: a pod of another origin is
// never given a run's bundle and secrets.
const (
	// AnnotationSignature signs who the pod is: its UID (which the API
	// server assigns, so no other pod can carry it), name, namespace, and
	// the group, node label, revision or node it was made for.
	AnnotationSignature = "kubeplay.io/signature"
	// AnnotationSpecSignature signs who the pod is and its spec as the API
	// server returned it from kubeplay's create; an image, toleration or
	// ephemeral container added since breaks it.
	AnnotationSpecSignature = "kubeplay.io/spec-signature"
	// AnnotationRunSignature signs a run pod: its UID, name, namespace, and
	// the group and run id of its labels. The orphan sweep deletes only
	// pods whose run signature holds.
	AnnotationRunSignature = "kubeplay.io/run-signature"
)

// The kinds of pod kubeplay signs; a signature of one never passes as the
// other's.
const (
	KindWarm = "warm-pod"
	KindNode = "node-pod"
	KindRun  = "run-pod"
)

// Owner is what a pod was made for.
type Owner struct {
	// Kind is KindWarm or KindNode.
	Kind string
	// Group is the container group; Label the node label, "" for none.
	Group, Label string
	// Revision is a warm pod's template revision; Node a held node's name.
	Revision, Node string
}

// WarmOwner is the owner a warm pod of t at revision rev is signed for.
func (t Template) owner(rev string) Owner {
	return Owner{Kind: KindWarm, Group: t.Group, Label: t.Label, Revision: rev}
}

// RefusedError: a pod that carries kubeplay's labels but that kubeplay may
// not claim. Ours says that kubeplay made it (its identity signature holds)
// and its spec changed since, so it may be deleted; a pod that is not ours
// is left alone.
type RefusedError struct {
	Namespace, Name string
	Ours            bool
	// Previous: ours, signed under a previous catalog key (a rotation).
	Previous bool
	Reason   string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("pod %s/%s %s", e.Namespace, e.Name, e.Reason)
}

// ErrNoKey: nothing can be signed or verified without the catalog key.
var ErrNoKey = errors.New("no catalog key to sign or verify kubeplay's pods with")

// specDigest is the digest of p's spec but for what changes after a create
// without anyone's intent: the node the scheduler binds it to, the deadline
// that a claim lowers, and the scheduling gates that controllers remove.
// The spec goes through JSON twice, dropping nulls and empty lists, so
// that a client that decodes an empty list as nil and one that decodes it
// as [] agree (as equality.Semantic does).
func specDigest(p *corev1.Pod) []byte {
	spec := p.Spec.DeepCopy()
	spec.NodeName, spec.ActiveDeadlineSeconds, spec.SchedulingGates = "", nil, nil
	b, err := json.Marshal(spec)
	if err != nil {
		return nil
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if d.Decode(&v) != nil {
		return nil
	}
	b, err = json.Marshal(prune(v))
	if err != nil {
		return nil
	}
	sum := sha256.Sum256(b)
	return sum[:]
}

// prune drops the nulls and empty lists of v's objects.
func prune(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if e = prune(e); empty(e) {
				delete(v, k)
			} else {
				v[k] = e
			}
		}
	case []any:
		for i, e := range v {
			v[i] = prune(e)
		}
	}
	return v
}

func empty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case []any:
		return len(v) == 0
	}
	return false
}

// identity is what AnnotationSignature binds.
func identity(o Owner, p *corev1.Pod) [][]byte {
	return [][]byte{[]byte(p.Namespace), []byte(p.Name), []byte(p.UID), []byte(o.Group), []byte(o.Label),
		[]byte(o.Revision), []byte(o.Node)}
}

// Signatures are the annotations that sign p, as kubeplay's create returned
// it, for o.
func Signatures(key *catalogkey.Key, o Owner, p *corev1.Pod) map[string]string {
	id := identity(o, p)
	return map[string]string{
		AnnotationSignature:     key.Sign(o.Kind, id...),
		AnnotationSpecSignature: key.Sign(o.Kind+"/spec", append(id, specDigest(p))...),
	}
}

// Verify checks that kubeplay made p for o and that its spec is the one it
// made: nil, or a *RefusedError that says what is wrong. It makes no
// request.
func Verify(key *catalogkey.Key, o Owner, p *corev1.Pod) error {
	refuse := func(ours bool, reason string) error {
		return &RefusedError{Namespace: p.Namespace, Name: p.Name, Ours: ours, Reason: reason}
	}
	sig, ok := p.Annotations[AnnotationSignature]
	what := "container group " + fmt.Sprintf("%q", o.Group)
	switch {
	case key == nil:
		return refuse(false, "cannot be verified: "+ErrNoKey.Error())
	case !ok || sig == "":
		return refuse(false, "carries kubeplay's labels but no kubeplay signature: kubeplay did not make it (or a "+
			"kubeplay from before pods were signed did)")
	case p.UID != "" && !key.Verify(sig, o.Kind, identity(o, p)...) && signedBefore(key, sig, o.Kind, identity(o, p)...):
		return &RefusedError{Namespace: p.Namespace, Name: p.Name, Ours: true, Previous: true, Reason: "was made by " +
			"kubeplay under a previous catalog key (one of previous_catalog_keys), so it is not used again"}
	case p.UID == "" || !key.Verify(sig, o.Kind, identity(o, p)...):
		return refuse(false, "carries a kubeplay signature that is not its own: kubeplay did not make it as a "+
			o.Kind+" of "+what+" (or the catalog key changed since, and the old key is not in previous_catalog_keys)")
	case !key.Verify(p.Annotations[AnnotationSpecSignature], o.Kind+"/spec", append(identity(o, p), specDigest(p))...):
		return refuse(true, "was made by kubeplay, but its spec changed since (an image, a toleration, an ephemeral "+
			"container or resources were changed out of band)")
	}
	return nil
}

// signedBefore reports whether one of key's previous keys made sig.
func signedBefore(key *catalogkey.Key, sig, domain string, parts ...[]byte) bool {
	for _, k := range key.Previous() {
		if k.Verify(sig, domain, parts...) {
			return true
		}
	}
	return false
}

// runIdentity is what AnnotationRunSignature binds: p itself, and the
// group and run its labels name.
func runIdentity(p *corev1.Pod) [][]byte {
	return [][]byte{[]byte(p.Namespace), []byte(p.Name), []byte(p.UID),
		[]byte(p.Labels[managed.LabelContainerGroup]), []byte(p.Labels[managed.LabelRun])}
}

// RunSignature is the run signature of p, whose UID and run labels are set.
func RunSignature(key *catalogkey.Key, p *corev1.Pod) string {
	return key.Sign(KindRun, runIdentity(p)...)
}

// VerifyRun reports whether kubeplay signed p as a run pod of group, under
// key or, with previous, under one of key's previous keys. It makes no
// request.
func VerifyRun(key *catalogkey.Key, group string, p *corev1.Pod, previous bool) bool {
	sig := p.Annotations[AnnotationRunSignature]
	if key == nil || sig == "" || p.UID == "" || p.Labels[managed.LabelContainerGroup] != group || p.Labels[managed.LabelRun] == "" {
		return false
	}
	return key.Verify(sig, KindRun, runIdentity(p)...) || previous && signedBefore(key, sig, KindRun, runIdentity(p)...)
}

// SignRun records p's run signature after kubeplay created p, and returns
// the pod it updated.
func SignRun(ctx context.Context, kube kubernetes.Interface, key *catalogkey.Key, p *corev1.Pod) (*corev1.Pod, error) {
	if key == nil {
		return nil, ErrNoKey
	}
	return annotate(ctx, kube, p, map[string]string{AnnotationRunSignature: RunSignature(key, p)})
}

// Sign records p's signatures for o, after kubeplay created p (whose UID
// only then exists), and returns the pod it updated. The signatures are of
// p as given, the create's answer: a change made to the pod in between
// shows as a changed spec. It updates rather than patches, so that the
// group's credential needs no verb beyond those a warm pod's claim needs;
// a conflict (the scheduler bound the pod meanwhile) reads it again.
func Sign(ctx context.Context, kube kubernetes.Interface, key *catalogkey.Key, o Owner, p *corev1.Pod) (*corev1.Pod, error) {
	if key == nil {
		return nil, ErrNoKey
	}
	return annotate(ctx, kube, p, Signatures(key, o, p))
}

// annotate adds sigs to p's annotations with an update; a conflict reads
// the pod again, as long as it is the same pod.
func annotate(ctx context.Context, kube kubernetes.Interface, p *corev1.Pod, sigs map[string]string) (*corev1.Pod, error) {
	pods := kube.CoreV1().Pods(p.Namespace)
	q := p.DeepCopy()
	for attempt := 1; ; attempt++ {
		if q.Annotations == nil {
			q.Annotations = map[string]string{}
		}
		maps.Copy(q.Annotations, sigs)
		// Through an API server restart or a cut connection: a pod left
		// unsigned is one the orphan sweep may never delete. An update the
		// server carried out before the connection broke conflicts when
		// sent again, and the read below finds the same pod.
		var got *corev1.Pod
		err := kubeclient.RetryIdempotent(ctx, func() (err error) {
			got, err = pods.Update(ctx, q, metav1.UpdateOptions{FieldManager: managed.FieldManager})
			return err
		})
		if err == nil {
			return got, nil
		}
		if !apierrors.IsConflict(err) || attempt == 5 {
			return nil, fmt.Errorf("signing pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		if err := kubeclient.RetryIdempotent(ctx, func() (err error) {
			q, err = pods.Get(ctx, p.Name, metav1.GetOptions{})
			return err
		}); err != nil {
			return nil, fmt.Errorf("signing pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		if q.UID != p.UID {
			return nil, fmt.Errorf("signing pod %s/%s: it was replaced by another pod of its name", p.Namespace, p.Name)
		}
	}
}
