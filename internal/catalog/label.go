// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
)

// Annotations of a node label's PodTemplate: the label itself
// (AnnotationLabelSpec) and, for people and tools, its non-pod attributes.
const (
	AnnotationLabelSpec     = "kubeplay.io/label-spec"
	AnnotationLabelType     = "kubeplay.io/label-type"
	AnnotationPythonPath    = "kubeplay.io/python-path"
	AnnotationShellType     = "kubeplay.io/shell-type"
	AnnotationDynamicLabels = "kubeplay.io/dynamic-labels"
)

// namespacePlaceholderImage fills the container a PodTemplate must have
// for a namespace label, which has no pod.
const namespacePlaceholderImage = "kubeplay.invalid/namespace-label"

// GroupImagePlaceholder fills the image a PodTemplate must have for a pod
// label that sets none: runs take their container group's image. Runs
// render the label from its spec annotation, never from this template.
const GroupImagePlaceholder = "kubeplay.invalid/container-group-image"

var labels = &codec[podspec.Label, *corev1.PodTemplate, *corev1.PodTemplateList]{
	kind:      KindLabel,
	resource:  "PodTemplate",
	component: managed.ComponentNodeLabel,
	client: func(kube kubernetes.Interface, ns string) client[*corev1.PodTemplate, *corev1.PodTemplateList] {
		return kube.CoreV1().PodTemplates(ns)
	},
	items: func(l *corev1.PodTemplateList) []*corev1.PodTemplate { return pointers(l.Items) },
	encode: func(l podspec.Label, ns string) (*corev1.PodTemplate, error) {
		pt, _, err := labelTemplate(l, ns)
		return pt, err
	},
	decode:    decodeLabel,
	digestKey: AnnotationDigest,
	domain:    domainLabel,
	parts:     podTemplateParts,
	digest:    podTemplateDigest,
	assign:    func(dst, src *corev1.PodTemplate) { dst.Template = src.Template },
}

// RenderLabel renders the YAML kubeplay shows for a label: its pod
// template, or for a namespace label the namespace's objects.
func RenderLabel(l podspec.Label) (string, error) {
	_, y, err := labelTemplate(l, "")
	return y, err
}

// labelTemplate returns the PodTemplate that stores l and the YAML to show.
func labelTemplate(l podspec.Label, ns string) (*corev1.PodTemplate, string, error) {
	spec, err := json.Marshal(l)
	if err != nil {
		return nil, "", err
	}
	pt := &corev1.PodTemplate{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodTemplate"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      l.Name,
			Namespace: ns,
			Labels: managed.Labels(managed.LabelComponent, managed.ComponentNodeLabel,
				managed.LabelNodeLabel, l.Name),
			Annotations: map[string]string{AnnotationLabelType: l.Type, AnnotationLabelSpec: string(spec)},
		},
	}
	if l.PythonPath != "" {
		pt.Annotations[AnnotationPythonPath] = l.PythonPath
	}
	if l.ShellType != "" {
		pt.Annotations[AnnotationShellType] = l.ShellType
	}
	if l.DynamicLabels != nil {
		dl, _ := json.Marshal(l.DynamicLabels)
		pt.Annotations[AnnotationDynamicLabels] = string(dl)
	}
	var rendered string
	if l.Type == podspec.TypeNamespace {
		rendered, err = namespaceLabel(l, pt)
	} else {
		rendered, err = podLabel(l, pt)
	}
	if err != nil {
		return nil, "", err
	}
	return pt, rendered, nil
}

func podLabel(l podspec.Label, pt *corev1.PodTemplate) (string, error) {
	tpl, err := podspec.RenderLabel(l, podspec.Resources{})
	if err != nil {
		return "", err
	}
	rendered, err := podspec.ToYAML(tpl)
	if err != nil {
		return "", err
	}
	pt.Template = *tpl.DeepCopy()
	for i, c := range pt.Template.Spec.Containers {
		if c.Image == "" {
			// The API server refuses a PodTemplate container without an image.
			pt.Template.Spec.Containers[i].Image = GroupImagePlaceholder
		}
	}
	return rendered, nil
}

func namespaceLabel(l podspec.Label, pt *corev1.PodTemplate) (string, error) {
	pt.Template = corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{managed.LabelNodeLabel: l.Name}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "namespace", Image: namespacePlaceholderImage}},
			RestartPolicy: corev1.RestartPolicyNever},
	}
	ns, sa, role, rb := podspec.NamespaceObjects(l.Name+"-{run.id}", l.Name)
	ns.Labels = maps.Clone(ns.Labels)
	maps.Copy(ns.Labels, l.Labels)
	ns.Annotations = l.Annotations
	docs := make([]string, 0, 4)
	for _, o := range []any{ns, sa, role, rb} {
		y, err := podspec.ToYAML(o)
		if err != nil {
			return "", err
		}
		docs = append(docs, y)
	}
	return strings.Join(docs, "---\n"), nil
}

func decodeLabel(pt *corev1.PodTemplate) (podspec.Label, string, error) {
	var l podspec.Label
	if err := json.Unmarshal([]byte(pt.Annotations[AnnotationLabelSpec]), &l); err != nil || l.Name == "" {
		return podspec.Label{}, "", fmt.Errorf("its %s annotation is missing or invalid", AnnotationLabelSpec)
	}
	if l.Name != pt.Name {
		return podspec.Label{}, "", fmt.Errorf("its %s annotation names label %q", AnnotationLabelSpec, l.Name)
	}
	// Runs render the label, not the stored template: show the same.
	_, rendered, err := labelTemplate(l, pt.Namespace)
	if err != nil {
		return podspec.Label{}, "", fmt.Errorf("it holds an invalid node label: %w", err)
	}
	return l, rendered, nil
}

// podTemplateParts are what a label's signature covers: the template and
// kubeplay's annotations but the signature itself, which is what runs and
// people read of a label.
func podTemplateParts(pt *corev1.PodTemplate) [][]byte {
	tpl, _ := json.Marshal(pt.Template)
	parts := [][]byte{tpl}
	for _, k := range slices.Sorted(maps.Keys(pt.Annotations)) {
		if strings.HasPrefix(k, "kubeplay.io/") && k != AnnotationDigest {
			parts = append(parts, []byte(k), []byte(pt.Annotations[k]))
		}
	}
	return parts
}

func podTemplateDigest(pt *corev1.PodTemplate) string { return digest(podTemplateParts(pt)...) }

// GetLabel reads the node label called name; Rendered is as RenderLabel.
func (s *Store) GetLabel(ctx context.Context, name string) (Entry[podspec.Label], error) {
	return get(ctx, s, labels, name)
}

// TrustedLabel reads the node label called name for what runs or starts
// pods of it, refusing one changed outside kubeplay as TrustedGroup does.
func (s *Store) TrustedLabel(ctx context.Context, name string) (Entry[podspec.Label], error) {
	e, err := s.GetLabel(ctx, name)
	return trusted(s, KindLabel, name, e, err)
}

// PutLabel stores l.
func (s *Store) PutLabel(ctx context.Context, l podspec.Label, mode Mode) (Entry[podspec.Label], error) {
	return put(ctx, s, labels, l, l.Name, mode)
}

// DeleteLabel deletes the node label called name, as DeleteCredential.
func (s *Store) DeleteLabel(ctx context.Context, name string) error {
	return remove(ctx, s, labels, name)
}

// ListLabels returns every node label.
func (s *Store) ListLabels(ctx context.Context) ([]Entry[podspec.Label], error) {
	return list(ctx, s, labels)
}
