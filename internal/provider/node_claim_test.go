// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"io"
	"maps"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podexec"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/waitfor"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/warmpool"
)

// replaceNodePod deletes held node name's pod in ns and waits until it is
// gone, then creates another pod of its name, made by change (which sees
// the node's pod), and waits until done holds of it.
func (e *testEnv) replaceNodePod(ns, name string, change func(old *corev1.Pod, p *corev1.Pod), done func(*corev1.Pod) bool) {
	e.t.Helper()
	e.replacePod(ns, name, change, name, done)
}

// replacePod is replaceNodePod for pod name, replaced by pod newName.
func (e *testEnv) replacePod(ns, name string, change func(old *corev1.Pod, p *corev1.Pod), newName string, done func(*corev1.Pod) bool) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pods := e.kube.CoreV1().Pods(ns)
	old, err := pods.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		e.t.Fatal(err)
	}
	if err := waitfor.GoneUID(ctx, waitfor.Named(pods, name), &corev1.Pod{}, old.UID); err != nil {
		e.t.Fatal(err)
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: ptr.To[int64](1),
			AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: old.Spec.Containers[0].Name, Image: acctest.TestImage(),
				ImagePullPolicy: corev1.PullIfNotPresent, Command: []string{"sleep", "3600"}, Resources: acctest.HelperResources()}},
		},
	}
	change(old, p)
	p.Name = newName
	if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	if _, err := waitfor.Until(ctx, waitfor.Named(pods, newName), &corev1.Pod{}, func(ev watch.Event) (bool, error) {
		q, ok := ev.Object.(*corev1.Pod)
		return ok && done(q), nil
	}); err != nil {
		e.t.Fatalf("the pod that replaced node %s's: %v", name, err)
	}
}

func podRunning(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }

func podEnded(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded }

// copyMeta copies the node's labels and annotations, kubeplay's signatures
// among them, as someone who may create pods in the namespace can.
func copyMeta(old, p *corev1.Pod) {
	p.Labels, p.Annotations = maps.Clone(old.Labels), maps.Clone(old.Annotations)
}

// TestAccNode_impostorRefused: the node's pod is deleted and someone
// creates another pod of its name with its labels and annotations, of
// their own spec. A run naming the node fails, saying the pod was not
// made by kubeplay, and sends it nothing: the file the run would write is
// not there.
func TestAccNode_impostorRefused(t *testing.T) {
	e := newTestEnv(t)
	group, node, ns := randName("claim"), randName("claim-node"), e.namespace("kp-claim")
	nodeOnly := e.runGroup(group, ns) + fmt.Sprintf(`
resource "kubeplay_node" "n" {
  name            = %q
  container_group = kubeplay_container_group.g.name
}
`, node)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: nodeOnly},
			{
				PreConfig: func() { e.replaceNodePod(ns, node, copyMeta, podRunning) },
				Config: nodeOnly + `
resource "kubeplay_run" "r" {
  container_group = kubeplay_container_group.g.name
  node            = kubeplay_node.n.name
  command         = ["sh", "-c", "touch /tmp/claim-was-here"]
}
`,
				ExpectError: regexp.MustCompile(`(?s)Held Node Unavailable.*` + regexp.QuoteMeta(ns+"/"+node) + `.*was\s+not\s+made\s+by\s+kubeplay`),
			},
			{
				// Nothing reached the impostor.
				Config: nodeOnly,
				Check: func(*terraform.State) error {
					var out strings.Builder
					code, err := podexec.Run(context.Background(), acctest.RESTConfig(t), e.kube, ns, node, "worker",
						[]string{"sh", "-c", "ls -a /tmp"}, nil, &out, io.Discard)
					switch {
					case err != nil || code != 0:
						return fmt.Errorf("listing the impostor's /tmp: %d, %v", code, err)
					case strings.Contains(out.String(), "claim-was-here") || strings.Contains(out.String(), "kubeplay"):
						return fmt.Errorf("the run reached the impostor: its /tmp holds %q", out.String())
					}
					return nil
				},
			},
		},
	})
}

// TestAccNode_destroySparesForeignPods: the pods of two held nodes are
// deleted out of band and other pods, which ended, take their names: one
// unrelated, one with the node's labels and annotations copied. The
// nodes' destroy leaves both.
func TestAccNode_destroySparesForeignPods(t *testing.T) {
	e := newTestEnv(t)
	group, ns := randName("claim"), e.namespace("kp-claim")
	unrelated, copied := randName("claim-a"), randName("claim-b")
	nodes := e.runGroup(group, ns) + fmt.Sprintf(`
resource "kubeplay_node" "a" {
  name            = %q
  container_group = kubeplay_container_group.g.name
}

resource "kubeplay_node" "b" {
  name            = %q
  container_group = kubeplay_container_group.g.name
}
`, unrelated, copied)
	ended := func(p *corev1.Pod) { p.Spec.Containers[0].Command = []string{"true"} }
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: nodes},
			{
				PreConfig: func() {
					e.replaceNodePod(ns, unrelated, func(_, p *corev1.Pod) {
						p.Labels = map[string]string{"app": "someone-else"}
						ended(p)
					}, podEnded)
					e.replaceNodePod(ns, copied, func(old, p *corev1.Pod) {
						copyMeta(old, p)
						ended(p)
					}, podEnded)
				},
				// The nodes go; the group stays.
				Config: e.runGroup(group, ns),
				Check: func(*terraform.State) error {
					for _, name := range []string{unrelated, copied} {
						p, err := e.kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
						switch {
						case err != nil:
							return fmt.Errorf("the nodes' destroy deleted the foreign pod %s: %v", name, err)
						case p.DeletionTimestamp != nil:
							return fmt.Errorf("the nodes' destroy deleted the foreign pod %s (terminating)", name)
						}
					}
					return nil
				},
			},
		},
	})
}

// TestAccRun_warmImpostorNotClaimed: the group's warm pod is deleted and
// someone creates a running pod with its labels and annotations, of their
// own spec. The run does not take it: it starts a pod of its own, and the
// file it writes is not in the impostor.
func TestAccRun_warmImpostorNotClaimed(t *testing.T) {
	e := newTestEnv(t)
	group, ns := randName("claim"), e.namespace("kp-claim")
	impostor := randName("claim-impostor")
	warmGroup := e.providerBlock() + fmt.Sprintf(`
resource "kubeplay_container_group" "g" {
  name      = %q
  namespace = %q
  image     = %q
  warm_pods = 1
}
`, group, ns, acctest.TestImage())
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: warmGroup},
			{
				PreConfig: func() {
					acctest.WaitWarmReady(t, e.kube, ns, group, 1)
					list, err := e.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: warmpool.GroupSelector(group)})
					if err != nil || len(list.Items) != 1 {
						t.Fatalf("listing the warm pod: %v", err)
					}
					warm := list.Items[0]
					// The impostor takes the warm pod's place: a run that takes it takes it for sure.
					e.replacePod(ns, warm.Name, func(_, p *corev1.Pod) {
						copyMeta(&warm, p)
					}, impostor, podRunning)
				},
				Config: warmGroup + `
resource "kubeplay_run" "r" {
  container_group = kubeplay_container_group.g.name
  command         = ["sh", "-c", "touch /tmp/claim-was-here; hostname"]
}
`,
				Check: func(s *terraform.State) error {
					a := s.RootModule().Resources["kubeplay_run.r"].Primary.Attributes
					if a["status"] != "successful" || a["pod_name"] == impostor || strings.TrimSpace(a["output"]) == impostor {
						return fmt.Errorf("the run: status %s, pod %s, output %q; the impostor is %s", a["status"], a["pod_name"], a["output"], impostor)
					}
					var out strings.Builder
					code, err := podexec.Run(context.Background(), acctest.RESTConfig(t), e.kube, ns, impostor, "worker",
						[]string{"ls", "-a", "/tmp"}, nil, &out, io.Discard)
					switch {
					case err != nil || code != 0:
						return fmt.Errorf("listing the impostor's /tmp: %d, %v", code, err)
					case strings.Contains(out.String(), "claim-was-here") || strings.Contains(out.String(), "kubeplay"):
						return fmt.Errorf("the run reached the impostor: its /tmp holds %q", out.String())
					}
					p, err := e.kube.CoreV1().Pods(ns).Get(context.Background(), impostor, metav1.GetOptions{})
					if err != nil || p.DeletionTimestamp != nil || p.Labels["kubeplay.io/run"] != "" {
						return fmt.Errorf("kubeplay claimed or deleted the impostor: %v", err)
					}
					return nil
				},
			},
		},
	})
}
