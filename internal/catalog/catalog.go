// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

// Package catalog is the typed store of kubeplay's definitions in the
// catalog namespace: credentials as Secrets, container groups as ConfigMaps
// and node labels as PodTemplates. It is the only code that reads or writes
// those objects, so that every definition is read, written, found gone and
// checked for edits made outside kubeplay the same way.
package catalog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalogkey"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

// Sentinel errors; a failed operation returns an *Error that wraps one of
// them or the API server's error.
var (
	// ErrNotFound: no object of the name exists.
	ErrNotFound = errors.New("not found in the catalog")
	// ErrAlreadyExists: an object of the name exists.
	ErrAlreadyExists = errors.New("already exists in the catalog")
	// ErrNotDefinition: an object of the name exists but does not hold a
	// kubeplay definition of the kind asked for.
	ErrNotDefinition = errors.New("not a kubeplay definition")
	// ErrTampered: the object may no longer hold what kubeplay wrote (its
	// signature does not vouch for its content), so nothing connects with it
	// or runs it.
	ErrTampered = errors.New("changed outside kubeplay")
)

// Kind is a kind of definition.
type Kind string

// The kinds of definition.
const (
	KindCredential Kind = "credential"
	KindGroup      Kind = "container group"
	KindLabel      Kind = "node label"
)

// AnnotationDigest holds, on a container group's ConfigMap and a node
// label's PodTemplate, the signature (catalogkey) of the content as the API
// server stored it when kubeplay wrote it. Credentials keep theirs in
// credential.AnnotationDigest.
const AnnotationDigest = "kubeplay.io/digest"

// The signature domains of the kinds, so that one kind's signature is never
// taken for another's.
const (
	domainCredential = "kubeplay.io/catalog/credential"
	domainGroup      = "kubeplay.io/catalog/container-group"
	domainLabel      = "kubeplay.io/catalog/node-label"
)

// Error is a failed catalog operation on one object.
type Error struct {
	// Op is what failed: "reading", "writing", "deleting" or "listing".
	Op        string
	Kind      Kind
	Name      string
	Namespace string
	// Object names the Kubernetes object, such as "Secret kubeplay-system/awx".
	Object string
	// Reason says why an object is not a definition (ErrNotDefinition).
	Reason string
	Err    error
}

func (e *Error) Error() string {
	switch {
	case errors.Is(e.Err, ErrNotFound):
		return fmt.Sprintf("%s %q does not exist in catalog namespace %q", e.Kind, e.Name, e.Namespace)
	case errors.Is(e.Err, ErrAlreadyExists):
		return e.Object + " already exists"
	case errors.Is(e.Err, ErrNotDefinition):
		return fmt.Sprintf("%s is not a kubeplay %s (%s)", e.Object, e.Kind, e.Reason)
	case errors.Is(e.Err, ErrTampered):
		return fmt.Sprintf("%s %q is refused: %s", e.Kind, e.Name, e.Reason)
	}
	return fmt.Sprintf("%s %s: %v", e.Op, e.Object, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Mode says whether a Put may replace a stored definition.
type Mode int

const (
	// NewOnly fails with ErrAlreadyExists when the name is taken.
	NewOnly Mode = iota
	// CreateOrUpdate creates the definition or replaces the stored one.
	CreateOrUpdate
)

// Entry is a definition as the catalog holds it.
type Entry[T any] struct {
	Value T
	// Rendered is the YAML kubeplay shows for the definition: a group's
	// default run pod, a label's pod template; empty for credentials.
	Rendered string
	// Object names the Kubernetes object that stores it.
	Object string
	// Digest is a digest of the stored content: it changes whenever the
	// content does.
	Digest string
	// Drift says how the object was changed outside kubeplay since kubeplay
	// last wrote it, or why kubeplay cannot tell that it was not (no
	// signature, or one from before kubeplay signed its catalog); empty
	// only when its signature verifies.
	Drift string
}

// Store reads and writes the definitions of one catalog namespace.
type Store struct {
	kube      kubernetes.Interface
	namespace string
	keys      *catalogkey.Source

	mu    sync.Mutex
	ready bool
}

// New returns the store of namespace on the cluster kube reaches, which
// signs and verifies with the key keys gives; nil keys is the key Secret in
// namespace (catalogkey.NewSource without a configured key).
func New(kube kubernetes.Interface, namespace string, keys *catalogkey.Source) *Store {
	if keys == nil {
		keys, _ = catalogkey.NewSource(kube, namespace, nil) // no configured key: no error
	}
	return &Store{kube: kube, namespace: namespace, keys: keys}
}

// Key returns the catalog's key, for others that sign what kubeplay makes
// (warm pods, held nodes). It does not create the key Secret: writers do,
// in EnsureNamespace.
func (s *Store) Key(ctx context.Context) (*catalogkey.Key, error) {
	return s.keys.Key(ctx, false)
}

// Namespace is the catalog namespace.
func (s *Store) Namespace() string { return s.namespace }

// NamespaceUID returns the UID of the catalog namespace, which owner
// annotations record to tell catalogs of the same name on different
// clusters apart.
func (s *Store) NamespaceUID(ctx context.Context) (string, error) {
	ns, err := s.kube.CoreV1().Namespaces().Get(ctx, s.namespace, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading catalog namespace %q: %w", s.namespace, err)
	}
	return string(ns.UID), nil
}

// EnsureNamespace creates the catalog namespace unless it exists, and the
// key Secret unless it exists or the key is configured, once per store;
// writers call it before their first write.
func (s *Store) EnsureNamespace(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ready {
		return nil
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.namespace, Labels: managed.Labels()}}
	_, err := s.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{FieldManager: managed.FieldManager})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating catalog namespace %q: %w", s.namespace, err)
	}
	if _, err := s.keys.Key(ctx, true); err != nil {
		return err
	}
	s.ready = true
	return nil
}

// CheckAbsent returns nil when no object of kind k is called name, and an
// *Error wrapping ErrAlreadyExists when one is, kubeplay's or not. Writers
// call it before they provision anything for a new definition.
func (s *Store) CheckAbsent(ctx context.Context, k Kind, name string) error {
	var err error
	switch k {
	case KindCredential:
		_, err = credentials.client(s.kube, s.namespace).Get(ctx, name, metav1.GetOptions{})
	case KindGroup:
		_, err = groups.client(s.kube, s.namespace).Get(ctx, name, metav1.GetOptions{})
	case KindLabel:
		_, err = labels.client(s.kube, s.namespace).Get(ctx, name, metav1.GetOptions{})
	default:
		return fmt.Errorf("unknown kind of definition %q", k)
	}
	e := s.fail("reading", k, name, err)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err == nil:
		e.Err = ErrAlreadyExists
	}
	return e
}

// object is a typed Kubernetes object.
type object interface {
	metav1.Object
	runtime.Object
}

// client is what a typed client-go client of one resource offers.
type client[O object, L runtime.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (O, error)
	Create(ctx context.Context, obj O, opts metav1.CreateOptions) (O, error)
	Update(ctx context.Context, obj O, opts metav1.UpdateOptions) (O, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
}

// codec is how one kind of definition is stored as an object of type O.
type codec[T any, O object, L runtime.Object] struct {
	kind      Kind
	resource  string // the object's kind, for messages
	component string // its managed.LabelComponent
	client    func(kube kubernetes.Interface, namespace string) client[O, L]
	items     func(L) []O
	// encode renders the object to write; its digest annotation is set.
	encode func(v T, namespace string) (O, error)
	// decode reads an owned object back; an error says why it is not a
	// definition.
	decode func(o O) (T, string, error)
	// digestKey is the annotation that records the signature of parts(o)
	// in domain; an object whose signature does not verify counts as
	// changed outside kubeplay.
	digestKey string
	domain    string
	parts     func(o O) [][]byte
	// digest is the plain digest of the content, for Entry.Digest.
	digest func(o O) string
	// assign copies the content of src into dst.
	assign func(dst, src O)
}

func (s *Store) fail(op string, k Kind, name string, err error) *Error {
	res := map[Kind]string{KindCredential: credentials.resource, KindGroup: groups.resource, KindLabel: labels.resource}[k]
	return &Error{Op: op, Kind: k, Name: name, Namespace: s.namespace, Object: objectName(res, s.namespace, name), Err: err}
}

func objectName(resource, namespace, name string) string {
	return resource + " " + namespace + "/" + name
}

func get[T any, O object, L runtime.Object](ctx context.Context, s *Store, c *codec[T, O, L], name string) (Entry[T], error) {
	o, err := c.client(s.kube, s.namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		e := s.fail("reading", c.kind, name, err)
		if apierrors.IsNotFound(err) {
			e.Err = ErrNotFound
		}
		return Entry[T]{}, e
	}
	return c.entry(ctx, s, o)
}

func (c *codec[T, O, L]) entry(ctx context.Context, s *Store, o O) (Entry[T], error) {
	if !managed.Owns(o, managed.LabelComponent, c.component) {
		e := s.fail("reading", c.kind, o.GetName(), ErrNotDefinition)
		e.Reason = fmt.Sprintf("label %s=%s missing", managed.LabelComponent, c.component)
		return Entry[T]{}, e
	}
	v, rendered, err := c.decode(o)
	if err != nil {
		e := s.fail("reading", c.kind, o.GetName(), ErrNotDefinition)
		e.Reason = err.Error()
		return Entry[T]{}, e
	}
	en := Entry[T]{Value: v, Rendered: rendered, Object: objectName(c.resource, o.GetNamespace(), o.GetName()), Digest: c.digest(o)}
	recorded := o.GetAnnotations()[c.digestKey]
	if recorded == "" {
		en.Drift = en.Object + " has lost its digest annotation " + c.digestKey
		return en, nil
	}
	var key *catalogkey.Key
	if catalogkey.Signed(recorded) {
		// Only a signature needs the key: an unsigned digest is drift as it is.
		if key, err = s.keys.Key(ctx, false); err != nil && !errors.Is(err, catalogkey.ErrRefused) && !errors.Is(err, catalogkey.ErrMissing) {
			return Entry[T]{}, s.fail("reading", c.kind, o.GetName(), err)
		}
	}
	en.Drift = c.drift(en.Object, recorded, key, err, o)
	return en, nil
}

// drift says why the signature recorded on o does not vouch for its
// content; "" when it does. keyErr is why there is no key.
func (c *codec[T, O, L]) drift(object, recorded string, key *catalogkey.Key, keyErr error, o O) string {
	switch {
	case !catalogkey.Signed(recorded):
		// A plain digest: written before kubeplay signed, or by anyone since.
		return object + " has an unsigned digest, which anyone who can edit it can compute: it was written before " +
			"kubeplay signed its catalog, or changed outside kubeplay since; apply its definition again to sign it"
	case key == nil:
		return object + " cannot be verified: " + keyErr.Error()
	case !key.Verify(recorded, c.domain, c.signed(o)...):
		return object + " was changed outside kubeplay (its signature does not match its content)"
	}
	return ""
}

// signed are the parts a signature covers: the object's namespace and name,
// so that a signed definition copied under another name or into another
// catalog that shares the key does not verify, then its content.
func (c *codec[T, O, L]) signed(o O) [][]byte {
	return append([][]byte{[]byte(o.GetNamespace()), []byte(o.GetName())}, c.parts(o)...)
}

func put[T any, O object, L runtime.Object](ctx context.Context, s *Store, c *codec[T, O, L], v T, name string, mode Mode) (Entry[T], error) {
	want, err := c.encode(v, s.namespace)
	if err != nil {
		return Entry[T]{}, fmt.Errorf("encoding %s %q: %w", c.kind, name, err)
	}
	key, err := s.keys.Key(ctx, true)
	if err != nil {
		return Entry[T]{}, s.fail("writing", c.kind, name, err)
	}
	sign := func(o O) {
		a := o.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[c.digestKey] = key.Sign(c.domain, c.signed(o)...)
		o.SetAnnotations(a)
	}
	sign(want)
	cl := c.client(s.kube, s.namespace)
	got, err := write(ctx, cl, want, mode, c.assign)
	if err != nil {
		e := s.fail("writing", c.kind, name, err)
		switch {
		case apierrors.IsAlreadyExists(err):
			e.Err = ErrAlreadyExists
		case errors.Is(err, ErrNotDefinition):
			e.Reason = fmt.Sprintf("label %s=%s missing", managed.LabelComponent, c.component)
		}
		return Entry[T]{}, e
	}
	// The API server may have defaulted fields (a PodTemplate's pod spec):
	// sign what it stored, which is what later reads see.
	if !key.Verify(got.GetAnnotations()[c.digestKey], c.domain, c.signed(got)...) {
		sign(got)
		if got, err = cl.Update(ctx, got, metav1.UpdateOptions{FieldManager: managed.FieldManager}); err != nil {
			return Entry[T]{}, s.fail("writing", c.kind, name, err)
		}
	}
	return c.entry(ctx, s, got)
}

// write creates want, or with CreateOrUpdate replaces the content of the
// stored object of its name, which must be kubeplay's. The stored object
// keeps its identity and what others put on it (owners, finalizers).
func write[O object, L runtime.Object](ctx context.Context, cl client[O, L], want O, mode Mode, assign func(dst, src O)) (O, error) {
	opts := metav1.CreateOptions{FieldManager: managed.FieldManager}
	if mode == NewOnly {
		return cl.Create(ctx, want, opts)
	}
	existing, err := cl.Get(ctx, want.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return cl.Create(ctx, want, opts)
	}
	if err != nil {
		return existing, err
	}
	component := want.GetLabels()[managed.LabelComponent]
	if !managed.Owns(existing, managed.LabelComponent, component) {
		return existing, ErrNotDefinition
	}
	existing.SetLabels(want.GetLabels())
	existing.SetAnnotations(want.GetAnnotations())
	assign(existing, want)
	return cl.Update(ctx, existing, metav1.UpdateOptions{FieldManager: managed.FieldManager})
}

func remove[T any, O object, L runtime.Object](ctx context.Context, s *Store, c *codec[T, O, L], name string) error {
	cl := c.client(s.kube, s.namespace)
	o, err := cl.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return s.fail("reading", c.kind, name, err)
	}
	if !managed.Owns(o, managed.LabelComponent, c.component) {
		e := s.fail("deleting", c.kind, name, ErrNotDefinition)
		e.Reason = fmt.Sprintf("label %s=%s missing", managed.LabelComponent, c.component)
		return e
	}
	// The UID precondition deletes exactly the object checked above.
	if err := cl.Delete(ctx, name, managed.DeleteOptions(o.GetUID())); err != nil && !apierrors.IsNotFound(err) {
		return s.fail("deleting", c.kind, name, err)
	}
	return nil
}

// list returns the definitions of a kind; objects that carry the kind's
// labels but do not decode are skipped.
func list[T any, O object, L runtime.Object](ctx context.Context, s *Store, c *codec[T, O, L]) ([]Entry[T], error) {
	l, err := c.client(s.kube, s.namespace).List(ctx, metav1.ListOptions{
		LabelSelector: managed.Selector(managed.LabelComponent, c.component),
	})
	if err != nil {
		e := s.fail("listing", c.kind, "", err)
		e.Object = c.resource + "s in " + s.namespace
		return nil, e
	}
	var out []Entry[T]
	for _, o := range c.items(l) {
		if en, err := c.entry(ctx, s, o); err == nil {
			out = append(out, en)
		}
	}
	return out, nil
}

// trusted is e, or an *Error wrapping ErrTampered when e has drifted: what
// runs, warm pools and held nodes use must hold what kubeplay wrote.
func trusted[T any](s *Store, k Kind, name string, e Entry[T], err error) (Entry[T], error) {
	if err != nil || e.Drift == "" {
		return e, err
	}
	f := s.fail("reading", k, name, ErrTampered)
	f.Reason = e.Drift
	return Entry[T]{}, f
}

// digest is a SHA-256 over length-prefixed parts, so that no two lists of
// parts share one.
func digest(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:", len(p))
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))
}
