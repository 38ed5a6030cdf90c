// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

// TestAccRun_planCheckSavedPlanRecordGone: a saved plan whose check's
// record was deleted before the apply fails with kubeplay's error, which
// names the record and the remedy, not Terraform's "Provider produced
// inconsistent final plan"; the apply creates nothing (no run in the state,
// no run pod beyond the plan's check, no claim). The record and the index
// in the catalog namespace hold neither the host nor the diff.
func TestAccRun_planCheckSavedPlanRecordGone(t *testing.T) {
	e := newTestEnv(t)
	c := newCheckTarget(t, e, "kp-checkgone")
	terraformBin, cliConfig, err := providerCLI(t)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dir := t.TempDir()
	group := randName("grp")
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(cliRequiredProviders+c.config(group, planCheckChanges, "one", "")), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"TF_VAR_key=" + c.key, "TF_VAR_token=" + c.token}
	tf := func(args ...string) (string, error) {
		out, err := terraformCommand(terraformBin, cliConfig, dir, env, append(args[:1:1], append([]string{"-input=false", "-no-color"}, args[1:]...)...)...).CombinedOutput()
		return string(out), err
	}
	if out, err := tf("apply", "-auto-approve", "-target=kubeplay_container_group.g"); err != nil {
		t.Fatalf("applying the group: %v\n%s", err, out)
	}
	pods := e.countRunPods(c.ns)
	if out, err := tf("plan", "-out=tfplan"); err != nil || !strings.Contains(out, "Playbook Check: 1 Task Would Change On 1 Host") {
		t.Fatalf("the plan: %v\n%s", err, out)
	}
	cms := e.kube.CoreV1().ConfigMaps(e.catalog)
	records, err := cms.List(ctx, metav1.ListOptions{LabelSelector: managed.Selector(managed.LabelComponent, catalog.ComponentCheckRecord)})
	if err != nil || len(records.Items) != 1 {
		t.Fatalf("records after the plan: %v, %v", records, err)
	}
	name := records.Items[0].Name
	// What a reader of the catalog's ConfigMaps sees: no host, task or diff.
	if idx, err := cms.Get(ctx, catalog.CheckIndexName, metav1.GetOptions{}); err != nil {
		t.Fatalf("the index: %v", err)
	} else {
		for _, cm := range append(records.Items, *idx) {
			for _, what := range []string{c.target.IP, "t0", "template the config", "word=one"} {
				for k, v := range cm.Data {
					// The sealed value is ciphertext in base64, where any two
					// characters turn up by chance (a run found "t0" there).
					if k == "sealed" && len(what) < 6 {
						continue
					}
					if strings.Contains(v, what) {
						t.Errorf("ConfigMap %s shows %q in %s", cm.Name, what, k)
					}
				}
			}
		}
	}
	if err := cms.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := tf("apply", "tfplan")
	if err == nil {
		t.Fatalf("the apply of the saved plan succeeded without its check's record:\n%s", out)
	}
	flat := strings.Join(strings.Fields(out), " ") // Terraform wraps lines
	if strings.Contains(flat, "inconsistent final plan") || !strings.Contains(flat, "Error: Plan-Time Check Record Gone") ||
		!strings.Contains(flat, name+" was deleted outside kubeplay") || !strings.Contains(flat, "terraform plan -out=tfplan") {
		t.Fatalf("the apply's error:\n%s", out)
	}
	if n := pods.n(); n != 1 {
		t.Errorf("%d run pods created in all, want 1 (the plan's check)", n)
	}
	if err := e.checkNoRunPods(c.ns)(nil); err != nil {
		t.Error(err)
	}
	if out, err := terraformCommand(terraformBin, cliConfig, dir, env, "state", "list").CombinedOutput(); err != nil || strings.Contains(string(out), "kubeplay_run.") {
		t.Errorf("the state after the failed apply: %v\n%s", err, out)
	}
	ledger, err := e.kube.CoreV1().ConfigMaps(c.ns).Get(ctx, "kubeplay-runs-"+group, metav1.GetOptions{})
	if err == nil && len(ledger.Data) > 0 {
		t.Errorf("claims left in the runs ledger: %v", ledger.Data)
	}
	if out, err := tf("destroy", "-auto-approve"); err != nil {
		t.Fatalf("destroy: %v\n%s", err, out)
	}
}

// A reused check shows its age: a warning when a saved plan is applied or
// the check is older than staleCheckAge, none for the fresh check of this
// apply's own plan.
func TestReusedCheckAge(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		age       time.Duration
		savedPlan bool
		want      string
	}{
		{time.Minute, false, ""},
		{20 * time.Minute, false, "Playbook Check From 20m Ago"},
		{40 * time.Second, true, "Playbook Check From 40s Ago"},
		{26*time.Hour + 5*time.Minute, true, "Playbook Check From 26h5m Ago"},
	} {
		var d diag.Diagnostics
		reusedCheck(ctx, "kubeplay-check-x", time.Now().Add(-c.age), c.savedPlan, &d)
		got := ""
		if len(d) == 1 && d[0].Severity() == diag.SeverityWarning {
			got = d[0].Summary()
			if !strings.Contains(d[0].Detail(), "plan again") {
				t.Errorf("%s: detail %q", got, d[0].Detail())
			}
		} else if len(d) > 0 {
			got = fmt.Sprint(d)
		}
		if got != c.want {
			t.Errorf("age %s, saved plan %v: %q, want %q", c.age, c.savedPlan, got, c.want)
		}
	}
}
