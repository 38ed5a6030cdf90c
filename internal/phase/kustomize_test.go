// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package phase

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRender builds a kustomization as airshipctl builds an executor bundle:
// the namePrefix reaches every object and the executor document, labelled
// airshipit.org/deploy-k8s: "false", is left out by Parse.
func TestRender(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"kustomization.yaml": "namePrefix: site-\nresources:\n- cm.yaml\n- executor.yaml\n",
		"cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: infra\ndata:\n  k: v\n",
		"executor.yaml": "apiVersion: airshipit.org/v1alpha1\nkind: KubernetesApply\nmetadata:\n  name: kubernetes-apply\n" +
			"  labels:\n    airshipit.org/deploy-k8s: \"false\"\nconfig:\n  waitOptions: {timeout: 2000}\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	y, err := Render(dir)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Parse([]string{y})
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 || objs[0].String() != "ConfigMap infra/site-settings" {
		t.Fatalf("objects = %v, want only ConfigMap infra/site-settings", objs)
	}
	if _, err := Render(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("rendering a missing directory: %v", err)
	}
}
