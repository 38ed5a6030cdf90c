// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

// Package podspec renders the pods kubeplay runs: a container group's default
// run pod with its override merged in, and node label pod templates.
package podspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
	yamlv3 "sigs.k8s.io/yaml/goyaml.v3"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

const (
	// WorkerContainer is the container a run execs into.
	WorkerContainer = "worker"
	// DefaultImage is AWX's default execution environment.
	DefaultImage = "quay.io/ansible/awx-ee:latest"
)

// WorkerArgs keep the worker alive for the run to exec into. As PID 1 a
// plain "sleep infinity" ignores SIGTERM, which doubles the time a deleted
// run pod holds its quota (4 s against 2 s with a 1 s grace period here).
//
// The worker ends the pod by itself (exit 0 on SIGTERM: the pod turns
// Succeeded and leaves the quota) when its provider is gone: it writes its
// pid to bundle.WorkerPIDFile, which the run's watchdog signals when the
// run has heard no beat from its provider for the group's grace; and when
// no run has started after WorkerStartTimeout (no bundle.RunDirPrefix
// directory: the provider died between creating the pod and the exec), it
// exits.
//
// No "$$": the kubelet would expand it to "$" (see $(VAR) references).
var WorkerArgs = []string{"sh", "-c", workerPrelude +
	"sleep " + strconv.Itoa(int(WorkerStartTimeout/time.Second)) + " & wait; " +
	"set -- /tmp/kubeplay.*; [ -e \"$1\" ] || { echo 'kubeplay: no run started in this pod in time; ending it' >&2; exit 0; }; " +
	"sleep infinity & wait"}

// workerPrelude records the worker's pid and ends it on SIGTERM.
const workerPrelude = "sh -c 'echo $PPID' >/tmp/kubeplay-worker.pid; trap 'exit 0' TERM; "

// WarmWorkerArgs keep the worker of a pod started ahead of its runs (a
// warm pod, a held node) alive without WorkerArgs' start timeout.
var WarmWorkerArgs = []string{"sh", "-c", workerPrelude + "sleep infinity & wait"}

// WaitForRuns gives pod's first container WarmWorkerArgs when it has the
// default WorkerArgs; a user's own command is left alone.
func WaitForRuns(pod *corev1.Pod) {
	if c := &pod.Spec.Containers[0]; slices.Equal(c.Args, WorkerArgs) {
		c.Args = WarmWorkerArgs
	}
}

// WorkerStartTimeout bounds the wait of a worker for its run: the runner
// execs as soon as it sees the container run, a second or two later, so
// this only ends pods whose provider died before the exec, within a minute
// of their start as a killed run's pod ends. It is fixed rather than the
// group's pending timeout, which may be long and which the pod does not know.
const WorkerStartTimeout = 45 * time.Second

// Group is what a container group contributes to its run pods.
type Group struct {
	Name        string
	Namespace   string
	Image       string
	Labels      map[string]string
	Annotations map[string]string
	// Override is pod_spec_override, YAML or JSON; empty for none.
	Override string
}

// TmpVolume is the run pod's emptyDir at /tmp, where every run unpacks its
// bundle and the worker keeps its pid: a pod whose root file system is
// read-only (readOnlyRootFilesystem, as restricted platforms require) still
// runs. An override that mounts its own volume at /tmp replaces the mount
// (volume mounts merge by mountPath).
const TmpVolume = "kubeplay-tmp"

// DefaultPod is the run pod before any override: one container, "worker",
// kept alive by WorkerArgs (as args, so that an image's entrypoint still
// runs, as with AWX's execution environments) for the run to exec into,
// with an emptyDir at /tmp (TmpVolume).
func DefaultPod(namespace, image string) *corev1.Pod {
	if image == "" {
		image = DefaultImage
	}
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Labels:    map[string]string{managed.LabelManagedBy: managed.ManagedByValue},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{
				Name:            WorkerContainer,
				Image:           image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Args:            WorkerArgs,
				VolumeMounts:    []corev1.VolumeMount{{Name: TmpVolume, MountPath: "/tmp"}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse("250m"),
					corev1.ResourceMemory: resource.MustParse("100Mi"),
				}},
			}},
			Volumes: []corev1.Volume{tmpVolume()},
		},
	}
}

// RenderGroup returns the group's default run pod: DefaultPod with the
// group's image, labels and annotations, then its override merged in by
// strategic merge patch. Containers merge by name and "worker" stays first.
//
// Whatever the override does (null or "$patch: replace" metadata, labels or
// containers), the pod keeps the group's namespace, non-nil Labels and
// Annotations with kubeplay's own labels, and at least one container: an
// override that removes every container gives an error wrapping
// ErrNoContainers, and one that changes kubeplay's labels a
// *ReservedLabelError.
func RenderGroup(g Group) (*corev1.Pod, error) {
	own := map[string]string{managed.LabelManagedBy: managed.ManagedByValue}
	if g.Name != "" {
		own[managed.LabelContainerGroup] = g.Name
	}
	if err := checkReserved(InputGroupLabels, g.Labels, own); err != nil {
		return nil, err
	}
	pod := DefaultPod(g.Namespace, g.Image)
	maps.Copy(pod.Labels, g.Labels)
	maps.Copy(pod.Labels, own)
	pod.Annotations = maps.Clone(g.Annotations)
	doc, err := ParseOverride(g.Override)
	if err != nil {
		return nil, err
	}
	if doc != nil {
		if doc.Namespace != "" && doc.Namespace != g.Namespace {
			return nil, &NamespaceConflictError{Override: doc.Namespace, Group: g.Namespace}
		}
		if pod, err = Merge(pod, doc.Patch); err != nil {
			return nil, err
		}
		if err := checkReserved(InputOverride, pod.Labels, own); err != nil {
			return nil, err
		}
	}
	if len(pod.Spec.Containers) == 0 {
		return nil, fmt.Errorf("the override removes every container (spec.containers): %w", ErrNoContainers)
	}
	keepTmpVolume(pod)
	stamp(pod, g.Namespace, own)
	return pod, nil
}

// keepTmpVolume puts back TmpVolume when a container still mounts it but an
// override replaced the pod's volumes ("$patch: replace"): the API server
// would refuse the pod for a mount of no volume.
func keepTmpVolume(pod *corev1.Pod) {
	if slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == TmpVolume }) {
		return
	}
	for _, c := range pod.Spec.Containers {
		if slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == TmpVolume }) {
			pod.Spec.Volumes = append(pod.Spec.Volumes, tmpVolume())
			return
		}
	}
}

// TmpSizeLimit bounds the run pod's /tmp: the bundle, Ansible's temporary
// files and the run's output, which the run itself keeps to at most
// bundle.OutputCap. A pod past it is evicted.
const TmpSizeLimit = "1Gi"

func tmpVolume() corev1.Volume {
	limit := resource.MustParse(TmpSizeLimit)
	return corev1.Volume{Name: TmpVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}}}
}

// ValidateOverride reports what RenderGroup would say of an override on its
// own: parse errors, and an override that removes every container or
// changes kubeplay's labels. A namespace it names is taken as the group's.
func ValidateOverride(text string) error {
	ns, err := OverrideNamespace(text)
	if err != nil {
		return err
	}
	_, err = RenderGroup(Group{Namespace: ns, Override: text})
	return err
}

// checkReserved fails when labels sets one of own's keys to another value.
func checkReserved(in Input, labels, own map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(own)) {
		if v, ok := labels[k]; ok && v != own[k] {
			return &ReservedLabelError{Input: in, Key: k, Value: v, Want: own[k]}
		}
	}
	return nil
}

// stamp puts back what a merge may have removed and every rendered pod
// carries: its kind, namespace, kubeplay's labels and non-nil label and
// annotation maps (callers add to them).
func stamp(pod *corev1.Pod, namespace string, own map[string]string) {
	pod.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	pod.Namespace = namespace
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	maps.Copy(pod.Labels, own)
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
}

// NamespaceConflictError: the override names another namespace than the group.
type NamespaceConflictError struct{ Override, Group string }

func (e *NamespaceConflictError) Error() string {
	return fmt.Sprintf("the override's metadata.namespace is %q but the group's namespace is %q", e.Override, e.Group)
}

// OverrideNamespace returns the metadata.namespace of an override, if any.
func OverrideNamespace(text string) (string, error) {
	doc, err := ParseOverride(text)
	if err != nil || doc == nil {
		return "", err
	}
	return doc.Namespace, nil
}

// Merge applies a strategic merge patch of a Pod to pod and puts the worker
// container first.
func Merge(pod *corev1.Pod, patch []byte) (*corev1.Pod, error) {
	if pod == nil {
		return nil, errors.New("no pod to merge into")
	}
	base, err := json.Marshal(pod)
	if err != nil {
		return nil, err
	}
	merged, err := strategicpatch.StrategicMergePatch(base, patch, corev1.Pod{})
	if err != nil {
		return nil, fmt.Errorf("merging the override into the default pod: %w", err)
	}
	out := &corev1.Pod{}
	if err := json.Unmarshal(merged, out); err != nil {
		return nil, err
	}
	workerFirst(out.Spec.Containers)
	return out, nil
}

// workerFirst moves the worker container to the front, keeping the order of
// the others.
func workerFirst(cs []corev1.Container) {
	for i, c := range cs {
		if c.Name == WorkerContainer && i > 0 {
			copy(cs[1:i+1], cs[:i])
			cs[0] = c
			return
		}
	}
}

// ToYAML renders an object as YAML without the fields the cluster sets
// (status, creationTimestamp), with sorted keys so it is stable.
func ToYAML(obj any) (string, error) {
	j, err := json.Marshal(obj)
	if err != nil {
		return "", err
	}
	var m map[string]any
	if err := json.Unmarshal(j, &m); err != nil {
		return "", err
	}
	strip(m)
	out, err := yaml.Marshal(m)
	if err != nil {
		// The YAML 1.1 emitter refuses some control characters (in a label
		// or an env value, say); the YAML 1.2 one escapes them.
		var b bytes.Buffer
		enc := yamlv3.NewEncoder(&b)
		enc.SetIndent(2)
		if err := enc.Encode(m); err != nil {
			return "", err
		}
		return b.String(), nil
	}
	return string(out), nil
}

func strip(m map[string]any) {
	delete(m, "status")
	for k, v := range m {
		switch t := v.(type) {
		case map[string]any:
			if k == "metadata" {
				delete(t, "creationTimestamp")
			}
			strip(t)
			if len(t) == 0 && (k == "metadata" || k == "resources" || k == "securityContext") {
				delete(m, k)
			}
		case []any:
			for _, x := range t {
				if xm, ok := x.(map[string]any); ok {
					strip(xm)
				}
			}
		}
	}
}
