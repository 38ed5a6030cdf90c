package bundle

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const testMarker = "\x1ekubeplay-0123abcd "

// TestMain points the script at a worker pid file of the test's own: the
// script, run on this host, must never signal one of its processes.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kubeplay-bundle-test")
	if err != nil {
		panic(err)
	}
	workerPIDFile = filepath.Join(dir, "worker.pid")
	nodeLockFile = filepath.Join(dir, "node.lock")
	containerLog = filepath.Join(dir, "container.log")
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// hostile are values that break naive shell quoting.
var hostile = []string{
	"",
	"plain",
	"it's",
	`"double" and 'single'`,
	"$(touch pwned) `touch pwned` ${HOME}",
	"back\\slash\\",
	"new\nline",
	"tab\tand space  ",
	"; rm -rf / #",
	"'",
	"''",
	"*?[a]",
	"héllo ☃",
	"-n",
}

type entry struct {
	hdr     *tar.Header
	content string
}

func readTar(t *testing.T, r io.Reader) ([]string, map[string]entry) {
	t.Helper()
	var order []string
	all := map[string]entry{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return order, all
		}
		if err != nil {
			t.Fatal(err)
		}
		c, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		order = append(order, h.Name)
		all[h.Name] = entry{h, string(c)}
	}
}

// extract unpacks a bundle into a fresh directory, as the pod's tar does.
func extract(t *testing.T, b *Bundle) string {
	t.Helper()
	var buf bytes.Buffer
	if err := b.Write(&buf); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	order, all := readTar(t, &buf)
	for _, name := range order {
		e := all[name]
		p := filepath.Join(dir, filepath.FromSlash(name))
		if e.hdr.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, os.FileMode(e.hdr.Mode)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(e.content), os.FileMode(e.hdr.Mode)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// runScript runs the bundle extracted in dir as a run does, with extra
// directories first on PATH: its run directory holds dir as its bundle.
// code is the reported exit status.
func runScript(t *testing.T, dir string, path ...string) (stdout, stderr string, code int) {
	t.Helper()
	run := filepath.Join(t.TempDir(), "kubeplay.run")
	if err := os.Mkdir(run, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dir, filepath.Join(run, "b")); err != nil {
		t.Fatal(err)
	}
	start := exec.Command("sh", filepath.Join(run, "b", ScriptName), "start")
	start.Env = append(os.Environ(), "PATH="+strings.Join(append(path, os.Getenv("PATH")), string(filepath.ListSeparator)))
	if out, err := start.CombinedOutput(); err != nil {
		t.Fatalf("start: %v: %s", err, out)
	}
	s := startSession(t, FollowCommand(run, 0), nil, path...)
	r := s.finish()
	return s.output(), s.before.String() + "\n" + testMarker + "\n" + resultDoc(t, run) + testMarker + "\n", r.ExitCode
}

// resultDoc is the report the run in dir wrote.
func resultDoc(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "result"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// report reads the runner's report from its stderr.
func report(t *testing.T, stderr string) Result {
	t.Helper()
	var before strings.Builder
	rs := NewResultStream(testMarker, &before, MaxResultSize)
	_, _ = rs.Write([]byte(stderr))
	r, err := rs.Result()
	if err != nil {
		t.Fatalf("report on stderr %q: %v", stderr, err)
	}
	return r
}

func TestWriteLayout(t *testing.T) {
	b := Bundle{
		Command:    []string{"true"},
		Files:      map[string]string{"z.txt": "z", "a/b/c.txt": "c", "a/d.txt": "d"},
		Kubeconfig: []byte("apiVersion: v1\n"),
		Marker:     testMarker,
	}
	var one, two bytes.Buffer
	if err := b.Write(&one); err != nil {
		t.Fatal(err)
	}
	if err := b.Write(&two); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(one.Bytes(), two.Bytes()) {
		t.Error("the same bundle wrote different bytes")
	}
	order, all := readTar(t, &one)
	want := []string{"a/", "a/b/", "callback_plugins/", "a/b/c.txt", "a/d.txt", "z.txt",
		ScriptName, "inventory", "callback_plugins/kubeplay_stats.py", "kubeconfig"}
	if !slices.Equal(order, want) {
		t.Fatalf("entries\n got %q\nwant %q", order, want)
	}
	modes := map[string]int64{"a/": 0o755, "a/b/c.txt": 0o644, ScriptName: 0o700, "inventory": 0o644, "kubeconfig": 0o600}
	for name, mode := range modes {
		if all[name].hdr.Mode != mode {
			t.Errorf("%s mode %o, want %o", name, all[name].hdr.Mode, mode)
		}
	}
	for _, name := range order {
		h := all[name].hdr
		if !h.ModTime.Equal(time.Unix(0, 0)) {
			t.Errorf("%s mod time %v, want the epoch", name, h.ModTime)
		}
		if isDir := strings.HasSuffix(name, "/"); isDir != (h.Typeflag == tar.TypeDir) {
			t.Errorf("%s type flag %c", name, h.Typeflag)
		}
	}
	if all["inventory"].content != DefaultInventory || all["a/b/c.txt"].content != "c" || all["kubeconfig"].content != "apiVersion: v1\n" {
		t.Errorf("contents: inventory %q c.txt %q", all["inventory"].content, all["a/b/c.txt"].content)
	}
	if all["callback_plugins/kubeplay_stats.py"].content != string(statsCallback) || len(statsCallback) == 0 {
		t.Error("the stats callback is not the embedded one")
	}
	if _, ok := all[PlaybookName]; ok {
		t.Error("command mode shipped a playbook")
	}
}

func TestWriteInventoryName(t *testing.T) {
	cases := []struct{ inventory, name string }{
		{"", "inventory"},
		{"[web]\nhost1\n", "inventory"},
		{"host1\nhost2\n", "inventory"},
		{"all:\n  hosts:\n    h1: {}\n", "inventory.yml"},
		{`{"all": {"hosts": {"h1": {}}}}`, "inventory.yml"},
	}
	for _, c := range cases {
		b := Bundle{Playbook: "- hosts: all\n", Inventory: c.inventory, Marker: testMarker}
		var buf bytes.Buffer
		if err := b.Write(&buf); err != nil {
			t.Fatal(err)
		}
		_, all := readTar(t, &buf)
		e, ok := all[c.name]
		want := c.inventory
		if want == "" {
			want = DefaultInventory
		}
		if !ok || e.content != want {
			t.Errorf("inventory %q: entry %s = %q (present %v)", c.inventory, c.name, e.content, ok)
		}
		if !strings.Contains(all[ScriptName].content, "'-i' '"+c.name+"'") {
			t.Errorf("inventory %q: the script does not pass -i %s", c.inventory, c.name)
		}
	}
}

func TestArgs(t *testing.T) {
	base := func(extra ...string) []string { return append(append([]string{"-i", "inv"}, extra...), PlaybookName) }
	cases := []struct {
		name string
		b    Bundle
		want []string
	}{
		{"nothing", Bundle{}, base()},
		{"extra vars", Bundle{ExtraVars: []byte(`{}`)}, base("-e", "@extra-vars.json")},
		{"secret vars", Bundle{SecretVars: []byte(`{}`)}, base("-e", "@secret-vars.json")},
		{"limit", Bundle{Limit: []string{"web:!db"}}, base("--limit", "web:!db")},
		{"limit patterns joined", Bundle{Limit: []string{"web*", "&staging", "!db1", "~(app|api)\\d+"}},
			base("--limit", "web*,&staging,!db1,~(app|api)\\d+")},
		{"tags", Bundle{Tags: []string{"a"}}, base("--tags", "a")},
		{"tags joined", Bundle{Tags: []string{"a", "b"}}, base("--tags", "a,b")},
		{"skip tags joined", Bundle{SkipTags: []string{"slow", "net"}}, base("--skip-tags", "slow,net")},
		// One argv element each, whatever the shell would make of it.
		{"spaces and metacharacters", Bundle{Tags: []string{"two words", "$(touch pwned)"}},
			base("--tags", "two words,$(touch pwned)")},
		{"empty lists", Bundle{Limit: []string{}, Tags: []string{}, SkipTags: []string{}}, base()},
		{"forks", Bundle{Forks: 20}, base("--forks", "20")},
		{"check", Bundle{Check: true}, base("--check")},
		{"diff", Bundle{Diff: true}, base("--diff")},
		{"verbosity 1", Bundle{Verbosity: 1}, base("-v")},
		{"verbosity capped", Bundle{Verbosity: 9}, base("-vvvvvv")},
		{"negative numbers", Bundle{Verbosity: -1, Forks: -3}, base()},
		{"everything, in order", Bundle{ExtraVars: []byte(`{}`), SecretVars: []byte(`{}`), Limit: []string{"l"}, Tags: []string{"t"}, SkipTags: []string{"s"},
			Forks: 2, Check: true, Diff: true, Verbosity: 3},
			base("-e", "@extra-vars.json", "-e", "@secret-vars.json", "--limit", "l", "--tags", "t", "--skip-tags", "s",
				"--forks", "2", "--check", "--diff", "-vvv")},
	}
	for _, c := range cases {
		if got := c.b.Args("inv"); !slices.Equal(got, c.want) {
			t.Errorf("%s: Args = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestQuoteRoundTrips(t *testing.T) {
	dir := t.TempDir()
	for _, s := range hostile {
		cmd := exec.Command("sh", "-c", "printf %s "+Quote(s))
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil || string(out) != s {
			t.Errorf("Quote(%q) read back as %q (%v)", s, out, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Error("a quoted value ran a command")
	}
}

func TestExportsRoundTrip(t *testing.T) {
	env := map[string]string{}
	var names []string
	for i, v := range hostile {
		n := "V" + string(rune('A'+i))
		env[n] = v
		names = append(names, n)
	}
	ex := exports(env)
	if !strings.HasPrefix(ex, "export VA=''\nexport VB='plain'\n") {
		t.Errorf("exports are not sorted lines: %q", ex)
	}
	dir := t.TempDir()
	// Print each variable behind a NUL so values with newlines stay whole.
	script := ex + "for n in " + strings.Join(names, " ") + `; do eval "printf '%s\\000' \"\$$n\""; done`
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, script)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if !slices.Equal(got, hostile) {
		t.Errorf("exported values read back as\n%q\nwant\n%q", got, hostile)
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Error("an exported value ran a command")
	}
}

// TestScriptCommandMode runs the script: env and secret env reach the
// command unchanged, the secret files are gone while it runs or after, and
// its exit code comes back both as the exit status and in the report.
func TestScriptCommandMode(t *testing.T) {
	env, secret := map[string]string{}, map[string]string{}
	for i, v := range hostile {
		env["PLAIN_"+string(rune('A'+i))] = v
		secret["SECRET_"+string(rune('A'+i))] = v
	}
	const check = `for v in $(env | sed -n 's/^\(PLAIN_[A-Z]*\|SECRET_[A-Z]*\)=.*/\1/p' | sort); do eval "printf '%s=%s\000' \"\$v\" \"\$$v\""; done > vars.out
test -e secret-env && echo secret-env-left
test "$KUBECONFIG" = "$PWD/kubeconfig" && test "$K8S_AUTH_KUBECONFIG" = "$KUBECONFIG" && cat "$KUBECONFIG"
echo "to stderr" >&2
exit 3`
	b := Bundle{
		Command:    []string{"sh", "-c", check, "$(touch pwned)"},
		Env:        env,
		SecretEnv:  secret,
		Kubeconfig: []byte("kubeconfig-content\n"),
		Marker:     testMarker,
	}
	dir := extract(t, &b)
	stdout, stderr, code := runScript(t, dir)
	if code != 3 {
		t.Errorf("exit status %d, want the command's 3 (stderr %q)", code, stderr)
	}
	if r := report(t, stderr); r.ExitCode != 3 || r.Hosts != nil {
		t.Errorf("report %+v, want rc 3 without stats", r)
	}
	if stdout != "kubeconfig-content\nto stderr\n" {
		t.Errorf("stdout %q, want the kubeconfig and the command's stderr (merged into stdout)", stdout)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "vars.out"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00") {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	for k, v := range env {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	for k, v := range secret {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	for _, gone := range []string{secretEnvName, kubeconfig, "pwned"} {
		if _, err := os.Stat(filepath.Join(dir, gone)); err == nil {
			t.Errorf("%s exists after the run", gone)
		}
	}
}

// TestScriptPlaybookMode runs the script with a stand-in ansible-playbook
// that records what it was given and writes stats as the callback would.
func TestScriptPlaybookMode(t *testing.T) {
	bin := t.TempDir()
	fake := `#!/bin/sh
for a in "$@"; do printf '%s\n' "$a"; done > args.out
printf '%s\n' "$ANSIBLE_CALLBACK_PLUGINS" "$ANSIBLE_CALLBACKS_ENABLED" "$KUBEPLAY_STATS_FILE" "$ANSIBLE_NOCOLOR" > env.out
cat secret-vars.json extra-vars.json playbook.yml > files.out
printf '%s' '{"hosts":{"web1":{"ok":3,"changed":1,"unreachable":0,"failures":1,"skipped":2,"rescued":0,"ignored":0}}}' > "$KUBEPLAY_STATS_FILE"
echo "PLAY RECAP"
exit 2
`
	if err := os.WriteFile(filepath.Join(bin, "ansible-playbook"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	b := Bundle{
		Playbook:   "- hosts: all\n",
		ExtraVars:  []byte(`{"a":1}`),
		SecretVars: []byte(`{"token":"s3cr3t"}`),
		Limit:      []string{"it's web", "db"},
		Tags:       []string{"a b", "$(touch pwned)", "`touch pwned`;x"},
		SkipTags:   []string{"'; rm -rf / #"},
		Verbosity:  2, Diff: true,
		Marker: testMarker,
	}
	dir := extract(t, &b)
	stdout, stderr, code := runScript(t, dir, bin)
	if code != 2 || stdout != "PLAY RECAP\n" {
		t.Errorf("exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	r := report(t, stderr)
	if r.ExitCode != 2 || r.Hosts["web1"] != (HostStats{OK: 3, Changed: 1, Failed: 1, Skipped: 2}) {
		t.Errorf("report %+v", r)
	}
	read := func(name string) string {
		c, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(c)
	}
	if got, want := read("args.out"), strings.Join(b.Args("inventory"), "\n")+"\n"; got != want {
		t.Errorf("ansible-playbook got\n%s\nwant\n%s", got, want)
	}
	// Each list is one argv element, joined with commas, that no shell split or ran.
	if args := read("args.out"); !strings.Contains(args, "\n--limit\nit's web,db\n--tags\na b,$(touch pwned),`touch pwned`;x\n--skip-tags\n'; rm -rf / #\n") {
		t.Errorf("ansible-playbook got the lists as\n%s", args)
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Error("a tag ran a command")
	}
	if want := dir + "/callback_plugins\nkubeplay_stats\n" + dir + "/stats.json\n1\n"; read("env.out") != want {
		t.Errorf("ansible environment %q, want %q", read("env.out"), want)
	}
	if read("files.out") != `{"token":"s3cr3t"}{"a":1}- hosts: all`+"\n" {
		t.Errorf("files seen by the playbook %q", read("files.out"))
	}
	if _, err := os.Stat(filepath.Join(dir, secretVars)); err == nil {
		t.Error("the secret vars file is still on disk after the run")
	}
	if _, err := os.Stat(filepath.Join(dir, varsName)); err != nil {
		t.Error("the (non-secret) extra vars file was removed")
	}
}

// TestDeliverUnpacksAndRuns pipes a bundle into DeliverCommand() as the
// exec does: bytes after the bundle reach neither tar nor the playbook.
func TestDeliverUnpacksAndRuns(t *testing.T) {
	b := Bundle{Command: []string{"sh", "-c", `pwd; cat data.txt; cat; echo stdin-was-empty`}, Files: map[string]string{"data.txt": "payload\n"}, Marker: testMarker}
	dir := runDir(t)
	s := deliver(t, dir, &b, 1)
	r := s.finish()
	wd, rest, _ := strings.Cut(s.output(), "\n")
	if wd != filepath.Join(dir, "b") {
		t.Errorf("the run's directory is %q, want %s/b", wd, dir)
	}
	if rest != "payload\nstdin-was-empty\n" || r.ExitCode != 0 {
		t.Errorf("output %q, result %+v", s.output(), r)
	}
}

func TestValidatePathCases(t *testing.T) {
	cases := []struct{ path, want string }{
		{"roles/web/tasks/main.yml", ""},
		{"templates/" + ScriptName, ""},
		{"inventory_vars/x", ""},
		{"", "empty"},
		{"/etc/passwd", "absolute"},
		{"a/../b", "not clean"},
		{"./a", "not clean"},
		{"a/", "not clean"},
		{"..", "leaves the bundle"},
		{"../x", "leaves the bundle"},
		{"a\\b", "backslash"},
		{"a\x00b", "NUL"},
		{ScriptName, "reserved"},
		{"inventory", "reserved"},
		{"inventory.yml", "reserved"},
		{"callback_plugins/evil.py", "reserved"},
		{"stats.json", "reserved"},
		{"kubeconfig", "reserved"},
		{"secret-env", "reserved"},
	}
	for _, c := range cases {
		err := ValidatePath(c.path)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("ValidatePath(%q) = %v, want nil", c.path, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("ValidatePath(%q) = %v, want an error saying %q", c.path, err, c.want)
		}
	}
}

func TestValidateBundle(t *testing.T) {
	ok := Bundle{Playbook: "x", Marker: testMarker}
	if err := ok.Write(io.Discard); err != nil {
		t.Fatalf("a minimal bundle: %v", err)
	}
	cases := []struct {
		name string
		edit func(*Bundle)
		want string
	}{
		{"neither", func(b *Bundle) { b.Playbook = "" }, "exactly one of a playbook and a command"},
		{"marker with a newline", func(b *Bundle) { b.Marker = "a\nb" }, "marker"},
		{"marker with a quote", func(b *Bundle) { b.Marker = "it's" }, "marker"},
		{"bad secret env name", func(b *Bundle) { b.SecretEnv = map[string]string{"A-B": "x"} }, `env: "A-B" is not a valid environment variable name`},
		{"secret vars not an object", func(b *Bundle) { b.SecretVars = []byte(`"s"`) }, "must be a JSON object"},
		{"extra vars not JSON", func(b *Bundle) { b.ExtraVars = []byte(`{a:1}`) }, "must be a JSON object"},
		{"absolute file", func(b *Bundle) { b.Files = map[string]string{"/x": ""} }, "files: "},
	}
	for _, c := range cases {
		b := ok
		c.edit(&b)
		var buf bytes.Buffer
		err := b.Write(&buf)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
		if buf.Len() != 0 {
			t.Errorf("%s: %d bytes written before the error", c.name, buf.Len())
		}
	}
	for _, n := range []string{"A", "_a1", "PATH_2"} {
		if err := ValidateEnvName(n); err != nil {
			t.Errorf("ValidateEnvName(%q) = %v", n, err)
		}
	}
	for _, n := range []string{"", "1A", "A B", "A=B", "Ä"} {
		if err := ValidateEnvName(n); err == nil {
			t.Errorf("ValidateEnvName(%q) = nil", n)
		}
	}
}

func TestParseResultCases(t *testing.T) {
	good := []struct {
		payload string
		rc      int
		hosts   map[string]HostStats
		ooms    int64
	}{
		{"{\"rc\":0}\nnull", 0, nil, 0},
		{"{\"rc\":0}\n{}", 0, nil, 0},
		{"{\"rc\":4}\n" + `{"hosts":{"a":{"ok":1},"b":{"unreachable":1,"rescued":2,"ignored":3}},"extra":true}`, 4,
			map[string]HostStats{"a": {OK: 1}, "b": {Unreachable: 1, Rescued: 2, Ignored: 3}}, 0},
		{" {\"rc\":-1} \n null \n", -1, nil, 0},
		{"{\"rc\":2,\"oom_kills\":1}\nnull", 2, nil, 1},
		{"{\"oom_kills\":-3,\"rc\":0}\nnull", 0, nil, 0}, // a counter reset reads as none
	}
	for _, c := range good {
		r, err := ParseResult(c.payload)
		if err != nil || r.ExitCode != c.rc || len(r.Hosts) != len(c.hosts) || r.OOMKills != c.ooms {
			t.Errorf("ParseResult(%s) = %+v, %v", c.payload, r, err)
			continue
		}
		for h, s := range c.hosts {
			if r.Hosts[h] != s {
				t.Errorf("ParseResult(%s) host %s = %+v, want %+v", c.payload, h, r.Hosts[h], s)
			}
		}
	}
	bad := []struct{ payload, want string }{
		{"null\nnull", "no exit code"},
		{"{\"rc\":null}\nnull", "no exit code"},
		{"{\"oom_kills\":0}\n{\"hosts\":{}}", "no exit code"},
		{"{\"rc\":\"0\"}\nnull", "not JSON"},
		{"{\"rc\":1.5}\nnull", "not JSON"},
		{"{\"rc\":0,\"stats\":{}}\nnull", "not JSON"},
		{"rc=0\nnull", "not JSON"},
	}
	for _, c := range bad {
		if _, err := ParseResult(c.payload); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseResult(%s) = %v, want an error with %q", c.payload, err, c.want)
		}
	}
}

// TestUserSetupHome: a run whose HOME is unset, "/" (a UID with no passwd
// entry) or missing gets one in its directory; a writable HOME stays (root,
// as these tests run, can write to any directory of a writable file system).
func TestUserSetupHome(t *testing.T) {
	writable := t.TempDir()
	for _, tc := range []struct{ name, env, want string }{
		{"unset", "", "RUN/.home"},
		{"root dir", "HOME=/", "RUN/.home"},
		{"missing", "HOME=/nonexistent/kubeplay", "RUN/.home"},
		{"writable", "HOME=" + writable, writable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := t.TempDir()
			cmd := exec.Command("sh", "-c", "set -u\n"+userSetup+`printf %s "$HOME"; [ -w "$HOME" ] || echo " not writable"`)
			cmd.Dir = run
			cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
			if tc.env != "" {
				cmd.Env = append(cmd.Env, tc.env)
			}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if want := strings.Replace(tc.want, "RUN", run, 1); string(out) != want {
				t.Errorf("HOME = %q, want %q", out, want)
			}
		})
	}
}
