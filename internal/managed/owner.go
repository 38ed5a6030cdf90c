// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package managed

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Annotations that tie what a definition provisions to that definition.
const (
	// AnnotationOwnerID holds the owner id of the definition (a container
	// group or a credential) that made the object. Names and labels are
	// not unique across configurations: two catalogs may each hold a group
	// "deploy" on namespace "team-a-runs"; their ids differ.
	AnnotationOwnerID = "kubeplay.io/owner-id"
	// AnnotationOwner names that definition for people: its kind, name and
	// catalog namespace. Only the id is compared.
	AnnotationOwner = "kubeplay.io/owner"
	// AnnotationOwnerCatalog holds the UID of the owner's catalog
	// namespace: it tells the owner's catalog apart from a namespace of the
	// same name on another catalog cluster.
	AnnotationOwnerCatalog = "kubeplay.io/owner-catalog-uid"
)

// Owner is the definition an object belongs to.
type Owner struct {
	// ID is the definition's owner id; "" for a definition stored before
	// owner ids, which owns only objects that carry none.
	ID string
	// Kind is "container group" or "credential"; Name its name; Catalog
	// the catalog namespace that holds it.
	Kind, Name, Catalog string
	// CatalogUID is the UID of the catalog namespace; "" when unknown.
	CatalogUID string
}

var ownerIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// NewOwnerID returns a random owner id: 128 bits, in hex.
func NewOwnerID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("making an owner id: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// ValidOwnerID reports whether id is as NewOwnerID makes them.
func ValidOwnerID(id string) bool { return ownerIDPattern.MatchString(id) }

// Annotations are what o writes on the objects it provisions.
func (o Owner) Annotations() map[string]string {
	if o.ID == "" {
		return nil
	}
	a := map[string]string{AnnotationOwnerID: o.ID, AnnotationOwner: o.describe()}
	if o.CatalogUID != "" {
		a[AnnotationOwnerCatalog] = o.CatalogUID
	}
	return a
}

// OrphanOf is the owner id obj records when its owner was a definition of
// o's kind and name in o's own catalog (by the catalog namespace's UID);
// "" otherwise. A definition being created in that catalog, where no
// definition of that name exists any more, may take that id over: the
// objects are its predecessor's, as after the definition was deleted out
// of band.
func OrphanOf(obj metav1.Object, o Owner, kv ...string) string {
	id, who := OwnerOf(obj)
	uid := obj.GetAnnotations()[AnnotationOwnerCatalog]
	if !Owns(obj, kv...) || !ValidOwnerID(id) || o.CatalogUID == "" || uid != o.CatalogUID || who != o.describe() {
		return ""
	}
	return id
}

func (o Owner) describe() string {
	return fmt.Sprintf("%s %q of catalog namespace %q", o.Kind, o.Name, o.Catalog)
}

// String names o in messages.
func (o Owner) String() string {
	switch {
	case o.ID == "":
		return o.describe() + ", made before owner ids"
	case !ValidOwnerID(o.ID):
		return o.describe() // being created: its id comes at apply
	}
	return o.describe() + " (owner id " + o.ID + ")"
}

// OwnerOf is the owner an object records: its id, and whom
// AnnotationOwner names ("" when the object carries none).
func OwnerOf(obj metav1.Object) (id, who string) {
	a := obj.GetAnnotations()
	return a[AnnotationOwnerID], a[AnnotationOwner]
}

// Relation is how an object stands to an owner.
type Relation int

const (
	// Foreign: not kubeplay's by its labels kv, or another definition's
	// by its owner id.
	Foreign Relation = iota
	// Mine: kubeplay's labels kv and the owner's id.
	Mine
	// Legacy: kubeplay's labels kv and no owner id, from before owner
	// ids: the owner's only when it was made before them too, or when it
	// adopts it (once: adopting writes its id).
	Legacy
)

// RelationOf tells how obj stands to o, given the labels kv that kubeplay
// puts on such objects (as Owns).
func RelationOf(obj metav1.Object, o Owner, kv ...string) Relation {
	if !Owns(obj, kv...) {
		return Foreign
	}
	switch id, _ := OwnerOf(obj); id {
	case o.ID:
		return Mine
	case "":
		return Legacy
	}
	return Foreign
}

// OwnedByOtherError: an object that a definition would write or delete
// carries kubeplay's labels for its name but another definition's owner
// id, or none while the definition has one: it is another configuration's.
type OwnedByOtherError struct {
	Kind, Namespace, Name string
	// Owner is the owner that wanted it; OtherID and Other are the ids and
	// description the object records ("" for none).
	Owner          Owner
	OtherID, Other string
}

func (e *OwnedByOtherError) Error() string {
	ref := e.Name
	if e.Namespace != "" {
		ref = e.Namespace + "/" + e.Name
	}
	if e.OtherID == "" {
		return fmt.Sprintf("%s %s was made by kubeplay for a %s named %q before owner ids, and is not known to be %s's",
			e.Kind, ref, e.Owner.Kind, e.Owner.Name, e.Owner)
	}
	other := e.Other
	if other == "" {
		other = "another definition"
	}
	return fmt.Sprintf("%s %s belongs to %s (owner id %s), not to %s", e.Kind, ref, other, e.OtherID, e.Owner)
}

// OtherOwner returns the error that obj, not Mine, is not o's.
func OtherOwner(kind string, obj metav1.Object, o Owner) *OwnedByOtherError {
	id, who := OwnerOf(obj)
	return &OwnedByOtherError{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), Owner: o, OtherID: id, Other: who}
}

// DeleteMine deletes the object called name only when it is o's (Mine, by
// the labels kv and o's id), with a UID precondition from that read, as
// DeleteOwned. Another definition's object of that name is left alone.
func DeleteMine[T metav1.Object](ctx context.Context, c OwnedClient[T], name string, o Owner, kv ...string) (bool, error) {
	obj, err := c.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if RelationOf(obj, o, kv...) != Mine {
		return false, nil
	}
	err = c.Delete(ctx, name, DeleteOptions(obj.GetUID()))
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return false, nil
	}
	return err == nil, err
}
