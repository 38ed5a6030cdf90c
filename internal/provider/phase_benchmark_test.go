// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/phase"
)

// benchResources are the resources the benchmark writes; counting writes to
// them only keeps controllers' own traffic (status, leases, endpoints) out.
var benchResources = map[string]bool{"configmaps": true, "secrets": true, "services": true, "deployments": true}

// writeRequests sums the API server's write requests to benchResources
// (main resource, not subresources), by verb.
func (e *testEnv) writeRequests() map[string]float64 {
	out := map[string]float64{}
	for k, v := range e.apiRequests(e.t) {
		verb, res, _ := strings.Cut(k, " ")
		switch verb {
		case "APPLY", "PATCH", "POST", "PUT", "DELETE", "DELETECOLLECTION":
			if benchResources[res] {
				out[verb] += v
			}
		}
	}
	return out
}

func diffCounts(after, before map[string]float64) (map[string]float64, float64) {
	d, total := map[string]float64{}, 0.0
	for k, v := range after {
		if x := v - before[k]; x > 0 {
			d[k] = x
			total += x
		}
	}
	return d, total
}

// benchDocs writes the benchmark's 500 objects, 100 per namespace (40
// ConfigMaps, 40 Secrets, 10 Services, 10 Deployments), one file per
// namespace, and returns the files' contents.
func benchDocs(t testing.TB, dir string, namespaces []string) []string {
	var docs []string
	for i, ns := range namespaces {
		var b strings.Builder
		for j := range 40 {
			fmt.Fprintf(&b, "%s---\n", cmDoc(ns, fmt.Sprintf("cm-%02d", j), strings.Repeat("x", 200)))
			fmt.Fprintf(&b, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: secret-%02d\n  namespace: %s\nstringData:\n  password: %q\n---\n", j, ns, fmt.Sprint(j))
		}
		for j := range 10 {
			fmt.Fprintf(&b, "apiVersion: v1\nkind: Service\nmetadata:\n  name: svc-%02d\n  namespace: %s\nspec:\n  selector: {app: app-%02d}\n  ports:\n  - port: 80\n---\n", j, ns, j)
			fmt.Fprintf(&b, "%s---\n", deploymentDoc(ns, fmt.Sprintf("app-%02d", j)))
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("ns%d.yaml", i)), []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		docs = append(docs, b.String())
	}
	return docs
}

// BenchmarkPhase500 measures, in one run, a 500-object phase against
// `kubectl apply --server-side` of the same files: first apply, a re-apply
// (kubectl) or plan and apply (Terraform) with nothing changed, and delete;
// then the engine alone. It checks that every object exists after each apply
// and is gone after each delete, and that Terraform sends no write request
// when nothing changed.
//
//	TF_ACC=1 go test ./internal/provider -run '^$' -bench Phase500 -benchtime 1x -timeout 30m
func BenchmarkPhase500(b *testing.B) {
	e := benchTestEnv(b)
	terraformBin, cliConfig, err := providerCLI(b)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		e.benchPhase500(b, terraformBin, cliConfig)
	}
}

func (e *testEnv) benchPhase500(b *testing.B, terraformBin, cliConfig string) {
	t := b
	var namespaces []string
	for range 5 {
		namespaces = append(namespaces, e.namespace("kp-bench"))
	}
	dir := t.TempDir()
	docs := benchDocs(t, dir, namespaces)
	countObjects := func() int {
		n := 0
		for _, ns := range namespaces {
			ctx := context.Background()
			sel := metav1.ListOptions{LabelSelector: "!kubernetes.io/service-account.name"}
			cms, _ := e.kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name!=kube-root-ca.crt"})
			secs, _ := e.kube.CoreV1().Secrets(ns).List(ctx, sel)
			svcs, _ := e.kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
			deps, _ := e.kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
			n += len(cms.Items) + len(secs.Items) + len(svcs.Items) + len(deps.Items)
		}
		return n
	}
	kubectl := func(args ...string) time.Duration {
		cmd := exec.Command("kubectl", append([]string{"--kubeconfig", e.kubeconfig}, args...)...)
		cmd.Env = append(os.Environ(), "KUBECACHEDIR="+t.TempDir())
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
		return time.Since(start)
	}

	// kubectl, in the same run.
	kFirst := kubectl("apply", "--server-side", "-f", dir)
	if n := countObjects(); n != 500 {
		t.Fatalf("kubectl applied %d objects, want 500", n)
	}
	mid := e.writeRequests()
	kAgain := kubectl("apply", "--server-side", "-f", dir)
	after := e.writeRequests()
	kAgainWrites, _ := diffCounts(after, mid)
	kDelete := kubectl("delete", "-f", dir, "--wait=true")
	if n := countObjects(); n != 0 {
		t.Fatalf("%d objects left after kubectl delete", n)
	}

	// The phase, applied by the terraform CLI with the provider built from this tree.
	tfDir := t.TempDir()
	writeConfig := func(body string) {
		cfg := cliHeader(e.kubeconfig, e.catalog) + body
		if err := os.WriteFile(filepath.Join(tfDir, "main.tf"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tf := func(args ...string) time.Duration {
		start := time.Now()
		if err := terraformCLI(terraformBin, cliConfig, tfDir, args...); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	// The bundle holds Secrets, which only sensitive_documents may hold.
	writeConfig(strings.Replace(phaseConfig("test", randName("bench"), docs, "  wait = false\n"), "documents = [", "sensitive_documents = [", 1))
	tfFirst := tf("apply", "-auto-approve", "-input=false", "-no-color")
	if n := countObjects(); n != 500 {
		t.Fatalf("the phase applied %d objects, want 500", n)
	}
	w0 := e.writeRequests()
	tfNoop := tf("apply", "-auto-approve", "-input=false", "-no-color")
	noopWrites, noopTotal := diffCounts(e.writeRequests(), w0)
	if noopTotal != 0 {
		t.Fatalf("a plan and apply with nothing changed sent %v write requests: %v", noopTotal, noopWrites)
	}
	tfDestroy := tf("destroy", "-auto-approve", "-input=false", "-no-color")
	if n := countObjects(); n != 0 {
		t.Fatalf("%d objects left after destroy", n)
	}
	// The engine alone, without Terraform and its plan-time dry run.
	restCfg := acctest.RESTConfig(t)
	kubeclient.Tune(restCfg, "")
	c, err := kubeclient.NewClients(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := phase.NewEngine(c, randName("bench"), e.catalog)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := phase.Parse(docs)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t0 := time.Now()
	if errs := eng.DryRun(ctx, objs, false); len(errs) != 0 {
		t.Fatalf("dry run: %v", errs[0])
	}
	engDry := time.Since(t0)
	t0 = time.Now()
	if _, err := eng.Apply(ctx, objs, nil, phase.Options{Policy: phase.PolicyStrict}); err != nil {
		t.Fatal(err)
	}
	engApply := time.Since(t0)
	if n := countObjects(); n != 500 {
		t.Fatalf("the engine applied %d objects, want 500", n)
	}
	t0 = time.Now()
	dctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := eng.Destroy(dctx, nil); err != nil {
		t.Fatal(err)
	}
	engDestroy := time.Since(t0)
	if n := countObjects(); n != 0 {
		t.Fatalf("%d objects left after the engine's destroy", n)
	}

	ratio := func(a, b time.Duration) float64 { return a.Seconds() / b.Seconds() }
	b.ReportMetric(ratio(tfFirst, kFirst), "x-kubectl-first-apply")
	b.ReportMetric(ratio(tfDestroy, kDelete), "x-kubectl-delete")
	b.ReportMetric(tfFirst.Seconds()*1000/500, "ms/object-apply")
	b.ReportMetric(noopTotal, "writes-no-change")
	t.Logf("kubectl apply --server-side: first %s, again %s (%v writes), delete %s",
		kFirst.Round(time.Millisecond), kAgain.Round(time.Millisecond), kAgainWrites, kDelete.Round(time.Millisecond))
	t.Logf("kubeplay_phase (terraform apply, end to end): first %s (%.2f of kubectl, %.1f ms/object), "+
		"no-change plan+apply %s with %v write requests, destroy %s (%.3f of kubectl delete, %.1f ms/object)",
		tfFirst.Round(time.Millisecond), ratio(tfFirst, kFirst), tfFirst.Seconds()*1000/500,
		tfNoop.Round(time.Millisecond), noopTotal, tfDestroy.Round(time.Millisecond), ratio(tfDestroy, kDelete), tfDestroy.Seconds()*1000/500)
	t.Logf("engine alone: dry run %s, apply %s (%.2f of kubectl, %.1f ms/object), destroy %s (%.1f ms/object)",
		engDry.Round(time.Millisecond), engApply.Round(time.Millisecond), ratio(engApply, kFirst), engApply.Seconds()*1000/500,
		engDestroy.Round(time.Millisecond), engDestroy.Seconds()*1000/500)
}
