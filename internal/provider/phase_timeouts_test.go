// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
)

// neverReadyDoc is a Deployment whose pod runs but never passes its
// readiness probe: kstatus keeps it InProgress.
func neverReadyDoc(ns, name string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[2]s
  namespace: %[1]s
spec:
  replicas: 1
  selector:
    matchLabels: {app: %[2]s}
  template:
    metadata:
      labels: {app: %[2]s}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: %[3]s
        imagePullPolicy: IfNotPresent
        command: [sleep, infinity]
        resources: {requests: {cpu: 100m}}
        readinessProbe:
          exec: {command: ["false"]}
          periodSeconds: 1
`, ns, name, acctest.TestImage())
}

// stopwatch times test steps from one PreConfig to the next.
type stopwatch struct {
	t     *testing.T
	start time.Time
}

func (s *stopwatch) mark() { s.start = time.Now() }

// took checks that the step since mark failed at its timeout: not before
// limit, and not long after (Terraform's plan and start-up, on a loaded
// machine, take the rest).
func (s *stopwatch) took(what string, limit time.Duration) {
	d := time.Since(s.start)
	s.t.Logf("%s took %s (timeout %s)", what, d.Round(100*time.Millisecond), limit)
	if d < limit || d > limit+time.Minute {
		s.t.Errorf("%s took %s, want it to end at its timeout of %s", what, d.Round(100*time.Millisecond), limit)
	}
}

// TestAccPhase_timeouts: wait = false applies an object that never becomes
// ready and returns; an update that waits for it fails at timeouts.update,
// and a create at timeouts.create, each naming the object and the key.
func TestAccPhase_timeouts(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-timeouts")
	name := randName("timeouts")
	sw := &stopwatch{t: t}
	cfg := func(extra string) string {
		return e.providerBlock() + phaseConfig("test", name, []string{neverReadyDoc(ns, "never")}, extra)
	}
	notReady := func(obj, limit string) string {
		return `(?s)Phase Apply Failed.*timed out waiting for resources to be ready: Deployment ` + ns + `/` + obj +
			`: InProgress.*The apply may take up to ` + regexp.QuoteMeta(limit) + `: raise it, or fix what keeps them from being ready`
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				// It would fail at timeouts.create if it waited.
				PreConfig: sw.mark,
				Config:    cfg("  wait = false\n  timeouts {\n    create = \"15s\"\n  }\n"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(phaseAddr, tfjsonpath.New("wait"), knownvalue.Bool(false)),
					objectsCheck([4]string{"apps/v1", "Deployment", ns, "never"}),
				},
				Check: func(*terraform.State) error {
					d, err := e.kube.AppsV1().Deployments(ns).Get(context.Background(), "never", metav1.GetOptions{})
					if err != nil || d.Status.AvailableReplicas != 0 {
						return fmt.Errorf("Deployment never: %v, %+v; want it applied and not available", err, d.Status)
					}
					return nil
				},
			},
			{
				// wait back to true: the update waits, and ends at timeouts.update.
				PreConfig: sw.mark,
				Config:    cfg("  timeouts {\n    create = \"15s\"\n    update = \"10s\"\n  }\n"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(phaseAddr, plancheck.ResourceActionUpdate),
				}},
				ExpectError: expectError(notReady("never", "timeouts.update (10s)")),
			},
			{
				// A new phase of its own: the create ends at timeouts.create.
				PreConfig: func() { sw.took("the update", 10*time.Second); sw.mark() },
				Config: e.providerBlock() + phaseConfig("fresh", randName("fresh"), []string{neverReadyDoc(ns, "fresh")},
					"  timeouts {\n    create = \"15s\"\n  }\n"),
				ExpectError: expectError(notReady("fresh", "timeouts.create (15s)")),
			},
			{
				PreConfig: func() { sw.took("the create", 15*time.Second) },
				Config:    e.providerBlock(),
			},
		},
	})
}

// TestAccPhase_deleteTimeout: destroy waits for the objects to be gone up
// to timeouts.delete. A ConfigMap whose finalizer nobody removes outlasts
// it: destroy fails then, naming it and the remedy, and leaves a state the
// next destroy finishes (the namespace, deleted after it, is untouched;
// the inventory still lists both). The remedies: a longer timeouts.delete,
// applied so that the state records it, and the finalizer removed; then
// destroy succeeds. wait = false, since the held ConfigMap never becomes
// ready again once deleted.
func TestAccPhase_deleteTimeout(t *testing.T) {
	e := newTestEnv(t)
	ns := randName("kp-held")
	e.cleanupNamespace(ns)
	name := randName("held")
	held := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  namespace: %s\n"+
		"  finalizers: [kubeplay.test/hold]\ndata:\n  value: \"1\"\n", ns)
	release := func() error {
		_, err := e.kube.CoreV1().ConfigMaps(ns).Patch(context.Background(), "held", types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	// Runs before cleanupNamespace's, so that a failed test leaves no
	// namespace stuck terminating.
	t.Cleanup(func() { _ = release() })
	cfg := func(limit string) string {
		return e.providerBlock() + phaseConfig("test", name, []string{nsDoc(ns), held},
			"  wait = false\n  timeouts {\n    delete = \""+limit+"\"\n  }\n")
	}
	sw := &stopwatch{t: t}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			if _, err := e.kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("namespace %s after destroy: %v, want NotFound", ns, err)
			}
			if _, err := e.inventory(name); !apierrors.IsNotFound(err) {
				return fmt.Errorf("inventory after destroy: %v, want NotFound", err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{Config: cfg("10s")},
			{
				PreConfig: sw.mark,
				Config:    cfg("10s"),
				Destroy:   true,
				ExpectError: expectError(`(?s)Error: Phase Destroy Timed Out.*timed out waiting for resources to be deleted: ConfigMap ` +
					ns + `/held.*The destroy may take up to timeouts.delete \(10s\). They were deleted but are still there: ` +
					`usually a finalizer.*Remove what holds them.*or raise timeouts.delete \(apply it first.*\), and destroy again`),
			},
			{
				PreConfig: func() {
					sw.took("the destroy", 10*time.Second)
					ctx := context.Background()
					cm, err := e.kube.CoreV1().ConfigMaps(ns).Get(ctx, "held", metav1.GetOptions{})
					if err != nil || cm.DeletionTimestamp == nil {
						t.Fatalf("ConfigMap held after the failed destroy: %v, deleted at %v; want it deleted and held", err, cm.GetDeletionTimestamp())
					}
					n, err := e.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
					if err != nil || n.DeletionTimestamp != nil {
						t.Fatalf("namespace %s after the failed destroy: %v, deleted at %v; want it untouched", ns, err, n.GetDeletionTimestamp())
					}
					if refs, err := e.inventory(name); err != nil || len(refs) != 2 {
						t.Fatalf("inventory after the failed destroy: %v, %v; want both members", refs, err)
					}
				},
				// A namespace takes its time to go: more than 10 s on a loaded machine.
				Config: cfg("3m"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(phaseAddr, plancheck.ResourceActionUpdate),
				}},
			},
			{
				PreConfig: func() {
					if err := release(); err != nil {
						t.Fatal(err)
					}
				},
				Config:  cfg("3m"),
				Destroy: true,
			},
		},
	})
}
