// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/config"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"golang.org/x/crypto/ssh"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podexec"
)

// noSecretInPlan fails when the plan, as JSON, holds one of secrets.
type noSecretInPlan []string

func (s noSecretInPlan) CheckPlan(_ context.Context, req plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	doc, err := json.Marshal(req.Plan)
	if err != nil {
		resp.Error = err
		return
	}
	if !bytes.Contains(doc, []byte("ssh_known_hosts")) {
		resp.Error = fmt.Errorf("the plan JSON does not show the run: %.300s", doc)
	}
	for _, secret := range s {
		if bytes.Contains(doc, []byte(secret)) {
			resp.Error = fmt.Errorf("the plan JSON holds a secret (%d bytes)", len(secret))
		}
	}
}

// podRecorder keeps every version of every pod a watch shows in a namespace.
type podRecorder struct {
	mu   sync.Mutex
	docs [][]byte
	runs int
}

func (e *testEnv) recordPods(ns string) *podRecorder {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := e.kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	r := &podRecorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			doc, _ := json.Marshal(ev.Object)
			r.mu.Lock()
			r.docs = append(r.docs, doc)
			if bytes.Contains(doc, []byte(`"kubeplay.io/run"`)) {
				r.runs++
			}
			r.mu.Unlock()
		}
	}()
	e.t.Cleanup(func() { w.Stop(); cancel(); <-done })
	return r
}

func (r *podRecorder) check(t *testing.T, secrets []string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.runs == 0 {
		t.Fatal("the pod watch saw no run pod")
	}
	for _, doc := range r.docs {
		for _, s := range secrets {
			if bytes.Contains(doc, []byte(s)) {
				t.Fatalf("a pod object holds a secret (%d bytes): %.200s", len(s), doc)
			}
		}
	}
}

// checkStateFiles reads every terraform.tfstate the test's working
// directories hold: at least one shows the run, and none holds a secret.
func checkStateFiles(t *testing.T, dir string, secrets []string) {
	t.Helper()
	found := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasPrefix(d.Name(), "terraform.tfstate") {
			return err
		}
		doc, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(doc, []byte(`"kubeplay_run"`)) {
			found++
		}
		for _, s := range secrets {
			if bytes.Contains(doc, []byte(s)) {
				return fmt.Errorf("%s holds a secret (%d bytes)", p, len(s))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found == 0 {
		t.Fatalf("no terraform.tfstate under %s shows the run", dir)
	}
}

// keySecrets are the forms of a PEM key to look for: the whole key and its
// base64 lines but the first, which every unencrypted ed25519 key shares
// (the format's magic, "none" cipher and KDF): the SSH targets' host keys
// hold it too.
func keySecrets(keys ...string) []string {
	var out []string
	for _, k := range keys {
		out = append(out, k)
		lines := strings.Split(k, "\n")
		for _, l := range lines[min(2, len(lines)):] {
			if len(l) >= 16 && !strings.HasPrefix(l, "-----") {
				out = append(out, l)
			}
		}
	}
	return out
}

// TestAccRun_ssh: a run configures three SSH targets (Debian's sshd) with key
// authentication, known hosts and vaulted variables, and their files prove
// it, inline and from a project whose role comes from a collection built
// here and installed by the project's requirements.yml; a wrong key makes the hosts unreachable, a wrong known_hosts fails host
// key checking, no host key checking needs no known_hosts, and a wrong vault
// password fails the run. No key or password appears in the state, the
// plan, a pod or the TF_LOG=trace log.
func TestAccRun_ssh(t *testing.T) {
	e := newProcessWideTestEnv(t, "captures Terraform and provider logs through TF_LOG and TF_ACC_LOG_PATH, which are process-wide")
	logFile := filepath.Join(t.TempDir(), "terraform.log")
	workDirs := t.TempDir()
	t.Setenv("TF_LOG", "trace")
	t.Setenv("TF_ACC_LOG_PATH", logFile)
	t.Setenv("TF_ACC_TEMP_DIR", workDirs)
	t.Setenv("TF_ACC_PERSIST_WORKING_DIR", "1")
	ns := e.namespace("kp-ssh")
	pods := e.recordPods(ns)
	key, pub := acctest.SSHKey(t)
	other, _ := acctest.SSHKey(t) // offered first, refused: several keys are tried in turn
	wrong, _ := acctest.SSHKey(t)
	_, impostor := acctest.SSHKey(t)
	targets := acctest.SSHTargets(t, e.kube, ns, 3, pub)

	vaultPW, opsPW := "vault-pw-"+randName("v"), "ops-pw-"+randName("o")
	playbook := "- hosts: all\n  gather_facts: false\n  vars:\n" +
		"    secret_word: !vault |\n" + indent(acctest.VaultEncrypt(t, "vaulted-word-71c3", vaultPW, ""), 6) +
		"    ops_word: !vault |\n" + indent(acctest.VaultEncrypt(t, "ops-word-2b9d", opsPW, "ops"), 6) +
		"  tasks:\n    - name: write proof\n" +
		"      copy: {dest: /home/" + acctest.SSHUser + "/proof, mode: \"0600\", content: \"{{ secret_word }} {{ ops_word }} {{ inventory_hostname }}\\n\"}\n"
	var inventory, known, wrongKnown strings.Builder
	for i, tg := range targets {
		fmt.Fprintf(&inventory, "t%d ansible_host=%s\n", i, tg.IP)
		known.WriteString(tg.KnownHosts + "\n")
		wrongKnown.WriteString(tg.IP + " " + string(ssh.MarshalAuthorizedKey(impostor)))
	}
	// Ansible's 10 s connect timeout also bounds sshd's banner: on CI's loaded 2 cores all three
	// targets once took longer ("Connection timed out during banner exchange"). What the test
	// shows does not depend on that time. A reset before the banner (seen once) is retried likewise.
	inventory.WriteString("[all:vars]\nansible_user=" + acctest.SSHUser + "\nansible_python_interpreter=/usr/bin/python3\nansible_ssh_timeout=60\nansible_ssh_retries=3\n")

	group := randName("grp")
	// Write-only values do not replace a run: each step's trigger does.
	step := 0
	run := func(body string) string {
		step++
		return e.runGroup(group, ns) + sshSecretVariables + `
variable "playbook" { type = string }
variable "inventory" { type = string }

resource "kubeplay_run" "test" {
  container_group     = kubeplay_container_group.g.name
  playbook            = var.playbook
  inventory           = var.inventory
  ssh_private_keys_wo = var.keys
  vault_password_wo   = var.vault_pw
  vault_passwords_wo  = { ops = var.ops_pw }
  triggers            = { step = "` + fmt.Sprint(step) + `" }
` + body + "}\n"
	}
	vars := func(keys ...string) config.Variables {
		list := make([]config.Variable, len(keys))
		for i, k := range keys {
			list[i] = config.StringVariable(k)
		}
		return config.Variables{
			"keys": config.ListVariable(list...), "vault_pw": config.StringVariable(vaultPW), "ops_pw": config.StringVariable(opsPW),
			"playbook": config.StringVariable(playbook), "inventory": config.StringVariable(inventory.String()),
		}
	}
	project := sshProject(t, e, ns, inventory.String(), vaultPW, opsPW)
	projectRun := func() string {
		step++
		return e.runGroup(group, ns) + sshProjectRun(known.String(), `  triggers            = { step = "`+fmt.Sprint(step)+`" }`+"\n")
	}
	projectVars := func(key string) config.Variables {
		return config.Variables{
			"keys": config.ListVariable(config.StringVariable(key)), "vault_pw": config.StringVariable(vaultPW),
			"ops_pw": config.StringVariable(opsPW), "project": config.StringVariable(project),
		}
	}
	const wrongPW = "not-the-vault-pw"
	secrets := append(keySecrets(key, other, wrong), vaultPW, opsPW, wrongPW)
	// hosts checks a run whose targets all were unreachable, or all changed:
	// host_counts counts them, and host_stats lists them only when unreachable.
	hosts := func(unreachable int64, changed int64) statecheck.StateCheck {
		listed := map[string]knownvalue.Check{}
		for i := range targets {
			if unreachable > 0 {
				listed[fmt.Sprintf("t%d", i)] = knownvalue.ObjectPartial(map[string]knownvalue.Check{
					"unreachable": knownvalue.Int64Exact(unreachable), "changed": knownvalue.Int64Exact(changed),
				})
			}
		}
		n := int64(len(targets))
		return stateChecks{
			statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_stats"), knownvalue.MapExact(listed)),
			statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("host_counts"), knownvalue.ObjectPartial(map[string]knownvalue.Check{
				"unreachable": knownvalue.Int64Exact(unreachable * n), "changed": knownvalue.Int64Exact(changed * n),
				"failed": knownvalue.Int64Exact(0), "ok": knownvalue.Int64Exact(0),
			})),
		}
	}
	noSecrets := func() resource.TestCheckFunc {
		var checks []resource.TestCheckFunc
		for _, s := range secrets {
			checks = append(checks, checkNoSecretInState(s))
		}
		return resource.ComposeAggregateTestCheckFunc(checks...)
	}
	knownHosts := fmt.Sprintf("  ssh_known_hosts = %q\n", known.String())
	steps := []resource.TestStep{
		{
			Config: run(knownHosts), ConfigVariables: vars(other, key),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("successful")),
				hosts(0, 1),
			},
			Check: resource.ComposeAggregateTestCheckFunc(noSecrets(), e.checkProofs(ns, targets, ""), e.checkNoRunPods(ns)),
		},
		{
			// The same from a project: a role of a collection built here and installed from the
			// project by requirements.yml, an inventory file, vaulted group_vars.
			Config: projectRun(), ConfigVariables: projectVars(key),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("successful")),
				hosts(0, 1),
			},
			Check: resource.ComposeAggregateTestCheckFunc(noSecrets(), e.checkProofs(ns, targets, " via kubeplay_test.ssh"), e.checkNoRunPods(ns)),
		},
		{
			// A key the targets do not accept: every host is unreachable.
			Config: run(knownHosts + "  ignore_failure = true\n"), ConfigVariables: vars(wrong),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("failed")),
				hosts(1, 0),
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("output"),
					knownvalue.StringRegexp(expectError(`(?s)UNREACHABLE!.*Permission denied \(publickey\)`))),
			},
			Check: noSecrets(),
		},
		{
			// Host key checking is on by default: other host keys are refused.
			Config: run(fmt.Sprintf("  ssh_known_hosts = %q\n", wrongKnown.String())), ConfigVariables: vars(key),
			ExpectError: expectError(`(?s)Run Failed.*UNREACHABLE!.*(REMOTE HOST IDENTIFICATION HAS CHANGED|Host key verification failed)`),
		},
		{
			// Turned off explicitly, no known_hosts is needed. The proof changes back from the
			// project's wording.
			Config: run("  ssh_host_key_checking = false\n"), ConfigVariables: vars(key),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(runAddr, tfjsonpath.New("status"), knownvalue.StringExact("successful")),
				hosts(0, 1),
			},
		},
		{
			Config: run(knownHosts), ConfigVariables: func() config.Variables {
				v := vars(key)
				v["vault_pw"] = config.StringVariable(wrongPW)
				return v
			}(),
			ExpectError: expectError(`(?s)Run Failed.*Decryption failed`),
		},
	}
	for i := range steps {
		steps[i].ConfigPlanChecks.PreApply = []plancheck.PlanCheck{noSecretInPlan(secrets)}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		TerraformVersionChecks:   writeOnlyVersions,
		CheckDestroy:             e.checkNoRunPods(ns),
		Steps:                    steps,
	})
	pods.check(t, secrets)
	checkStateFiles(t, workDirs, secrets)
	logText, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(logText, []byte("TASK [write proof]")) || !bytes.Contains(logText, []byte("Decryption failed")) {
		t.Fatalf("the trace log %s lacks the run's streamed output", logFile)
	}
	for _, s := range secrets {
		if bytes.Contains(logText, []byte(s)) {
			t.Fatalf("a secret (%d bytes) appears in the TF_LOG=trace log %s", len(s), logFile)
		}
	}
}

// checkProofs reads back the file the playbook wrote on each target.
func (e *testEnv) checkProofs(ns string, targets []acctest.SSHTarget, suffix string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for i, tg := range targets {
			var out, errOut bytes.Buffer
			code, err := podexec.Run(ctx, acctest.RESTConfig(e.t), e.kube, ns, tg.Pod, "sshd",
				[]string{"cat", "/home/" + acctest.SSHUser + "/proof"}, nil, &out, &errOut)
			if err != nil || code != 0 {
				return fmt.Errorf("reading the proof on %s: exit %d, %v: %s", tg.Pod, code, err, errOut.String())
			}
			if want := fmt.Sprintf("vaulted-word-71c3 ops-word-2b9d t%d%s\n", i, suffix); out.String() != want {
				return fmt.Errorf("the proof on %s is %q, want %q", tg.Pod, out.String(), want)
			}
		}
		return nil
	}
}

// sshProjectRun is a run of sshProject's site.yml with the write-only
// inputs of sshSecretVariables, the targets' known hosts, and extra lines.
func sshProjectRun(knownHosts, extra string) string {
	return sshSecretVariables + `
variable "project" { type = string }

resource "kubeplay_run" "test" {
  container_group     = kubeplay_container_group.g.name
  project_dir         = var.project
  playbook_path       = "site.yml"
  inventories         = ["inventory/hosts.ini"]
  ssh_private_keys_wo = var.keys
  ssh_known_hosts     = ` + fmt.Sprintf("%q", knownHosts) + `
  vault_password_wo   = var.vault_pw
  vault_passwords_wo  = { ops = var.ops_pw }
` + extra + "}\n"
}

// sshSecretVariables declare the write-only inputs of TestAccRun_ssh's runs.
const sshSecretVariables = `
variable "keys" {
  type      = list(string)
  sensitive = true
  ephemeral = true
}
variable "vault_pw" {
  type      = string
  sensitive = true
  ephemeral = true
}
variable "ops_pw" {
  type      = string
  sensitive = true
  ephemeral = true
}
`

// sshProject writes a project whose playbook configures the SSH targets with
// a role of collection kubeplay_test.ssh, built here with ansible-galaxy in
// a pod and installed from the project's collections/requirements.yml, and
// vaulted group_vars (one value per vault id).
func sshProject(t *testing.T, e *testEnv, ns, inventory, vaultPW, opsPW string) string {
	dir := filepath.Join(t.TempDir(), "project")
	src := filepath.Join(t.TempDir(), "collection")
	write := func(root, rel, content string) {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(src, "galaxy.yml", "namespace: kubeplay_test\nname: ssh\nversion: 1.0.0\nreadme: README.md\nauthors: [kubeplay]\n")
	write(src, "README.md", "Test collection.\n")
	write(src, "meta/runtime.yml", "requires_ansible: '>=2.14'\n")
	write(src, "roles/proof/tasks/main.yml", "- name: write proof\n  ansible.builtin.copy:\n"+
		"    dest: /home/"+acctest.SSHUser+"/proof\n    mode: \"0600\"\n"+
		"    content: \"{{ secret_word }} {{ ops_word }} {{ inventory_hostname }} via kubeplay_test.ssh\\n\"\n")
	acctest.BuildCollection(t, e.kube, ns, src, filepath.Join(dir, "dist"))
	write(dir, "collections/requirements.yml", "collections:\n  - name: dist/kubeplay_test-ssh-1.0.0.tar.gz\n    type: file\n")
	write(dir, "site.yml", "- hosts: all\n  gather_facts: false\n  roles:\n    - kubeplay_test.ssh.proof\n")
	write(dir, "inventory/hosts.ini", inventory)
	write(dir, "group_vars/all.yml", "secret_word: !vault |\n"+indent(acctest.VaultEncrypt(t, "vaulted-word-71c3", vaultPW, ""), 2)+
		"ops_word: !vault |\n"+indent(acctest.VaultEncrypt(t, "ops-word-2b9d", opsPW, "ops"), 2))
	return dir
}

func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pad) + "\n"
}

// TestAccRun_sshPlanErrors: unusable keys, known_hosts, vault ids and
// passwords are plan-time errors at the attribute, without the key.
func TestAccRun_sshPlanErrors(t *testing.T) {
	e := newTestEnv(t)
	good, _ := acctest.SSHKey(t)
	encrypted := "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00000000000000000000000000000000\n\nAAAA\n-----END RSA PRIVATE KEY-----\n"
	run := func(body string) string {
		return e.providerBlock() + "resource \"kubeplay_run\" \"test\" {\n  container_group = \"g\"\n  playbook = \"x\"\n" + body + "\n}\n"
	}
	steps := []resource.TestStep{}
	for _, c := range []struct{ body, want string }{
		{fmt.Sprintf("ssh_private_keys_wo = [%q, \"ssh-ed25519 AAAA\"]", good), `(?s)Invalid SSH Private Key.*not a PEM block.*not shown`},
		{fmt.Sprintf("ssh_private_keys_wo = [%q]", encrypted), `(?s)Invalid SSH Private Key.*passphrase`},
		{`ssh_known_hosts = "10.0.0.1 ssh-ed25519 !!!"`, `(?s)Invalid Known Hosts.*line 1`},
		{`vault_passwords_wo = { "a@b" = "pw" }`, `(?s)Invalid Vault Id.*"a@b"`},
		{`vault_passwords_wo = { ops = "  " }`, `(?s)Invalid Vault Password.*empty`},
		{`vault_password_wo = "pw1"
  vault_passwords_wo = { default = "pw2" }`, `(?s)Vault Id Given Twice`},
	} {
		steps = append(steps, resource.TestStep{Config: run(c.body), PlanOnly: true, ExpectError: expectError(c.want)})
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories, TerraformVersionChecks: writeOnlyVersions, Steps: steps,
	})
}
