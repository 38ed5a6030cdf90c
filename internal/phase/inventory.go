// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package phase

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

// The ApplySet convention (KEP-3659), which `kubectl apply --prune
// --applyset` understands.
const (
	LabelApplySetID       = "applyset.kubernetes.io/id"
	LabelPartOf           = "applyset.kubernetes.io/part-of"
	AnnotationTooling     = "applyset.kubernetes.io/tooling"
	AnnotationGroupKinds  = "applyset.kubernetes.io/contains-group-kinds"
	AnnotationNamespaces  = "applyset.kubernetes.io/additional-namespaces"
	inventoryObjectsKey   = "objects"
	inventoryNamePrefix   = "kubeplay-phase-"
	toolingValue          = "kubeplay/v1"
	inventoryFieldManager = "kubeplay-inventory"
)

// InventoryName is the name of a phase's inventory ConfigMap.
func InventoryName(phase string) string { return inventoryNamePrefix + phase }

// ApplySetID is the id kubectl derives from an ApplySet parent ConfigMap:
// applyset-<base64url(sha256(name.namespace.ConfigMap.))>-v1.
func ApplySetID(name, namespace string) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{name, namespace, "ConfigMap", ""}, ".")))
	return "applyset-" + base64.RawURLEncoding.EncodeToString(sum[:]) + "-v1"
}

// Inventory is a phase's ApplySet parent: a ConfigMap that carries the
// ApplySet id, the group-kinds and namespaces of its members, and the exact
// member list, so prune and destroy never have to discover by label.
type Inventory struct {
	kube      kubernetes.Interface
	Phase     string
	Namespace string
	Name      string
	ID        string
}

// NewInventory returns the inventory of phase, kept in namespace.
func NewInventory(kube kubernetes.Interface, phase, namespace string) *Inventory {
	name := InventoryName(phase)
	return &Inventory{kube: kube, Phase: phase, Namespace: namespace, Name: name, ID: ApplySetID(name, namespace)}
}

// Load returns the recorded members; found is false when there is no
// inventory ConfigMap.
func (i *Inventory) Load(ctx context.Context) (refs []Ref, found bool, err error) {
	cm, err := i.kube.CoreV1().ConfigMaps(i.Namespace).Get(ctx, i.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading inventory ConfigMap %s/%s: %w", i.Namespace, i.Name, err)
	}
	if got := cm.Labels[LabelApplySetID]; got != i.ID {
		return nil, true, fmt.Errorf("ConfigMap %s/%s is not phase %q's inventory (its %s label is %q)", i.Namespace, i.Name, i.Phase, LabelApplySetID, got)
	}
	if s := cm.Data[inventoryObjectsKey]; s != "" {
		if err := json.Unmarshal([]byte(s), &refs); err != nil {
			return nil, true, fmt.Errorf("inventory ConfigMap %s/%s: invalid %s: %w", i.Namespace, i.Name, inventoryObjectsKey, err)
		}
	}
	return refs, true, nil
}

// Store records refs as the members, creating the namespace and ConfigMap
// when missing. It is a server-side apply, so it is idempotent.
func (i *Inventory) Store(ctx context.Context, refs []Ref) error {
	refs = append([]Ref(nil), refs...)
	sortRefs(refs)
	b, err := json.Marshal(refs)
	if err != nil {
		return err
	}
	gks, nss := map[string]bool{}, map[string]bool{}
	for _, r := range refs {
		gks[r.GroupKind.String()] = true
		if r.Namespace != "" && r.Namespace != i.Namespace {
			nss[r.Namespace] = true
		}
	}
	cm := applycorev1.ConfigMap(i.Name, i.Namespace).
		WithLabels(map[string]string{LabelApplySetID: i.ID, managed.LabelPhase: i.Phase, managed.LabelManagedBy: managed.ManagedByValue}).
		WithAnnotations(map[string]string{
			AnnotationTooling:    toolingValue,
			AnnotationGroupKinds: joinSorted(gks),
			AnnotationNamespaces: joinSorted(nss),
		}).
		WithData(map[string]string{inventoryObjectsKey: string(b)})
	opts := metav1.ApplyOptions{FieldManager: inventoryFieldManager, Force: true}
	// Server-side applies, idempotent: sent again after a transient failure.
	applyCM := func() error {
		return kubeclient.RetryIdempotent(ctx, func() error {
			_, err := i.kube.CoreV1().ConfigMaps(i.Namespace).Apply(ctx, cm, opts)
			return err
		})
	}
	err = applyCM()
	if apierrors.IsNotFound(err) {
		ns := applycorev1.Namespace(i.Namespace).WithLabels(map[string]string{managed.LabelManagedBy: managed.ManagedByValue})
		if err = kubeclient.RetryIdempotent(ctx, func() error {
			_, err := i.kube.CoreV1().Namespaces().Apply(ctx, ns, opts)
			return err
		}); err != nil {
			return fmt.Errorf("creating inventory namespace %s: %w", i.Namespace, err)
		}
		err = applyCM()
	}
	if err != nil {
		return fmt.Errorf("writing inventory ConfigMap %s/%s: %w", i.Namespace, i.Name, err)
	}
	return nil
}

// Delete removes the inventory ConfigMap.
func (i *Inventory) Delete(ctx context.Context) error {
	err := i.kube.CoreV1().ConfigMaps(i.Namespace).Delete(ctx, i.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting inventory ConfigMap %s/%s: %w", i.Namespace, i.Name, err)
	}
	return nil
}

// PhaseOf names the kubeplay phase whose inventory has ApplySet id, or
// returns "" when no inventory in namespace has it.
func PhaseOf(ctx context.Context, kube kubernetes.Interface, namespace, id string) string {
	l, err := kube.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelApplySetID + "=" + id})
	if err != nil || len(l.Items) == 0 {
		return ""
	}
	return l.Items[0].Labels[managed.LabelPhase]
}

func joinSorted(m map[string]bool) string {
	s := make([]string, 0, len(m))
	for k := range m {
		s = append(s, k)
	}
	sort.Strings(s)
	return strings.Join(s, ",")
}

// Phases names the phases whose inventories are in namespace. A ConfigMap
// that only looks like one (its ApplySet id is not its own) is left out.
func Phases(ctx context.Context, kube kubernetes.Interface, namespace string) ([]string, error) {
	list, err := kube.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{LabelSelector: managed.Selector(managed.LabelPhase, "")})
	if err != nil {
		return nil, fmt.Errorf("listing phase inventories in %s: %w", namespace, err)
	}
	var names []string
	for _, cm := range list.Items {
		p := cm.Labels[managed.LabelPhase]
		if cm.Name == InventoryName(p) && cm.Labels[LabelApplySetID] == ApplySetID(cm.Name, namespace) {
			names = append(names, p)
		}
	}
	sort.Strings(names)
	return names, nil
}
