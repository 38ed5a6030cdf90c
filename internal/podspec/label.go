// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package podspec

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

// Label types.
const (
	TypePod       = "pod"
	TypeNamespace = "namespace"
)

// PullPolicies are the image pull policies a label may set.
var PullPolicies = []string{string(corev1.PullIfNotPresent), string(corev1.PullAlways), string(corev1.PullNever)}

// EnvVar is one environment variable of a label.
type EnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Resources are the requests and limits a label or a pool's defaults set.
// CPU values are quantities ("500m", "2"); memory is in MiB and storage in MB,
// as in Nodepool.
type Resources struct {
	CPU            string            `json:"cpu,omitempty"`
	CPULimit       string            `json:"cpu_limit,omitempty"`
	Memory         *int64            `json:"memory,omitempty"`
	MemoryLimit    *int64            `json:"memory_limit,omitempty"`
	Storage        *int64            `json:"storage,omitempty"`
	StorageLimit   *int64            `json:"storage_limit,omitempty"`
	ExtraResources map[string]string `json:"extra_resources"`
}

// Label is a Nodepool label: how a run's pod looks. It is also the JSON
// kubeplay stores in the label's PodTemplate.
type Label struct {
	Name            string `json:"name"`
	Type            string `json:"type"`
	Image           string `json:"image,omitempty"`
	ImagePullPolicy string `json:"image_pull_policy,omitempty"`
	Resources
	GPU           string            `json:"gpu,omitempty"`
	GPUResource   string            `json:"gpu_resource,omitempty"`
	Env           []EnvVar          `json:"env"`
	NodeSelector  map[string]string `json:"node_selector"`
	SchedulerName string            `json:"scheduler_name,omitempty"`
	Privileged    *bool             `json:"privileged,omitempty"`
	Volumes       string            `json:"volumes,omitempty"`
	VolumeMounts  string            `json:"volume_mounts,omitempty"`
	Labels        map[string]string `json:"labels"`
	DynamicLabels map[string]string `json:"dynamic_labels"`
	Annotations   map[string]string `json:"annotations"`
	PythonPath    string            `json:"python_path,omitempty"`
	ShellType     string            `json:"shell_type,omitempty"`
	Spec          string            `json:"spec,omitempty"`
}

// SpecCompatible are the attributes a label with a verbatim spec may still
// set (Nodepool's rule).
var SpecCompatible = []string{"name", "type", "labels", "dynamic_labels", "annotations"}

// RenderLabel returns the label's pod template. Pool defaults fill what the
// label leaves unset; a missing limit falls back, as in Nodepool, to the
// label's limit, the pool's default limit, the label's request, then the
// pool's default request. A verbatim spec is used as is, without defaults.
func RenderLabel(l Label, pool Resources) (*corev1.PodTemplateSpec, error) {
	own := map[string]string{managed.LabelManagedBy: managed.ManagedByValue, managed.LabelNodeLabel: l.Name}
	if err := checkReserved(InputLabelLabels, l.Labels, own); err != nil {
		return nil, err
	}
	tpl := &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(own)}}
	maps.Copy(tpl.Labels, l.Labels)
	if len(l.Annotations) > 0 {
		tpl.Annotations = maps.Clone(l.Annotations)
	}
	if l.Spec != "" {
		spec, err := ParsePodSpec(l.Spec)
		if err != nil {
			return nil, fmt.Errorf("spec: %w", err)
		}
		tpl.Spec = *spec
		return tpl, nil
	}
	c := corev1.Container{Name: WorkerContainer, Image: l.Image, ImagePullPolicy: corev1.PullPolicy(l.ImagePullPolicy)}
	req, lim, err := l.resourceLists(pool)
	if err != nil {
		return nil, err
	}
	if len(req) > 0 || len(lim) > 0 {
		c.Resources = corev1.ResourceRequirements{Requests: req, Limits: lim}
	}
	for _, e := range l.Env {
		c.Env = append(c.Env, corev1.EnvVar{Name: e.Name, Value: e.Value})
	}
	if l.Privileged != nil {
		c.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(*l.Privileged)}
	}
	if l.VolumeMounts != "" {
		if err := ParseList(l.VolumeMounts, &c.VolumeMounts, "volume mounts"); err != nil {
			return nil, fmt.Errorf("volume_mounts: %w", err)
		}
	}
	// restartPolicy belongs under spec (Nodepool put it elsewhere).
	tpl.Spec = corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers:    []corev1.Container{c},
		NodeSelector:  maps.Clone(l.NodeSelector),
		SchedulerName: l.SchedulerName,
	}
	if l.Volumes != "" {
		if err := ParseList(l.Volumes, &tpl.Spec.Volumes, "volumes"); err != nil {
			return nil, fmt.Errorf("volumes: %w", err)
		}
	}
	return tpl, nil
}

func (l Label) resourceLists(pool Resources) (corev1.ResourceList, corev1.ResourceList, error) {
	req, lim := corev1.ResourceList{}, corev1.ResourceList{}
	first := func(vals ...string) string {
		for _, v := range vals {
			if v != "" {
				return v
			}
		}
		return ""
	}
	firstInt := func(vals ...*int64) *int64 {
		for _, v := range vals {
			if v != nil {
				return v
			}
		}
		return nil
	}
	set := func(list corev1.ResourceList, name corev1.ResourceName, q string) error {
		if q == "" {
			return nil
		}
		v, err := ParseQuantity(q)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		list[name] = v
		return nil
	}
	mib := func(v *int64) string {
		if v == nil {
			return ""
		}
		return fmt.Sprintf("%dMi", *v)
	}
	mb := func(v *int64) string {
		if v == nil {
			return ""
		}
		return fmt.Sprintf("%dM", *v)
	}
	errs := []error{
		set(req, corev1.ResourceCPU, first(l.CPU, pool.CPU)),
		set(lim, corev1.ResourceCPU, first(l.CPULimit, pool.CPULimit, l.CPU, pool.CPU)),
		set(req, corev1.ResourceMemory, mib(firstInt(l.Memory, pool.Memory))),
		set(lim, corev1.ResourceMemory, mib(firstInt(l.MemoryLimit, pool.MemoryLimit, l.Memory, pool.Memory))),
		set(req, corev1.ResourceEphemeralStorage, mb(firstInt(l.Storage, pool.Storage))),
		set(lim, corev1.ResourceEphemeralStorage, mb(firstInt(l.StorageLimit, pool.StorageLimit, l.Storage, pool.Storage))),
	}
	extra := l.ExtraResources
	if extra == nil {
		extra = pool.ExtraResources
	}
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		errs = append(errs, set(req, corev1.ResourceName(k), extra[k]), set(lim, corev1.ResourceName(k), extra[k]))
	}
	if l.GPU != "" {
		if l.GPUResource == "" {
			return nil, nil, fmt.Errorf("gpu is set without gpu_resource")
		}
		// Kubernetes schedules GPUs only with request = limit.
		errs = append(errs, set(req, corev1.ResourceName(l.GPUResource), l.GPU), set(lim, corev1.ResourceName(l.GPUResource), l.GPU))
	}
	for _, err := range errs {
		if err != nil {
			return nil, nil, err
		}
	}
	return req, lim, nil
}

// ParseQuantity parses a non-negative Kubernetes quantity.
func ParseQuantity(s string) (resource.Quantity, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return q, fmt.Errorf("%q is not a Kubernetes quantity (examples: 500m, 2, 1.5, 512Mi, 1G)", s)
	}
	if q.Sign() < 0 {
		return q, fmt.Errorf("%q is negative", s)
	}
	return q, nil
}

// Placeholders are the run values a dynamic label may use.
var Placeholders = []string{"run.id", "run.name", "run.group", "run.label"}

// ErrWorkspacePlaceholder: a template uses {run.workspace}, which earlier
// versions filled from TF_WORKSPACE only. A run cannot know its workspace,
// so the placeholder is gone; the workspace is passed as a plain label.
var ErrWorkspacePlaceholder = errors.New("{run.workspace} is no longer a placeholder: a run cannot tell its workspace")

var placeholder = regexp.MustCompile(`\{\{|\}\}|\{([^{}]*)\}|[{}]`)

// Expand replaces {run.id}-style placeholders with values; "{{" and "}}"
// stand for literal braces. It fails on an unknown placeholder or a lone
// brace.
func Expand(tmpl string, values map[string]string) (string, error) {
	var bad error
	out := placeholder.ReplaceAllStringFunc(tmpl, func(m string) string {
		switch m {
		case "{{":
			return "{"
		case "}}":
			return "}"
		case "{", "}":
			if bad == nil {
				bad = fmt.Errorf("%q has an unmatched %q; write %s%s for a literal brace", tmpl, m, m, m)
			}
			return m
		}
		key := strings.TrimSpace(m[1 : len(m)-1])
		if key == "run.workspace" {
			if bad == nil {
				bad = fmt.Errorf("%q uses %w", tmpl, ErrWorkspacePlaceholder)
			}
			return m
		}
		if !slices.Contains(Placeholders, key) {
			if bad == nil {
				bad = fmt.Errorf("%q uses unknown placeholder {%s}; known placeholders are {%s}", tmpl, key,
					strings.Join(Placeholders, "}, {"))
			}
			return m
		}
		return values[key]
	})
	return out, bad
}

// ValidateTemplate checks a dynamic label template at plan time.
func ValidateTemplate(tmpl string) error {
	_, err := Expand(tmpl, nil)
	return err
}

// NamespaceAccount is the ServiceAccount, Role and RoleBinding of a
// namespace label's namespace.
const NamespaceAccount = "kubeplay"

// NamespaceObjects are what a namespace label gives a run: a fresh
// namespace with a ServiceAccount whose Role lets it manage common workloads
// there. Every rule names a real API group; logs are "pods/log".
//
// The Role grants what deploying and testing workloads needs, and nothing
// that outlives the token or leaves the group's Pod Security level: no
// Secrets create, update or patch (a Secret of type
// kubernetes.io/service-account-token would mint a token that never
// expires), no ServiceAccounts writes and no serviceaccounts/token (more
// accounts, more tokens), no Roles or RoleBindings (escalation), and no
// pods/ephemeralcontainers. Pods, and the workloads that make them, are
// held to the group's level by the namespace's Pod Security labels.
func NamespaceObjects(namespace, labelName string) (*corev1.Namespace, *corev1.ServiceAccount, *rbacv1.Role, *rbacv1.RoleBinding) {
	labels := map[string]string{managed.LabelManagedBy: managed.ManagedByValue, managed.LabelNodeLabel: labelName}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: maps.Clone(labels)}
	}
	all := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	read := []string{"get", "list", "watch"}
	ns := &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: maps.Clone(labels)}}
	// Pods that name the account get no token of it unless they ask.
	sa := &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: meta(NamespaceAccount),
		AutomountServiceAccountToken: ptr.To(false)}
	role := &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: meta(NamespaceAccount),
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods", "services", "configmaps",
				"persistentvolumeclaims", "endpoints", "events"}, Verbs: all},
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: read},
			{APIGroups: []string{""}, Resources: []string{"pods/exec", "pods/portforward"}, Verbs: []string{"create", "get"}},
			{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: read},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments", "statefulsets", "daemonsets", "replicasets"}, Verbs: all},
			{APIGroups: []string{"batch"}, Resources: []string{"jobs", "cronjobs"}, Verbs: all},
			{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses", "networkpolicies"}, Verbs: all},
		},
	}
	rb := &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: meta(NamespaceAccount),
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: namespace}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
	}
	return ns, sa, role, rb
}

// Compose returns a run's pod: the group's rendered pod with the label
// merged over it by strategic merge patch (the label's settings go to the
// worker container), pool defaults filling what the label leaves unset, and
// dynamic labels expanded with the run's values. A label with a verbatim
// spec replaces the pod's spec, keeping the group's metadata. A namespace
// label leaves the pod as the group renders it. Like RenderGroup, the pod
// has non-nil Labels and Annotations with kubeplay's labels and at least one
// container; a label or dynamic label that changes kubeplay's labels gives a
// *ReservedLabelError.
func Compose(group *corev1.Pod, l Label, pool Resources, run map[string]string) (*corev1.Pod, error) {
	if group == nil {
		return nil, errors.New("no group pod to compose the label with")
	}
	pod := group.DeepCopy()
	own := map[string]string{managed.LabelManagedBy: managed.ManagedByValue}
	if v, ok := group.Labels[managed.LabelContainerGroup]; ok {
		own[managed.LabelContainerGroup] = v
	}
	if l.Type != TypeNamespace {
		own[managed.LabelNodeLabel] = l.Name
		if err := l.composeInto(pod, pool, run, own); err != nil {
			return nil, err
		}
	}
	if len(pod.Spec.Containers) == 0 {
		return nil, fmt.Errorf("the group's pod has no container: %w", ErrNoContainers)
	}
	stamp(pod, pod.Namespace, own)
	return pod, nil
}

func (l Label) composeInto(pod *corev1.Pod, pool Resources, run, own map[string]string) error {
	if err := checkReserved(InputLabelLabels, l.Labels, own); err != nil {
		return err
	}
	tpl, err := RenderLabel(l, pool)
	if err != nil {
		return err
	}
	dynamic := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(l.DynamicLabels)) {
		v, err := Expand(l.DynamicLabels[k], run)
		if err != nil {
			return fmt.Errorf("dynamic label %s: %w", k, err)
		}
		dynamic[k] = v
	}
	if err := checkReserved(InputDynamicLabels, dynamic, own); err != nil {
		return err
	}
	maps.Copy(tpl.Labels, dynamic)
	if l.Spec != "" {
		pod.Spec = tpl.Spec
	} else {
		patch, err := json.Marshal(&corev1.Pod{Spec: tpl.Spec})
		if err != nil {
			return err
		}
		merged, err := Merge(pod, patch)
		if err != nil {
			return err
		}
		*pod = *merged
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	maps.Copy(pod.Labels, tpl.Labels)
	if len(tpl.Annotations) > 0 && pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	maps.Copy(pod.Annotations, tpl.Annotations)
	return nil
}
