// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package phase

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	y, err := Render(dir, RenderOptions{})
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
	if _, err := Render(filepath.Join(dir, "missing"), RenderOptions{}); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("rendering a missing directory: %v", err)
	}
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

const remoteCM = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: remote\ndata:\n  k: v\n"

// countingServer serves remoteCM at /cm.yaml and counts every request.
func countingServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/cm.yaml":
			_, _ = io.WriteString(w, remoteCM)
		case "/big.yaml":
			_, _ = io.WriteString(w, strings.Repeat("#", 4096))
		case "/slow.yaml":
			<-r.Context().Done()
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// fakeGit puts a git on PATH that records being run, and points TMPDIR,
// where kustomize clones, at an empty directory; it returns both checks.
func fakeGit(t *testing.T) (ran func() bool, cloneDirs func() []string) {
	bin, tmp := t.TempDir(), t.TempDir()
	marker := filepath.Join(t.TempDir(), "git-ran")
	script := "#!/bin/sh\necho \"$@\" >> " + marker + "\nexit 1\n"
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("TMPDIR", tmp)
	return func() bool {
			_, err := os.Stat(marker)
			return err == nil
		}, func() []string {
			l, _ := filepath.Glob(filepath.Join(tmp, "*"))
			return l
		}
}

// TestRenderRefusesRemote: every remote reference, in the kustomization or
// in a local base it reaches, fails the render with the URL, file and field,
// before anything is fetched or cloned.
func TestRenderRefusesRemote(t *testing.T) {
	srv, hits := countingServer(t)
	gitRan, cloneDirs := fakeGit(t)
	dir := t.TempDir()
	url := srv.URL + "/cm.yaml"
	writeFiles(t, dir, map[string]string{
		"kustomization.yaml": "resources:\n- base\n- " + url + "\n- github.com/org/repo//deploy?ref=v1\n" +
			"components:\n- git::https://example.com/org/repo.git//c\n" +
			"patches:\n- path: " + srv.URL + "/patch.yaml\n" +
			"configMapGenerator:\n- name: g\n  files:\n  - key=" + srv.URL + "/f\n",
		"base/kustomization.yaml": "resources:\n- cm.yaml\n- git@github.com:org/repo.git\n",
		"base/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: local\n",
	})
	_, err := Render(dir, RenderOptions{})
	var re *RemoteError
	if !errors.As(err, &re) || re.URL != url || re.Field != "resources[1]" || re.File != filepath.Join(realPath(t, dir), "kustomization.yaml") {
		t.Fatalf("error = %v, want a *RemoteError for %s in resources[1] of the kustomization", err, url)
	}
	for _, want := range []string{
		"resources[2] refers to remote \"github.com/org/repo//deploy?ref=v1\"",
		"components[0] refers to remote \"git::https://example.com/org/repo.git//c\"",
		"patches[0].path refers to remote \"" + srv.URL + "/patch.yaml\"",
		"configMapGenerator[0].files[0] refers to remote \"" + srv.URL + "/f\"",
		filepath.Join("base", "kustomization.yaml") + ": resources[1] refers to remote \"git@github.com:org/repo.git\"",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the server saw %d requests, want none", n)
	}
	if gitRan() {
		t.Error("git was run")
	}
	if l := cloneDirs(); len(l) > 0 {
		t.Errorf("clone directories were made: %v", l)
	}
}

func realPath(t *testing.T, p string) string {
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRenderStrictBases: a kustomization that is not strict YAML, at the
// root or in a base, is an error naming the file, since its references
// cannot be checked.
func TestRenderStrictBases(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"kustomization.yaml":      "resources:\n- cm.yaml\n- base\n",
		"cm.yaml":                 "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: local\n",
		"base/kustomization.yaml": "resources:\n- cm.yaml\nresources:\n- https://example.com/cm.yaml\n",
	})
	_, err := Render(dir, RenderOptions{})
	if err == nil || !strings.Contains(err.Error(), filepath.Join("base", "kustomization.yaml")) || !strings.Contains(err.Error(), "set twice") {
		t.Fatalf("error = %v, want one naming base/kustomization.yaml and the key set twice", err)
	}
}

// TestRenderRemoteOptIn: with AllowRemote an HTTP file is fetched, once and
// within the limits; a larger or slower one fails with its URL.
func TestRenderRemoteOptIn(t *testing.T) {
	srv, hits := countingServer(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"kustomization.yaml": "namePrefix: p-\nresources:\n- local.yaml\n- base\n" +
			"configMapGenerator:\n- name: gen\n  options: {disableNameSuffixHash: true}\n  files:\n  - got.yaml=" + srv.URL + "/cm.yaml\n",
		"local.yaml":              "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: local\n",
		"base/kustomization.yaml": "resources:\n- " + srv.URL + "/cm.yaml\n",
	})
	y, err := Render(dir, RenderOptions{AllowRemote: true, Fetch: DefaultFetchLimits})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Parse([]string{y})
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 3 || objs[1].String() != "ConfigMap p-remote" || objs[2].String() != "ConfigMap p-gen" {
		t.Fatalf("objects = %v, want p-local, p-remote and p-gen", objs)
	}
	if got, _, _ := unstructured.NestedString(objs[2].U.Object, "data", "got.yaml"); got != remoteCM {
		t.Errorf("generated data = %q, want the fetched file", got)
	}
	if n := hits.Load(); n != 2 {
		t.Errorf("the server saw %d requests, want 2", n)
	}
	for file, want := range map[string]string{"big.yaml": "larger than 1024 bytes", "slow.yaml": "deadline exceeded"} {
		writeFiles(t, dir, map[string]string{"kustomization.yaml": "resources:\n- " + srv.URL + "/" + file + "\n"})
		start := time.Now()
		_, err := Render(dir, RenderOptions{AllowRemote: true, Fetch: FetchLimits{Timeout: time.Second, MaxBytes: 1024}})
		var fe *FetchError
		if !errors.As(err, &fe) || fe.URL != srv.URL+"/"+file || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error = %v, want a *FetchError saying %q", file, err, want)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%s: took %s", file, d)
		}
	}
}

// TestRenderGitOptIn: with AllowRemote a git URL is left to kustomize,
// which runs git.
func TestRenderGitOptIn(t *testing.T) {
	gitRan, _ := fakeGit(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"kustomization.yaml": "resources:\n- github.com/org/repo//deploy?ref=v1\n"})
	if _, err := Render(dir, RenderOptions{AllowRemote: true, Fetch: DefaultFetchLimits}); err == nil {
		t.Fatal("the fake git fails, yet the render succeeded")
	}
	if !gitRan() {
		t.Error("git was not run")
	}
}
