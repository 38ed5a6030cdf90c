// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestAccPhase_kustomizationRemote: a remote resource or git base fails at
// plan with its URL, with no request to the server and no git run; with
// allow_remote_kustomize the remote resource is fetched and applied.
func TestAccPhase_kustomizationRemote(t *testing.T) {
	e := newProcessWideTestEnv(t, "puts a fake git first on PATH, which is process-wide")
	ns := e.namespace("kp-kremote")
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = io.WriteString(w, cmDoc(ns, "remote", "fetched"))
	}))
	defer srv.Close()
	// A git that records being run, first on PATH.
	bin, marker := t.TempDir(), filepath.Join(t.TempDir(), "git-ran")
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte("#!/bin/sh\ntouch "+marker+"\nexit 1\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	url := srv.URL + "/cm.yaml"
	dir, gitDir := t.TempDir(), t.TempDir()
	writeTestFile(t, filepath.Join(dir, "kustomization.yaml"), "resources:\n- "+url+"\n")
	writeTestFile(t, filepath.Join(gitDir, "kustomization.yaml"), "resources:\n- base\n")
	writeTestFile(t, filepath.Join(gitDir, "base", "kustomization.yaml"), "resources:\n- github.com/org/repo//deploy?ref=v1\n")
	config := func(dir, extra string) string {
		return e.providerBlock() + fmt.Sprintf("resource \"kubeplay_phase\" \"test\" {\n  name = \"kremote\"\n  kustomization = %q\n%s}\n", dir, extra)
	}
	noRequests := func() {
		if n := hits.Load(); n != 0 {
			t.Errorf("the server saw %d requests at validate and plan, want none", n)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Error("git was run")
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             func(*terraform.State) error { return e.configMapGone(ns, "remote") },
		Steps: []resource.TestStep{
			{
				Config:      config(dir, ""),
				ExpectError: wrapped("Remote Kustomization Refused", `resources[0] refers to remote "`+url+`"`, "allow_remote_kustomize = true"),
			},
			{
				PreConfig:   noRequests,
				Config:      config(gitDir, ""),
				ExpectError: wrapped(`base/kustomization.yaml: resources[0] refers to remote "github.com/org/repo//deploy?ref=v1"`),
			},
			{
				PreConfig: noRequests,
				Config:    config(dir, "  allow_remote_kustomize = true\n"),
				ConfigStateChecks: []statecheck.StateCheck{
					objectsCheck([4]string{"v1", "ConfigMap", ns, "remote"}),
				},
				Check: func(*terraform.State) error {
					cm, err := e.kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "remote", metav1.GetOptions{})
					if err != nil {
						return err
					}
					if cm.Data["value"] != "fetched" || hits.Load() == 0 {
						return fmt.Errorf("ConfigMap data %v after %d requests, want the fetched value", cm.Data, hits.Load())
					}
					return nil
				},
			},
		},
	})
}

// wrapped matches the texts in order, in Terraform's output, where any
// space may have become a line break.
func wrapped(texts ...string) *regexp.Regexp {
	for i, s := range texts {
		texts[i] = strings.ReplaceAll(regexp.QuoteMeta(s), " ", `\s+`)
	}
	return regexp.MustCompile(`(?s)` + strings.Join(texts, ".*"))
}

func writeTestFile(t testing.TB, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

const phaseSecretValue = "kp-secret-value-5f3a9c"

func secretDoc(ns string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\n  namespace: %s\nstringData:\n  password: %s\n", ns, phaseSecretValue)
}

// phaseSecretHidden fails when the Secret's value is anywhere in the planned
// values that are not marked sensitive, or sensitive_documents is not.
type phaseSecretHidden struct{}

func (phaseSecretHidden) CheckPlan(_ context.Context, req plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	for _, rc := range req.Plan.ResourceChanges {
		if rc.Address != phaseAddr {
			continue
		}
		after, _ := rc.Change.After.(map[string]any)
		sens, _ := rc.Change.AfterSensitive.(map[string]any)
		if sens["sensitive_documents"] != true {
			resp.Error = fmt.Errorf("sensitive_documents is not sensitive in the plan: %v", sens)
			return
		}
		shown := map[string]any{}
		for k, v := range after {
			if k != "sensitive_documents" {
				shown[k] = v
			}
		}
		b, _ := json.Marshal(shown)
		if strings.Contains(string(b), phaseSecretValue) || !strings.Contains(string(b), "ConfigMap") {
			resp.Error = fmt.Errorf("the plan's shown values hold the Secret, or not the documents: %s", b)
		}
	}
}

// TestAccPhase_sensitiveDocuments: a Secret in documents is refused at
// plan; in sensitive_documents it is applied and its value is in no plan
// output: not in the plan's values shown, not in `terraform plan`'s text.
func TestAccPhase_sensitiveDocuments(t *testing.T) {
	e := newTestEnv(t)
	ns := e.namespace("kp-psecret")
	name := randName("psecret")
	secretConfig := e.providerBlock() + phaseConfig("test", name, []string{cmDoc(ns, "plain", "shown")},
		fmt.Sprintf("  sensitive_documents = [%q]\n", secretDoc(ns)))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			_, err := e.kube.CoreV1().Secrets(ns).Get(context.Background(), "creds", metav1.GetOptions{})
			if err == nil {
				return fmt.Errorf("Secret %s/creds is still there", ns)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config:      e.providerBlock() + phaseConfig("test", name, []string{cmDoc(ns, "plain", "shown"), secretDoc(ns)}, ""),
				ExpectError: wrapped("Secret In Documents", "documents[1], YAML document 1: Secret "+ns+"/creds is a Secret", "Move it to sensitive_documents"),
			},
			{
				PreConfig: func() { e.humanPlanHidesSecret(secretConfig) },
				Config:    secretConfig,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{phaseSecretHidden{}},
				},
				Check: func(*terraform.State) error {
					s, err := e.kube.CoreV1().Secrets(ns).Get(context.Background(), "creds", metav1.GetOptions{})
					if err != nil {
						return err
					}
					if string(s.Data["password"]) != phaseSecretValue {
						return fmt.Errorf("Secret data %q, want the configured value", s.Data["password"])
					}
					return nil
				},
			},
		},
	})
}

// humanPlanHidesSecret runs `terraform plan` with the built provider and
// checks its text shows the ConfigMap document and not the Secret's value.
func (e *testEnv) humanPlanHidesSecret(config string) {
	t := e.t
	terraformBin, cliConfig, err := providerCLI(t)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeTestFile(t, filepath.Join(dir, "main.tf"), cliRequiredProviders+config)
	cmd := exec.Command(terraformBin, "plan", "-no-color", "-input=false")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+cliConfig, "TF_IN_AUTOMATION=1", "TF_LOG=", "CHECKPOINT_DISABLE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("terraform plan: %v\n%s", err, out)
	}
	if strings.Contains(string(out), phaseSecretValue) || !strings.Contains(string(out), "shown") ||
		!strings.Contains(string(out), "sensitive_documents") {
		t.Fatalf("terraform plan's text shows the Secret's value, or not the documents:\n%s", out)
	}
}
