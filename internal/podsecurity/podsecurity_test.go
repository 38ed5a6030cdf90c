// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package podsecurity_test

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/podsecurity"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
)

func defaultPod() *corev1.Pod { return podspec.DefaultPod("runs", "") }

func worker(p *corev1.Pod) *corev1.Container { return &p.Spec.Containers[0] }

// restrictedPod is the default pod made to pass restricted.
func restrictedPod() *corev1.Pod {
	p := defaultPod()
	p.Spec.SecurityContext = &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	worker(p).SecurityContext = &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	return p
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name  string
		level string
		pod   func() *corev1.Pod
		// want are the forbidden reasons, with a piece of their detail.
		want map[string]string
	}{
		{name: "default pod at baseline", level: podsecurity.Baseline, pod: defaultPod},
		{name: "default pod at the default level", level: "", pod: defaultPod},
		{name: "default pod at restricted", level: podsecurity.Restricted, pod: defaultPod, want: map[string]string{
			"allowPrivilegeEscalation != false": `container "worker"`,
			"unrestricted capabilities":         `container "worker"`,
			"runAsNonRoot != true":              `container "worker"`,
			"seccompProfile":                    `container "worker"`,
		}},
		{name: "restricted pod at restricted", level: podsecurity.Restricted, pod: restrictedPod},
		{name: "root at restricted", level: podsecurity.Restricted, pod: func() *corev1.Pod {
			p := restrictedPod()
			p.Spec.SecurityContext.RunAsUser = ptr.To[int64](0)
			return p
		}, want: map[string]string{"runAsUser=0": "pod must not set runAsUser=0"}},
		{name: "privileged at baseline", level: podsecurity.Baseline, pod: func() *corev1.Pod {
			p := defaultPod()
			worker(p).SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
			return p
		}, want: map[string]string{"privileged": `container "worker" must not set securityContext.privileged=true`}},
		{name: "privileged at privileged", level: podsecurity.Privileged, pod: func() *corev1.Pod {
			p := defaultPod()
			worker(p).SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
			p.Spec.HostNetwork = true
			return p
		}},
		{name: "hostPath at baseline", level: podsecurity.Baseline, pod: func() *corev1.Pod {
			p := defaultPod()
			p.Spec.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
			return p
		}, want: map[string]string{"hostPath volumes": `volume "root"`}},
		{name: "hostNetwork at baseline", level: podsecurity.Baseline, pod: func() *corev1.Pod {
			p := defaultPod()
			p.Spec.HostNetwork, p.Spec.HostPID = true, true
			return p
		}, want: map[string]string{"host namespaces": "hostNetwork=true, hostPID=true"}},
		{name: "added capability at baseline", level: podsecurity.Baseline, pod: func() *corev1.Pod {
			p := defaultPod()
			worker(p).SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{
				Add: []corev1.Capability{"SYS_ADMIN", "CHOWN"}}}
			return p
		}, want: map[string]string{"non-default capabilities": `container "worker" must not include "SYS_ADMIN"`}},
		{name: "default capability at baseline", level: podsecurity.Baseline, pod: func() *corev1.Pod {
			p := defaultPod()
			worker(p).SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{
				Add: []corev1.Capability{"NET_BIND_SERVICE"}}}
			return p
		}},
		{name: "every failure listed", level: podsecurity.Baseline, pod: func() *corev1.Pod {
			p := defaultPod()
			p.Spec.HostIPC = true
			worker(p).SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
			worker(p).Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
			return p
		}, want: map[string]string{"privileged": `"worker"`, "host namespaces": "hostIPC=true", "hostPort": "8080"}},
		{name: "nil pod", level: podsecurity.Restricted, pod: func() *corev1.Pod { return nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := podsecurity.Check(tt.level, tt.pod())
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Check: %v, want nil", err)
				}
				return
			}
			var ve *podsecurity.ViolationError
			if !errors.As(err, &ve) {
				t.Fatalf("Check: %v, want a *ViolationError", err)
			}
			got := map[string]string{}
			for _, v := range ve.Violations {
				got[v.Reason] = v.Detail
			}
			if len(got) != len(tt.want) {
				t.Errorf("violations %v, want reasons %v", ve.Violations, tt.want)
			}
			for reason, detail := range tt.want {
				if d, ok := got[reason]; !ok || !strings.Contains(d, detail) {
					t.Errorf("violation %q: detail %q (present %v), want it to contain %q", reason, d, ok, detail)
				}
				if !strings.Contains(err.Error(), reason) {
					t.Errorf("error %q does not name %q", err, reason)
				}
			}
			wantLevel := tt.level
			if !strings.Contains(err.Error(), `violates PodSecurity "`+wantLevel+`:latest"`) {
				t.Errorf("error %q does not name the level as the API server does", err)
			}
		})
	}
}

func TestLevel(t *testing.T) {
	for _, l := range podsecurity.Levels {
		if got, err := podsecurity.Level(l); err != nil || got != l {
			t.Errorf("Level(%q) = %q, %v", l, got, err)
		}
	}
	if got, err := podsecurity.Level(""); err != nil || got != podsecurity.Default {
		t.Errorf(`Level("") = %q, %v; want the default`, got, err)
	}
	for _, bad := range []string{"Baseline", "none", "restricted "} {
		if _, err := podsecurity.Level(bad); !errors.Is(err, podsecurity.ErrInvalidLevel) {
			t.Errorf("Level(%q): %v, want ErrInvalidLevel", bad, err)
		}
		if err := podsecurity.Check(bad, defaultPod()); !errors.Is(err, podsecurity.ErrInvalidLevel) {
			t.Errorf("Check(%q): %v, want ErrInvalidLevel", bad, err)
		}
		if l := podsecurity.NamespaceLabels(bad); l != nil {
			t.Errorf("NamespaceLabels(%q) = %v, want nil", bad, l)
		}
	}
}

func TestNamespaceLabels(t *testing.T) {
	got := podsecurity.NamespaceLabels(podsecurity.Restricted)
	if len(got) != 2 || got["pod-security.kubernetes.io/enforce"] != "restricted" ||
		got["pod-security.kubernetes.io/enforce-version"] != "latest" {
		t.Errorf("NamespaceLabels(restricted) = %v", got)
	}
	if got := podsecurity.NamespaceLabels(""); got[podsecurity.EnforceLabel] != podsecurity.Default {
		t.Errorf(`NamespaceLabels("") = %v, want the default level`, got)
	}
}

// FuzzCheck: whatever pod an override renders and whatever the level,
// Check does not panic, and a refusal names at least one check.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"", "spec:\n  hostNetwork: true\n", "spec:\n  containers: [{name: worker, securityContext: {privileged: true, capabilities: {add: [ALL, null]}}}]\n",
		"spec:\n  volumes: [{name: v, hostPath: {path: /}}]\n  securityContext: {sysctls: [{name: kernel.shm_rmid_forced, value: '1'}], seLinuxOptions: {type: x}}\n",
		"metadata:\n  annotations: {container.apparmor.security.beta.kubernetes.io/worker: unconfined}\n",
		"spec:\n  initContainers: [{name: i, image: x, ports: [{containerPort: 1, hostPort: 2}]}]\n  ephemeralContainers: [{name: e, image: x, securityContext: {procMount: Unmasked}}]\n"} {
		for _, l := range []string{"", podsecurity.Baseline, podsecurity.Restricted, "bogus"} {
			f.Add(s, l)
		}
	}
	f.Fuzz(func(t *testing.T, override, level string) {
		pod, err := podspec.RenderGroup(podspec.Group{Name: "g", Namespace: "runs", Override: override})
		if err != nil {
			pod = nil
		}
		err = podsecurity.Check(level, pod)
		var ve *podsecurity.ViolationError
		if errors.As(err, &ve) && (len(ve.Violations) == 0 || ve.Violations[0].Reason == "") {
			t.Fatalf("a refusal without a check: %v", err)
		}
	})
}
