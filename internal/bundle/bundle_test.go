package bundle

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"
)

func TestWriteContents(t *testing.T) {
	b := Bundle{
		Playbook:   "- hosts: all\n  tasks: []\n",
		Files:      map[string]string{"roles/x/tasks/main.yml": "[]", "templates/a.j2": "a"},
		Inventory:  "all:\n  hosts:\n    localhost: {}\n",
		ExtraVars:  []byte(`{"a":1}`),
		SecretVars: []byte(`{"token":"s3cr3t"}`),
		SecretEnv:  map[string]string{"API_KEY": "it's secret"},
		Limit:      []string{"web"}, Forks: 5, Verbosity: 2, Check: true,
		Marker: "\x1ekubeplay-abc ",
	}
	var buf bytes.Buffer
	if err := b.Write(&buf); err != nil {
		t.Fatal(err)
	}
	got := map[string]*tar.Header{}
	contents := map[string]string{}
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		c, _ := io.ReadAll(tr)
		got[h.Name], contents[h.Name] = h, string(c)
	}
	for _, name := range []string{ScriptName, PlaybookName, "inventory.yml", varsName, secretVars, secretEnvName,
		"callback_plugins/kubeplay_stats.py", "roles/", "roles/x/", "roles/x/tasks/", "roles/x/tasks/main.yml", "templates/a.j2"} {
		if got[name] == nil {
			t.Errorf("missing %s (have %v)", name, keys(got))
		}
	}
	if got[secretVars].Mode != 0o600 || got[secretEnvName].Mode != 0o600 || got[ScriptName].Mode != 0o700 {
		t.Errorf("modes: secrets %o %o, script %o", got[secretVars].Mode, got[secretEnvName].Mode, got[ScriptName].Mode)
	}
	script := contents[ScriptName]
	for _, want := range []string{"'--limit' 'web'", "'--forks' '5'", "'--check'", "'-vv'", "'-e' '@secret-vars.json'", "'-i' 'inventory.yml'"} {
		if !strings.Contains(script, want) {
			t.Errorf("script lacks %s:\n%s", want, script)
		}
	}
	if strings.Contains(script, "s3cr3t") || strings.Contains(script, "it's secret") {
		t.Errorf("a secret is in the script, which is an argv:\n%s", script)
	}
	if contents[secretEnvName] != "export API_KEY='it'\\''s secret'\n" {
		t.Errorf("secret env %q", contents[secretEnvName])
	}
	if out, err := exec.Command("sh", "-n", "-c", script).CombinedOutput(); err != nil {
		t.Errorf("the script does not parse: %v\n%s", err, out)
	}
}

func keys(m map[string]*tar.Header) []string {
	var s []string
	for k := range m {
		s = append(s, k)
	}
	return s
}

func TestValidate(t *testing.T) {
	bad := []Bundle{
		{Marker: "m"},
		{Playbook: "x", Command: []string{"true"}, Marker: "m"},
		{Playbook: "x"},
		{Playbook: "x", Marker: "m", Files: map[string]string{"../x": ""}},
		{Playbook: "x", Marker: "m", Files: map[string]string{ScriptName: ""}},
		{Playbook: "x", Marker: "m", Env: map[string]string{"1A": ""}},
		{Playbook: "x", Marker: "m", ExtraVars: []byte("[1]")},
	}
	for i, b := range bad {
		if err := b.Write(io.Discard); err == nil {
			t.Errorf("case %d: want an error", i)
		}
	}
}

func TestParseResult(t *testing.T) {
	r, err := ParseResult(report1(2, `{"hosts":{"localhost":{"ok":1,"changed":0,"unreachable":0,"failures":1,"skipped":0,"rescued":0,"ignored":0}}}`))
	if err != nil || r.ExitCode != 2 || r.Hosts["localhost"].Failed != 1 || r.Hosts["localhost"].OK != 1 {
		t.Fatalf("%+v %v", r, err)
	}
	if r, err := ParseResult(report1(7, "null")); err != nil || r.ExitCode != 7 || r.Hosts != nil {
		t.Fatalf("command mode: %+v %v", r, err)
	}
	for _, bad := range []string{"", "{}", "{\"rc\":", "[]", "{}\nnull", "{\"rc\":0}"} {
		if _, err := ParseResult(bad); err == nil {
			t.Errorf("ParseResult(%q): want an error", bad)
		}
	}
}

// FuzzValidatePath: an accepted path names a file strictly inside the
// bundle directory, exactly as written (clean), and not one of kubeplay's.
func FuzzValidatePath(f *testing.F) {
	for _, s := range []string{"a", "a/b", "../a", "/a", "a/../..", "a//b", "./a", "kubeplay-run.sh", "x\\y", ".", "a/.", "..."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if ValidatePath(p) != nil {
			return
		}
		joined := path.Join("/bundle", p)
		if !strings.HasPrefix(joined, "/bundle/") || joined != "/bundle/"+p {
			t.Fatalf("%q was accepted but resolves to %q", p, joined)
		}
		if top := strings.SplitN(p, "/", 2)[0]; slices.Contains(reserved, top) {
			t.Fatalf("%q was accepted but replaces kubeplay's %q", p, top)
		}
	})
}

// FuzzParseResult: the parser never panics on what a playbook might print.
func FuzzParseResult(f *testing.F) {
	f.Add(report1(0, `{"hosts":{}}`))
	f.Add("{\"rc\":1}\nnull")
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = ParseResult(s)
	})
}

// FuzzQuote: whatever the value, sh reads it back unchanged.
func FuzzQuote(f *testing.F) {
	for _, s := range []string{"", "a b", "it's", `"$(rm -rf /)"`, "\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.ContainsRune(s, 0) {
			return // argv cannot carry NUL
		}
		out, err := exec.Command("sh", "-c", "printf %s "+Quote(s)).Output()
		if err != nil || string(out) != s {
			t.Fatalf("Quote(%q) read back as %q (%v)", s, out, err)
		}
	})
}
