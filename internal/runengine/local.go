// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runengine

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
)

// The environment variables of a held node's first container that carry
// its node label's python_path and shell_type. They are in the pod's spec,
// which kubeplay signs, so the node's runs may trust them as they trust
// the pod; the label itself may change after the node was made.
const (
	EnvPythonPath = "KUBEPLAY_PYTHON_PATH"
	EnvShellType  = "KUBEPLAY_SHELL_TYPE"
)

// LabelLocal is how Ansible runs on a pod of node label l (nil for none).
// A namespace label has no pod of its own, and no settings.
func LabelLocal(l *podspec.Label) bundle.Local {
	if l == nil || l.Type == podspec.TypeNamespace {
		return bundle.Local{}
	}
	return bundle.Local{PythonPath: l.PythonPath, ShellType: l.ShellType}
}

// PodLocal is how Ansible runs on held node pod p, as NodePod recorded it
// in the first container's environment.
func PodLocal(p *corev1.Pod) bundle.Local {
	var l bundle.Local
	if len(p.Spec.Containers) == 0 {
		return l
	}
	for _, e := range p.Spec.Containers[0].Env {
		switch e.Name {
		case EnvPythonPath:
			l.PythonPath = e.Value
		case EnvShellType:
			l.ShellType = e.Value
		}
	}
	return l
}

// setLocal records l's settings in the environment of p's first container,
// in place of any the group or label set under those names.
func setLocal(p *corev1.Pod, l bundle.Local) {
	if l == (bundle.Local{}) || len(p.Spec.Containers) == 0 {
		return
	}
	c := &p.Spec.Containers[0]
	c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == EnvPythonPath || e.Name == EnvShellType })
	if l.PythonPath != "" {
		c.Env = append(c.Env, corev1.EnvVar{Name: EnvPythonPath, Value: l.PythonPath})
	}
	if l.ShellType != "" {
		c.Env = append(c.Env, corev1.EnvVar{Name: EnvShellType, Value: l.ShellType})
	}
}
