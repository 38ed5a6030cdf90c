// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/capacity"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
)

// Keys of a container group's ConfigMap.
const (
	GroupSpecKey = "group.json"
	GroupPodKey  = "pod.yaml"
)

// Group is a container group as its ConfigMap stores it (GroupSpecKey), and
// what runs read.
type Group struct {
	Name              string            `json:"name"`
	Credential        string            `json:"credential,omitempty"`
	Namespace         string            `json:"namespace"`
	ManageNamespace   bool              `json:"manage_namespace"`
	Image             string            `json:"image"`
	PodSpecOverride   string            `json:"pod_spec_override,omitempty"`
	MaxConcurrentRuns *int64            `json:"max_concurrent_runs,omitempty"`
	MaxCores          string            `json:"max_cores,omitempty"`
	MaxRAM            *int64            `json:"max_ram,omitempty"`
	MaxResources      map[string]string `json:"max_resources"`
	MaxForks          *int64            `json:"max_forks,omitempty"`
	DefaultLabel      podspec.Resources `json:"default_label"`
	PodPendingTimeout string            `json:"pod_pending_timeout"`
	// DisconnectGracePeriod is how long a run goes on in its pod without
	// hearing from the provider; "" (groups stored before it) is the
	// default, bundle.DefaultLeaseGrace.
	DisconnectGracePeriod string            `json:"disconnect_grace_period,omitempty"`
	LaunchRetries         int64             `json:"launch_retries"`
	Priority              *int64            `json:"priority,omitempty"`
	Labels                map[string]string `json:"labels"`
	Annotations           map[string]string `json:"annotations"`
	// PodSecurityLevel is the Pod Security Standard level of the group's
	// run pods; "" (groups stored before it existed) is podsecurity.Default.
	PodSecurityLevel string `json:"pod_security_level,omitempty"`
	// WarmPods is how many warm pods the group keeps of its own pod, and
	// WarmLabels how many of each node label's (Nodepool's min-ready).
	WarmPods   int64            `json:"warm_pods,omitempty"`
	WarmLabels map[string]int64 `json:"warm_labels,omitempty"`
	// OwnerID is the definition's owner id (managed.NewOwnerID), written
	// on everything the group provisions; "" for a group stored before
	// owner ids.
	OwnerID string `json:"owner_id,omitempty"`
	// DefaultPlanCheck is the plan_check of the group's runs that set none:
	// off, changes or drift; "" (groups stored before it existed) is off.
	DefaultPlanCheck string `json:"default_plan_check,omitempty"`
}

// Warm maps a node label ("" for the group's own pod) to its warm pods.
func (g Group) Warm() map[string]int64 {
	m := map[string]int64{}
	if g.WarmPods > 0 {
		m[""] = g.WarmPods
	}
	for k, v := range g.WarmLabels {
		if v > 0 {
			m[k] = v
		}
	}
	return m
}

// WarmTotal is the number of warm pods the group keeps.
func (g Group) WarmTotal() int64 {
	var n int64
	for _, v := range g.Warm() {
		n += v
	}
	return n
}

// Limits are the group's capacity limits.
func (g Group) Limits() capacity.Limits {
	return capacity.Limits{MaxConcurrentRuns: g.MaxConcurrentRuns, WarmPods: g.WarmTotal(), MaxCores: g.MaxCores, MaxRAM: g.MaxRAM, MaxResources: g.MaxResources}
}

// PodGroup is what the group contributes to its run pods.
func (g Group) PodGroup() podspec.Group {
	return podspec.Group{Name: g.Name, Namespace: g.Namespace, Image: g.Image, Labels: g.Labels,
		Annotations: g.Annotations, Override: g.PodSpecOverride}
}

// RenderPod renders the group's default run pod as YAML.
func (g Group) RenderPod() (string, error) {
	pod, err := podspec.RenderGroup(g.PodGroup())
	if err != nil {
		return "", err
	}
	return podspec.ToYAML(pod)
}

var groups = &codec[Group, *corev1.ConfigMap, *corev1.ConfigMapList]{
	kind:      KindGroup,
	resource:  "ConfigMap",
	component: managed.ComponentContainerGroup,
	client: func(kube kubernetes.Interface, ns string) client[*corev1.ConfigMap, *corev1.ConfigMapList] {
		return kube.CoreV1().ConfigMaps(ns)
	},
	items:     func(l *corev1.ConfigMapList) []*corev1.ConfigMap { return pointers(l.Items) },
	encode:    encodeGroup,
	decode:    decodeGroup,
	digestKey: AnnotationDigest,
	domain:    domainGroup,
	parts:     configMapParts,
	digest:    configMapDigest,
	assign:    func(dst, src *corev1.ConfigMap) { dst.Data, dst.BinaryData = src.Data, nil },
}

func encodeGroup(g Group, ns string) (*corev1.ConfigMap, error) {
	rendered, err := g.RenderPod()
	if err != nil {
		return nil, err
	}
	body, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		return nil, err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:      g.Name,
			Namespace: ns,
			Labels: managed.Labels(managed.LabelComponent, managed.ComponentContainerGroup,
				managed.LabelContainerGroup, g.Name),
		},
		Data: map[string]string{GroupSpecKey: string(body), GroupPodKey: rendered},
	}
	return cm, nil
}

func decodeGroup(cm *corev1.ConfigMap) (Group, string, error) {
	var g Group
	if err := json.Unmarshal([]byte(cm.Data[GroupSpecKey]), &g); err != nil || g.Name == "" {
		return Group{}, "", fmt.Errorf("its %s is missing or invalid", GroupSpecKey)
	}
	if g.Name != cm.Name {
		return Group{}, "", fmt.Errorf("its %s names group %q", GroupSpecKey, g.Name)
	}
	return g, cm.Data[GroupPodKey], nil
}

// configMapParts are what a group's signature covers: all of its data.
func configMapParts(cm *corev1.ConfigMap) [][]byte {
	keys := slices.Sorted(maps.Keys(cm.Data))
	parts := make([][]byte, 0, 2*len(keys))
	for _, k := range keys {
		parts = append(parts, []byte(k), []byte(cm.Data[k]))
	}
	return parts
}

func configMapDigest(cm *corev1.ConfigMap) string { return digest(configMapParts(cm)...) }

// GetGroup reads the container group called name; Rendered is its default
// run pod.
func (s *Store) GetGroup(ctx context.Context, name string) (Entry[Group], error) {
	return get(ctx, s, groups, name)
}

// TrustedGroup reads the container group called name for what runs or
// starts pods of it: one whose ConfigMap was changed outside kubeplay is
// refused with an *Error that wraps ErrTampered, since whoever changed it
// chooses the pod that receives the run's secrets. Writing the group again
// from its definition repairs it.
func (s *Store) TrustedGroup(ctx context.Context, name string) (Entry[Group], error) {
	e, err := s.GetGroup(ctx, name)
	return trusted(s, KindGroup, name, e, err)
}

// PutGroup stores g with its rendered default run pod.
func (s *Store) PutGroup(ctx context.Context, g Group, mode Mode) (Entry[Group], error) {
	return put(ctx, s, groups, g, g.Name, mode)
}

// DeleteGroup deletes the container group called name, as DeleteCredential.
func (s *Store) DeleteGroup(ctx context.Context, name string) error {
	return remove(ctx, s, groups, name)
}

// ListGroups returns every container group.
func (s *Store) ListGroups(ctx context.Context) ([]Entry[Group], error) {
	return list(ctx, s, groups)
}
