// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
)

const benchPlaybook = `- hosts: all
  gather_facts: false
  tasks:
    - command: "true"
    - debug: {msg: done}
`

// BenchmarkRunVsKubectl applies one kubeplay_run of a 2-task playbook against
// one terraform_data whose local-exec does what users script today: kubectl
// run, wait, cp, exec and delete, with kubectl's defaults. Each is timed as a
// whole terraform apply, its resource created anew (the group already exists).
//
//	TF_ACC=1 go test ./internal/provider -run '^$' -bench RunVsKubectl -benchtime 3x -timeout 30m
func BenchmarkRunVsKubectl(b *testing.B) {
	e := benchTestEnv(b)
	ns := acctest.Namespace(b, e.kube, "kp-vs")
	terraformBin, cliConfig, err := providerCLI(b)
	if err != nil {
		b.Fatal(err)
	}
	head := cliHeader(e.kubeconfig, e.catalog) + ``
	kpDir, kcDir := b.TempDir(), b.TempDir()
	if err := os.WriteFile(filepath.Join(kcDir, "site.yml"), []byte(benchPlaybook), 0o600); err != nil {
		b.Fatal(err)
	}
	group := fmt.Sprintf(`
resource "kubeplay_container_group" "g" {
  name      = "vs-kubectl"
  namespace = %q
  image     = %q
}
`, ns, acctest.TestImage())
	kubeplayRun := fmt.Sprintf(`
resource "kubeplay_run" "site" {
  container_group = kubeplay_container_group.g.name
  playbook        = %q
}
`, benchPlaybook)
	kubectlRun := fmt.Sprintf(`
resource "terraform_data" "site" {
  provisioner "local-exec" {
    command = <<-EOT
      set -e
      export KUBECONFIG=%s KUBECACHEDIR=%s
      pod=site-$$
      kubectl -n %s run $pod --image=%s --image-pull-policy=IfNotPresent --restart=Never -- sleep infinity
      kubectl -n %s wait --for=condition=Ready pod/$pod --timeout=5m
      kubectl -n %s cp site.yml $pod:/tmp/site.yml
      kubectl -n %s exec $pod -- ansible-playbook -i localhost, -c local /tmp/site.yml
      kubectl -n %s delete pod $pod --wait=true
    EOT
  }
}
`, e.kubeconfig, filepath.Join(kcDir, ".kube-cache"), ns, acctest.TestImage(), ns, ns, ns, ns)
	write := func(dir, body string) {
		if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(head+body), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	tf := func(dir string, args ...string) time.Duration {
		start := time.Now()
		if err := terraformCLI(terraformBin, cliConfig, dir, append(args, "-auto-approve", "-input=false", "-no-color")...); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	write(kpDir, group)
	tf(kpDir, "apply")
	b.Cleanup(func() {
		write(kpDir, group)
		tf(kpDir, "destroy")
	})
	var kp, kc time.Duration
	for b.Loop() {
		write(kpDir, group+kubeplayRun)
		kp += tf(kpDir, "apply")
		write(kpDir, group)
		tf(kpDir, "apply")

		write(kcDir, kubectlRun)
		kc += tf(kcDir, "apply")
		tf(kcDir, "destroy")
	}
	b.ReportMetric(kp.Seconds()/float64(b.N), "s-kubeplay")
	b.ReportMetric(kc.Seconds()/float64(b.N), "s-kubectl-script")
	b.ReportMetric(kp.Seconds()/kc.Seconds(), "x-kubectl-script")
}
