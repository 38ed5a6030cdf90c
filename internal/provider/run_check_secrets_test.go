// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

// TestAccRun_planCheckSecrets: with plan_check on, a task that templates a
// vault-encrypted variable and one that overwrites a file on an SSH target
// that holds a secret. Neither plaintext is in the plan's text, its JSON,
// the state, a TF_LOG=trace log of Terraform and the provider, or any
// ConfigMap, Secret or pod of the catalog and the run's namespaces; the plan
// still names the host, the tasks and the size of each change. Then, with
// plan_check_diffs = true, the plan does show the diff (the opt-in works,
// and so would this test's search).
func TestAccRun_planCheckSecrets(t *testing.T) {
	e := newTestEnv(t)
	c := newCheckTarget(t, e, "kp-checksec")
	terraformBin, cliConfig, err := providerCLI(t)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	logFile := filepath.Join(t.TempDir(), "terraform.log")
	group := randName("grp")
	vaultPW := "vault-pw-" + randName("v")
	vaulted := "vaulted-" + randName("plain")  // the vault-encrypted variable's plaintext
	fileSecret := "old-" + randName("filesec") // what the file on the target held
	secretFile := "/home/" + acctest.SSHUser + "/secret.conf"
	putSecret := "printf 'user=app\\npassword=" + fileSecret + "\\n' >" + secretFile + " && chown " + acctest.SSHUser + ": " + secretFile
	if _, err := c.exec(putSecret); err != nil {
		t.Fatal(err)
	}
	inventory := fmt.Sprintf("t0 ansible_host=%s\n[all:vars]\nansible_user=%s\nansible_python_interpreter=/usr/bin/python3\n"+
		"ansible_ssh_timeout=60\nansible_ssh_retries=3\n", c.target.IP, acctest.SSHUser)
	playbook := "- hosts: all\n  gather_facts: false\n  vars:\n    db_password: !vault |\n" +
		indent(acctest.VaultEncrypt(t, vaulted, vaultPW, ""), 6) +
		"  tasks:\n    - name: template the vaulted config\n" +
		"      ansible.builtin.template: {src: app.conf.j2, dest: " + checkFile + ", mode: \"0600\"}\n" +
		"    - name: replace the secret file\n" +
		"      ansible.builtin.copy: {dest: " + secretFile + ", content: \"user=app\\n\", mode: \"0600\"}\n"
	write := func(extra string) {
		t.Helper()
		cfg := cliRequiredProviders + e.runGroup(group, c.ns) + `
variable "key" {
  type      = string
  sensitive = true
  ephemeral = true
}
variable "vault_pw" {
  type      = string
  sensitive = true
  ephemeral = true
}

resource "kubeplay_run" "test" {
  container_group     = kubeplay_container_group.g.name
  playbook            = ` + fmt.Sprintf("%q", playbook) + `
  files               = { "app.conf.j2" = "db=main\npassword={{ db_password }}\n" }
  inventory           = ` + fmt.Sprintf("%q", inventory) + `
  ssh_known_hosts     = ` + fmt.Sprintf("%q", c.target.KnownHosts+"\n") + `
  ssh_private_keys_wo = [var.key]
  vault_password_wo   = var.vault_pw
  plan_check          = "changes"
` + extra + "}\n"
		if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"TF_VAR_key=" + c.key, "TF_VAR_vault_pw=" + vaultPW, "TF_LOG=trace", "TF_LOG_PATH=" + logFile}
	tf := func(args ...string) string {
		t.Helper()
		start := time.Now()
		out, err := terraformCommand(terraformBin, cliConfig, dir, env, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("terraform %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("terraform %s: %s", args[0], time.Since(start).Round(time.Millisecond))
		return string(out)
	}
	secrets := map[string]string{"the vaulted variable": vaulted, "the file's old secret": fileSecret}
	leaks := func(what, doc string) {
		t.Helper()
		for name, s := range secrets {
			if i := strings.Index(doc, s); i >= 0 {
				t.Errorf("%s holds %s: ...%s...", what, name, strings.ReplaceAll(doc[max(0, i-300):min(len(doc), i+len(s)+100)], s, "<SECRET>"))
			}
		}
	}

	write("")
	tf("apply", "-input=false", "-no-color", "-auto-approve", "-target=kubeplay_container_group.g")
	out := tf("plan", "-input=false", "-no-color", "-out=tfplan")
	for _, want := range []string{"Warning: Playbook Check: 2 Tasks Would Change On 1 Host (t0)",
		"t0: template the vaulted config (ansible.builtin.template) +2 -0 lines", "t0: replace the secret file (ansible.builtin.copy) +0 -1 lines"} {
		if !strings.Contains(out, want) {
			t.Errorf("the plan's output lacks %q:\n%s", want, out)
		}
	}
	leaks("the plan's output", out)
	planJSON := tf("show", "-json", "tfplan")
	leaks("the plan's JSON", planJSON)
	var p struct {
		ResourceChanges []struct {
			Address string
			Change  struct{ After map[string]any }
		} `json:"resource_changes"`
	}
	if err := json.Unmarshal([]byte(planJSON), &p); err != nil {
		t.Fatal(err)
	}
	var tasks []any
	for _, rc := range p.ResourceChanges {
		if pc, _ := rc.Change.After["planned_changes"].(map[string]any); rc.Address == runAddr && pc != nil {
			tasks, _ = pc["tasks"].([]any)
		}
	}
	if len(tasks) != 2 {
		t.Fatalf("planned tasks %v, want 2", tasks)
	}
	for i, want := range []struct {
		task           string
		added, removed float64
	}{{"template the vaulted config", 2, 0}, {"replace the secret file", 0, 1}} {
		task, _ := tasks[i].(map[string]any)
		size, _ := task["diff_size"].(float64)
		if task["host"] != "t0" || task["task"] != want.task || task["lines_added"] != want.added ||
			task["lines_removed"] != want.removed || size <= 0 || task["diff"] != nil {
			t.Errorf("planned task %d: %v, want %s +%v -%v with a size and no diff", i, task, want.task, want.added, want.removed)
		}
	}
	clusterLeaks := func() {
		t.Helper()
		ctx := context.Background()
		for _, ns := range []string{e.catalog, c.ns} {
			cms, err := e.kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, cm := range cms.Items {
				doc, _ := json.Marshal(cm)
				for k, v := range cm.BinaryData {
					doc = fmt.Appendf(doc, "\n%s: %s", k, v)
				}
				leaks("ConfigMap "+ns+"/"+cm.Name, string(doc))
			}
			ss, err := e.kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range ss.Items {
				doc, _ := json.Marshal(s.ObjectMeta)
				for k, v := range s.Data {
					doc = fmt.Appendf(doc, "\n%s: %s", k, v)
				}
				leaks("Secret "+ns+"/"+s.Name, string(doc))
			}
			pods, err := e.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, pod := range pods.Items {
				doc, _ := json.Marshal(pod)
				leaks("pod "+ns+"/"+pod.Name, string(doc))
			}
		}
	}
	clusterLeaks()

	// The apply of the saved plan: the run, and the check in the state.
	tf("apply", "-input=false", "-no-color", "tfplan")
	state, err := os.ReadFile(filepath.Join(dir, "terraform.tfstate"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(state), `"lines_added": 2`) {
		t.Errorf("the state has no planned_changes:\n%.2000s", state)
	}
	leaks("the state", string(state))
	clusterLeaks()
	logs, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logs), "plan-time check") {
		t.Error("the trace log does not show the check")
	}
	leaks("the TF_LOG=trace log", string(logs))

	// With plan_check_diffs, the plan of a new run shows the diffs: its
	// vaulted value, and the file's old content put back.
	tf("destroy", "-input=false", "-no-color", "-auto-approve", "-target=kubeplay_run.test")
	if _, err := c.exec(putSecret + " && rm -f " + checkFile); err != nil {
		t.Fatal(err)
	}
	write("  plan_check_diffs    = true\n")
	out = tf("plan", "-input=false", "-no-color")
	for _, want := range []string{"+password=" + vaulted, "-password=" + fileSecret} {
		if !strings.Contains(out, want) {
			t.Errorf("with plan_check_diffs, the plan's output lacks %q:\n%s", want, out)
		}
	}
	// This plan's record is left for an apply that does not come.
	if err := e.kube.CoreV1().ConfigMaps(e.catalog).DeleteCollection(context.Background(), metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: managed.Selector(managed.LabelComponent, catalog.ComponentCheckRecord)}); err != nil {
		t.Error(err)
	}
	if err := e.checkNoRunPods(c.ns)(nil); err != nil {
		t.Error(err)
	}
}
