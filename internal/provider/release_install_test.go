// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"archive/zip"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/dirhash"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalogkey"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

// release is what GoReleaser made of the repository's .goreleaser.yml for
// this machine's platform.
type release struct {
	version  string
	archive  string // the provider's zip
	sums     map[string]string
	manifest string // the name SHA256SUMS and the release give terraform-registry-manifest.json
}

// TestAccRelease_install installs kubeplay the way users do: GoReleaser
// builds the release archives, SHA256SUMS and manifest from the repository's
// .goreleaser.yml, a filesystem mirror holds the packed archive as a registry
// or `terraform providers mirror` serves it, and a plain `terraform init` (then
// `tofu init`) installs it, records its hashes in the lock file, and applies
// and destroys the quickstart.
func TestAccRelease_install(t *testing.T) {
	e := newTestEnv(t)
	root, err := acctest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	rel := buildRelease(t, root)
	t.Logf("release %s: %s (%d bytes)", rel.version, filepath.Base(rel.archive), fileSize(t, rel.archive))

	// SHA256SUMS lists the archive and the manifest (the repository's
	// terraform-registry-manifest.json, which the release uploads under the
	// release's name), with their digests.
	manifestFile := filepath.Join(root, "terraform-registry-manifest.json")
	for name, f := range map[string]string{filepath.Base(rel.archive): rel.archive, rel.manifest: manifestFile} {
		if got, want := sha256File(t, f), rel.sums[name]; got != want {
			t.Fatalf("%s: sha256 %s, SHA256SUMS says %q", name, got, want)
		}
	}
	if len(rel.sums) != 2 {
		t.Fatalf("SHA256SUMS lists %d files, want the archive and the manifest: %v", len(rel.sums), rel.sums)
	}
	// The registry serves the protocol versions the manifest declares: the
	// provider's (terraform-plugin-framework, protocol 6).
	var manifest struct {
		Version  int `json:"version"`
		Metadata struct {
			ProtocolVersions []string `json:"protocol_versions"`
		} `json:"metadata"`
	}
	b, err := os.ReadFile(manifestFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &manifest); err != nil {
		t.Fatalf("terraform-registry-manifest.json: %v", err)
	}
	if manifest.Version != 1 || len(manifest.Metadata.ProtocolVersions) != 1 || manifest.Metadata.ProtocolVersions[0] != "6.0" {
		t.Fatalf("terraform-registry-manifest.json declares %+v, want version 1 and protocol 6.0", manifest)
	}
	checkArchive(t, rel)
	h1, err := dirhash.HashZip(rel.archive, dirhash.Hash1)
	if err != nil {
		t.Fatal(err)
	}

	// The packed layout: HOSTNAME/NAMESPACE/TYPE/terraform-provider-TYPE_VERSION_TARGET.zip,
	// for the host each CLI resolves "kubeplay/kubeplay" to.
	mirror := t.TempDir()
	for _, host := range []string{"registry.terraform.io", "registry.opentofu.org"} {
		dir := filepath.Join(mirror, host, "kubeplay", "kubeplay")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		// A copy of its own per host, as a mirror directory holds it.
		if err := copyFile(rel.archive, filepath.Join(dir, filepath.Base(rel.archive))); err != nil {
			t.Fatal(err)
		}
	}

	terraformBin, _, err := providerCLI(t)
	if err != nil {
		t.Fatal(err)
	}
	clis := []struct{ name, bin, host string }{
		{"terraform", terraformBin, "registry.terraform.io"},
		{"opentofu", openTofu(t, root), "registry.opentofu.org"},
	}
	for _, cli := range clis {
		t.Run(cli.name, func(t *testing.T) {
			installAndApply(t, e, root, cli.bin, cli.host, mirror, rel, h1)
		})
	}
}

// installAndApply copies the quickstart into a directory of its own, pins the
// release's version, runs a plain init with the mirror as the only source of
// kubeplay, checks the lock file, applies and destroys.
func installAndApply(t *testing.T, e *testEnv, root, bin, host, mirror string, rel *release, h1 string) {
	addr := host + "/kubeplay/kubeplay"
	rc := filepath.Join(t.TempDir(), "cli.rc")
	body := fmt.Sprintf("provider_installation {\n  filesystem_mirror {\n    path    = %q\n    include = [%q]\n  }\n  direct {\n    exclude = [%q]\n  }\n}\n",
		mirror, addr, addr)
	if err := os.WriteFile(rc, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, f := range []string{"main.tf", "variables.tf", "site.yml", "inventory.ini"} {
		b, err := os.ReadFile(filepath.Join(root, "examples", "quickstart", f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "main.tf" {
			pinned := strings.Replace(string(b), `source = "kubeplay/kubeplay"`,
				fmt.Sprintf("source  = \"kubeplay/kubeplay\"\n      version = %q", rel.version), 1)
			if pinned == string(b) {
				t.Fatal(`examples/quickstart/main.tf has no source = "kubeplay/kubeplay" to pin`)
			}
			b = []byte(pinned)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	catalog := e.namespace("kp-release-catalog")
	ns := randName("kp-release")
	vars := []string{"-var", "kubeconfig=" + e.kubeconfig, "-var", "catalog_namespace=" + catalog, "-var", "namespace=" + ns}
	run := func(args ...string) string {
		t.Helper()
		cmd := terraformCommand(bin, rc, dir, nil, args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		start := time.Now()
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, out.String())
		}
		t.Logf("%s %s: %s", filepath.Base(bin), args[0], time.Since(start).Round(100*time.Millisecond))
		return out.String()
	}
	destroyed := false
	t.Cleanup(func() {
		if !destroyed {
			_ = terraformCommand(bin, rc, dir, nil, append([]string{"destroy", "-auto-approve", "-input=false", "-no-color"}, vars...)...).Run()
		}
	})

	out := run("init", "-input=false", "-no-color")
	if !strings.Contains(out, "Installing kubeplay/kubeplay v"+rel.version) {
		t.Fatalf("init did not install kubeplay/kubeplay v%s:\n%s", rel.version, out)
	}
	checkLock(t, filepath.Join(dir, ".terraform.lock.hcl"), addr, rel, h1)

	run(append([]string{"apply", "-auto-approve", "-input=false", "-no-color"}, vars...)...)
	if got := catalogObjects(t, e, catalog); len(got) != 3 {
		t.Fatalf("the catalog holds %v after apply, want the quickstart's credential, group and label", got)
	}
	var outputs map[string]struct {
		Value any `json:"value"`
	}
	if err := json.Unmarshal([]byte(run("output", "-json")), &outputs); err != nil {
		t.Fatal(err)
	}
	if got := outputs["status"].Value; got != "successful" {
		t.Fatalf("status %v, want successful; outputs: %v", got, outputs)
	}
	recap := regexp.MustCompile(`^hosts: changed=1, failed=0, ignored=0, ok=0, rescued=0, unreachable=0$`)
	if got, _ := outputs["recap"].Value.(string); !recap.MatchString(got) {
		t.Fatalf("recap %q does not match %s", got, recap)
	}
	// The provider that ran is the release's: its version is the one the
	// archive's ldflags set.
	var version struct {
		Selections map[string]string `json:"provider_selections"`
	}
	if err := json.Unmarshal([]byte(run("version", "-json")), &version); err != nil {
		t.Fatal(err)
	}
	if got := version.Selections[addr]; got != rel.version {
		t.Fatalf("provider selections %v, want %s = %s", version.Selections, addr, rel.version)
	}
	run(append([]string{"destroy", "-auto-approve", "-input=false", "-no-color"}, vars...)...)
	destroyed = true
	// Destroy removed the namespace the group made and the catalog objects.
	switch _, err := e.kube.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{}); {
	case err == nil:
		t.Fatalf("namespace %s, which the quickstart's group made, is left after destroy", ns)
	case !apierrors.IsNotFound(err):
		t.Fatal(err)
	}
	if left := catalogObjects(t, e, catalog); len(left) > 0 {
		t.Fatalf("destroy left catalog objects in %s: %v", catalog, left)
	}
}

// checkLock checks that the lock file holds addr at the release's version,
// with the h1 hash of the archive's contents and, where it records zh hashes
// (archive checksums), those of SHA256SUMS.
func checkLock(t *testing.T, path, addr string, rel *release, h1 string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lock := string(b)
	block := regexp.MustCompile(`(?s)provider "` + regexp.QuoteMeta(addr) + `" \{(.*?)\n\}`).FindStringSubmatch(lock)
	if block == nil {
		t.Fatalf("the lock file has no block for %s:\n%s", addr, lock)
	}
	if !regexp.MustCompile(`\n\s*version\s*=\s*"` + regexp.QuoteMeta(rel.version) + `"\n`).MatchString(block[1]) {
		t.Fatalf("the lock file's %s is not at version %s:\n%s", addr, rel.version, lock)
	}
	hashes := regexp.MustCompile(`"((?:h1|zh):[^"]+)"`).FindAllStringSubmatch(block[1], -1)
	var sawH1 bool
	for _, h := range hashes {
		switch kind, v, _ := strings.Cut(h[1], ":"); kind {
		case "h1":
			if h[1] != h1 {
				t.Fatalf("the lock file's %s is not the archive's contents (%s):\n%s", h[1], h1, lock)
			}
			sawH1 = true
		case "zh":
			if v != rel.sums[filepath.Base(rel.archive)] {
				t.Fatalf("the lock file's %s is not SHA256SUMS' %s:\n%s", h[1], rel.sums[filepath.Base(rel.archive)], lock)
			}
		}
	}
	if !sawH1 {
		t.Fatalf("the lock file records no h1 hash for %s:\n%s", addr, lock)
	}
	t.Logf("lock file: %s %s, hashes %d", addr, rel.version, len(hashes))
}

// buildRelease runs GoReleaser on the repository's .goreleaser.yml with its
// builds narrowed to this machine's platform (the archives, checksums and
// manifest settings as they are), in snapshot mode, unsigned.
func buildRelease(t *testing.T, root string) *release {
	t.Helper()
	goreleaser := makeTool(t, root, "goreleaser", "GORELEASER")
	b, err := os.ReadFile(filepath.Join(root, ".goreleaser.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf(".goreleaser.yml: %v", err)
	}
	builds, _ := cfg["builds"].([]any)
	if len(builds) != 1 {
		t.Fatalf(".goreleaser.yml has %d builds, want 1", len(builds))
	}
	build, _ := builds[0].(map[string]any)
	build["goos"], build["goarch"] = []string{runtime.GOOS}, []string{runtime.GOARCH}
	dist := filepath.Join(t.TempDir(), "dist")
	cfg["dist"] = dist
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(t.TempDir(), "goreleaser.yml")
	if err := os.WriteFile(config, out, 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cmd := exec.Command(goreleaser, "release", "--snapshot", "--clean", "--skip=before,sign", "--config", config)
	cmd.Dir = root
	// As make release-snapshot: GoReleaser leaves the commit out of the
	// version unless `git ls-remote --get-url` answers.
	if remotes, err := exec.Command("git", "-C", root, "remote").Output(); err == nil && len(bytes.TrimSpace(remotes)) == 0 {
		cmd.Env = append(os.Environ(), "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=remote.origin.url", "GIT_CONFIG_VALUE_0="+root)
	}
	if log, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("goreleaser release: %v\n%s", err, log)
	}
	t.Logf("goreleaser release --snapshot (one platform): %s", time.Since(start).Round(100*time.Millisecond))

	var meta struct {
		Version string `json:"version"`
	}
	if b, err = os.ReadFile(filepath.Join(dist, "metadata.json")); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	name := "terraform-provider-kubeplay_" + meta.Version
	rel := &release{
		version:  meta.Version,
		archive:  filepath.Join(dist, name+"_"+runtime.GOOS+"_"+runtime.GOARCH+".zip"),
		manifest: name + "_manifest.json",
		sums:     map[string]string{},
	}
	f, err := os.Open(filepath.Join(dist, name+"_SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		sum, file, ok := strings.Cut(s.Text(), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS: a line not of the form \"<sha256>  <file>\": %q", s.Text())
		}
		rel.sums[file] = sum
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return rel
}

// checkArchive checks that the zip holds the executable
// terraform-provider-kubeplay_v<version> that Terraform's registry protocol
// wants, and the license, beside the documents GoReleaser adds (README.md,
// CHANGELOG.md).
func checkArchive(t *testing.T, rel *release) {
	t.Helper()
	z, err := zip.OpenReader(rel.archive)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	want := "terraform-provider-kubeplay_v" + rel.version
	if runtime.GOOS == "windows" {
		want += ".exe"
	}
	var names []string
	found, license := false, false
	for _, f := range z.File {
		names = append(names, f.Name)
		switch {
		case f.Name == want:
			if f.Mode()&0o111 == 0 {
				t.Fatalf("%s in the archive is not executable: %v", want, f.Mode())
			}
			found = true
		case f.Name == "LICENSE":
			license = true
		case !strings.HasSuffix(f.Name, ".md") || strings.Contains(f.Name, "/"):
			t.Errorf("the archive holds %s, neither the provider, its license nor a document", f.Name)
		}
	}
	if !found || !license {
		t.Fatalf("the archive holds %v, want %s and LICENSE among them", names, want)
	}
}

// makeTool returns the path of a tool the GNUmakefile builds (make TARGET),
// building it when missing: the make target is a no-op when it is built, and
// takes a lock while it builds.
func makeTool(t *testing.T, root, target, variable string) string {
	t.Helper()
	cmd := exec.Command("make", "--no-print-directory", "-s", target, "print-"+variable)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("make %s: %v\n%s%s", target, err, out, stderr)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}

// openTofu returns OpenTofu: $OPENTOFU (make sets it), else the one make
// builds.
func openTofu(t *testing.T, root string) string {
	t.Helper()
	if p := os.Getenv("OPENTOFU"); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return makeTool(t, root, "opentofu", "OPENTOFU")
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// catalogObjects lists the credentials (but for the catalog's key), container
// groups and node labels that catalog holds.
func catalogObjects(t *testing.T, e *testEnv, catalog string) []string {
	t.Helper()
	opts := metav1.ListOptions{LabelSelector: managed.Selector()}
	var left []string
	secrets, err := e.kube.CoreV1().Secrets(catalog).List(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		if s.Name != catalogkey.SecretName {
			left = append(left, "Secret "+s.Name)
		}
	}
	cms, err := e.kube.CoreV1().ConfigMaps(catalog).List(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cms.Items {
		left = append(left, "ConfigMap "+c.Name)
	}
	templates, err := e.kube.CoreV1().PodTemplates(catalog).List(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range templates.Items {
		left = append(left, "PodTemplate "+p.Name)
	}
	return left
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
