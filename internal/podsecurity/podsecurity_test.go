// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package podsecurity_test

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
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

// rootInUserNamespace is a restricted pod but for running as root, in a
// user namespace (hostUsers: false).
func rootInUserNamespace() *corev1.Pod {
	p := restrictedPod()
	p.Spec.SecurityContext.RunAsNonRoot = nil
	p.Spec.SecurityContext.RunAsUser = ptr.To[int64](0)
	p.Spec.HostUsers = ptr.To(false)
	return p
}

// TestCheckAtVersion: a v1.32 API server relaxes runAsNonRoot and
// runAsUser for hostUsers: false only behind a feature gate that is off by
// default, v1.35 does so always: kubeplay says what the server of that
// version says.
func TestCheckAtVersion(t *testing.T) {
	for _, v := range []string{"v1.32", "v1.34"} {
		err := podsecurity.CheckAt(podsecurity.Restricted, v, rootInUserNamespace())
		var ve *podsecurity.ViolationError
		if !errors.As(err, &ve) || !strings.Contains(err.Error(), "runAsNonRoot != true") || !strings.Contains(err.Error(), "runAsUser=0") {
			t.Errorf("CheckAt(restricted, %s, root with hostUsers: false) = %v, want runAsNonRoot and runAsUser refused", v, err)
		}
	}
	for _, v := range []string{"v1.35", "latest", ""} {
		if err := podsecurity.CheckAt(podsecurity.Restricted, v, rootInUserNamespace()); err != nil {
			t.Errorf("CheckAt(restricted, %q, root with hostUsers: false) = %v, want the v1.35 relaxation", v, err)
		}
	}
	// Without the user namespace, every version refuses root.
	p := rootInUserNamespace()
	p.Spec.HostUsers = nil
	if err := podsecurity.CheckAt(podsecurity.Restricted, "v1.35", p); err == nil {
		t.Error("root without a user namespace passes restricted at v1.35")
	}
	if err := podsecurity.CheckAt(podsecurity.Restricted, "1.32", restrictedPod()); err == nil || !strings.Contains(err.Error(), "1.32") {
		t.Errorf("CheckAt with a malformed version = %v, want an error naming it", err)
	}
}

func TestPolicyVersion(t *testing.T) {
	cases := []struct {
		info *version.Info
		want string
	}{
		{&version.Info{Major: "1", Minor: "32", GitVersion: "v1.32.3+k3s1"}, "v1.32"},
		{&version.Info{Major: "1", Minor: "30+"}, "v1.30"},
		{&version.Info{Major: "2", Minor: "0"}, ""},
		{&version.Info{Major: "1", Minor: ""}, ""},
		{&version.Info{Major: "x", Minor: "1"}, ""},
		{nil, ""},
	}
	for _, c := range cases {
		if got := podsecurity.PolicyVersion(c.info); got != c.want {
			t.Errorf("PolicyVersion(%+v) = %q, want %q", c.info, got, c.want)
		}
	}
}

// TestServerVersionCached: the version is asked once per client.
func TestServerVersionCached(t *testing.T) {
	kube := fake.NewClientset()
	fd, ok := kube.Discovery().(*fakediscovery.FakeDiscovery)
	if !ok {
		t.Fatalf("the fake clientset's discovery is a %T", kube.Discovery())
	}
	fd.FakedServerVersion = &version.Info{Major: "1", Minor: "32"}
	if v, err := podsecurity.ServerVersion(fd); err != nil || v != "v1.32" {
		t.Fatalf("ServerVersion = %q, %v", v, err)
	}
	fd.FakedServerVersion = &version.Info{Major: "1", Minor: "35"}
	if v, _ := podsecurity.ServerVersion(fd); v != "v1.32" {
		t.Errorf("second ServerVersion = %q, want the cached v1.32", v)
	}
	if v, _ := podsecurity.ServerVersion(fake.NewClientset().Discovery()); v == "v1.32" {
		t.Error("another client got the first client's version")
	}
}

// countingDiscovery answers slowly and counts the questions.
type countingDiscovery struct {
	asked *atomic.Int32
}

func (c countingDiscovery) ServerVersion() (*version.Info, error) {
	c.asked.Add(1)
	time.Sleep(20 * time.Millisecond)
	return &version.Info{Major: "1", Minor: "33"}, nil
}

// TestServerVersionAskedOnceTogether: runs planned at once ask the same
// client at once; it is asked once.
func TestServerVersionAskedOnceTogether(t *testing.T) {
	d := countingDiscovery{asked: &atomic.Int32{}}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			if v, err := podsecurity.ServerVersion(d); err != nil || v != "v1.33" {
				t.Errorf("ServerVersion = %q, %v", v, err)
			}
		})
	}
	wg.Wait()
	if n := d.asked.Load(); n != 1 {
		t.Errorf("the API server was asked %d times, want once", n)
	}
}
