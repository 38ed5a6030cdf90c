// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalogkey"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/waitfor"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/warmpool"
)

// keyedProvider configures the provider with catalog key key and, when
// set, previous keys.
func (e *testEnv) keyedProvider(key string, previous ...string) string {
	p := fmt.Sprintf("provider \"kubeplay\" {\n  config_path       = %q\n  catalog_namespace = %q\n  catalog_key       = %q\n",
		e.kubeconfig, e.catalog, key)
	if len(previous) > 0 {
		p += fmt.Sprintf("  previous_catalog_keys = [%q]\n", strings.Join(previous, `", "`))
	}
	return p + "}\n"
}

// endedRunPod creates a pod with the labels of one of group's run pods and
// the annotations given, which ends at once, and waits until it has.
func (e *testEnv) endedRunPod(ns, name, group string, annotations map[string]string) *corev1.Pod {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pods := e.kube.CoreV1().Pods(ns)
	p, err := pods.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: annotations, Labels: map[string]string{
			managed.LabelManagedBy: managed.ManagedByValue, managed.LabelContainerGroup: group, managed.LabelRun: "0123456789abcdef",
		}},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: ptr.To[int64](1),
			AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "worker", Image: acctest.TestImage(),
				ImagePullPolicy: corev1.PullIfNotPresent, Command: []string{"true"}, Resources: acctest.HelperResources()}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := waitfor.Until(ctx, waitfor.Named(pods, name), &corev1.Pod{}, func(ev watch.Event) (bool, error) {
		q, ok := ev.Object.(*corev1.Pod)
		return ok && podEnded(q), nil
	}); err != nil {
		e.t.Fatalf("pod %s did not end: %v", name, err)
	}
	return p
}

// TestAccRun_sweepDeletesOnlySigned (#40): the orphan sweep of a group's
// first run deletes an ended run pod that kubeplay signed (as a run does
// right after its create) and leaves one that carries the same labels and a
// copy of its signature: a pod kubeplay cannot show it made.
func TestAccRun_sweepDeletesOnlySigned(t *testing.T) {
	e := newTestEnv(t)
	ns, group := e.namespace("sweep"), randName("sweep-grp")
	keyText := strings.Repeat("sweep-test-key-", 3)
	key, err := catalogkey.New([]byte(keyText))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var signed, impostor *corev1.Pod
	config := e.keyedProvider(keyText) + fmt.Sprintf(`
resource "kubeplay_container_group" "g" {
  name      = %q
  namespace = %q
  image     = %q
}
`, group, ns, acctest.TestImage()) + trustRun("kubeplay_container_group.g.name", "null")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			PreConfig: func() {
				signed = e.endedRunPod(ns, "signed-orphan", group, nil)
				var err error
				if signed, err = warmpool.SignRun(ctx, e.kube, key, signed); err != nil {
					t.Fatal(err)
				}
				impostor = e.endedRunPod(ns, "impostor", group, maps.Clone(signed.Annotations))
			},
			Config: config,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("successful")),
			},
			Check: func(*terraform.State) error {
				p, err := e.kube.CoreV1().Pods(ns).Get(ctx, impostor.Name, metav1.GetOptions{})
				if err != nil || p.UID != impostor.UID || p.DeletionTimestamp != nil {
					return fmt.Errorf("the sweep deleted the impostor, a pod kubeplay did not sign: %v", err)
				}
				p, err = e.kube.CoreV1().Pods(ns).Get(ctx, signed.Name, metav1.GetOptions{})
				if err == nil && p.DeletionTimestamp == nil {
					return fmt.Errorf("the sweep left the ended run pod kubeplay signed")
				}
				if err != nil && !apierrors.IsNotFound(err) {
					return err
				}
				return nil
			},
		}},
	})
}

// TestAccCatalogKey_rotation (#40): the rotation procedure. A group with a
// warm pod and a held node under key A; the provider gets key B with A in
// previous_catalog_keys: the apply re-signs the group (its plan shows the
// update), and its fill deletes the warm pod signed under A and starts one
// signed under B; the next plan replaces the node, whose pod was signed
// under A; a run works.
func TestAccCatalogKey_rotation(t *testing.T) {
	e := newTestEnv(t)
	ns, group, node := e.namespace("rotate"), randName("rotate-grp"), randName("rotate-node")
	keyA, keyB := strings.Repeat("rotation-key-a-", 3), strings.Repeat("rotation-key-b-", 3)
	b, err := catalogkey.New([]byte(keyB))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	body := fmt.Sprintf(`
resource "kubeplay_container_group" "g" {
  name      = %q
  namespace = %q
  image     = %q
  warm_pods = 1
}

resource "kubeplay_node" "n" {
  name            = %q
  container_group = kubeplay_container_group.g.name
}
`, group, ns, acctest.TestImage(), node)
	var oldWarm []types.UID
	var oldNode types.UID
	warmUIDs := func() []types.UID {
		list, err := e.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: warmpool.GroupSelector(group)})
		if err != nil {
			t.Fatal(err)
		}
		var uids []types.UID
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil {
				uids = append(uids, p.UID)
			}
		}
		return uids
	}
	nodePod := func() *corev1.Pod {
		p, err := e.kube.CoreV1().Pods(ns).Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps: []resource.TestStep{
			{
				Config: e.keyedProvider(keyA) + body,
				Check: func(*terraform.State) error {
					acctest.WaitWarmReady(t, e.kube, ns, group, 1)
					oldWarm, oldNode = warmUIDs(), nodePod().UID
					return nil
				},
			},
			{
				// Under key B the group's signature does not verify: the plan
				// shows its update, which signs it again.
				Config:             e.keyedProvider(keyB, keyA) + body,
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
			{
				Config: e.keyedProvider(keyB, keyA) + body,
				// The refresh after the apply finds the node's pod signed
				// under the previous key, once the group verifies again.
				ExpectNonEmptyPlan: true,
				Check: func(*terraform.State) error {
					now := warmUIDs()
					for _, u := range oldWarm {
						if slices.Contains(now, u) {
							return fmt.Errorf("the warm pod signed under the previous key is still there (%s)", u)
						}
					}
					if c, err := warmpool.Count(ctx, e.kube, b, ns, group); err != nil || c.Ready+c.Starting != 1 {
						return fmt.Errorf("warm pods signed under the new key: %+v, %v; want 1", c, err)
					}
					return nil
				},
			},
			{
				// The refresh finds the node's pod signed under the previous
				// key: the node is replaced, and the run works.
				Config: e.keyedProvider(keyB, keyA) + body + trustRun("kubeplay_container_group.g.name", "null"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("successful")),
				},
				Check: func(*terraform.State) error {
					p := nodePod()
					if p.UID == oldNode {
						return fmt.Errorf("the held node's pod signed under the previous key was not replaced")
					}
					owner := warmpool.Owner{Kind: warmpool.KindNode, Group: group, Node: node}
					if err := warmpool.Verify(b, owner, p); err != nil {
						return fmt.Errorf("the new node pod under the new key: %v", err)
					}
					return nil
				},
			},
		},
	})
}

// TestAccProvider_previousCatalogKeyInvalid: a previous key that is too
// short, or not base64 after "base64:", fails the plan at its entry. It
// needs no cluster, so it runs in plain go test.
func TestAccProvider_previousCatalogKeyInvalid(t *testing.T) {
	cfg := func(prev string) string {
		return fmt.Sprintf("provider \"kubeplay\" {\n  host                  = \"https://127.0.0.1:1\"\n  previous_catalog_keys = [%q]\n}\n", prev) +
			"resource \"kubeplay_credential\" \"test\" {\n  name = \"x\"\n  kind = \"provider\"\n}\n"
	}
	resource.UnitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: cfg("short"), PlanOnly: true, ExpectError: expectError(`(?s)Invalid Previous Catalog Key.*needs at least 32 bytes, got 5`)},
			{Config: cfg("base64:!!"), PlanOnly: true, ExpectError: expectError(`(?s)Invalid Previous Catalog Key.*must be base64`)},
		},
	})
}
