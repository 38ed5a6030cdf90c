package bundle

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestStatsCallbackCheckMode runs the stats callback under a real
// ansible-playbook, where the host has one, in check and diff mode: the
// changed task with the size of its diff (its text only with
// KUBEPLAY_CHECK_DIFFS=1), the task with check_mode: false that ran, and
// the command skipped as not checkable. Without --check it reports no
// check.
func TestStatsCallbackCheckMode(t *testing.T) {
	ap, err := exec.LookPath("ansible-playbook")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no ansible-playbook on this host: make setup-quickstart installs ansible-core (tools/testcluster/build.sh)")
		}
		t.Skip("no ansible-playbook on this host; the acceptance tests run the callback in a pod")
	}
	dir := t.TempDir()
	cb := filepath.Join(dir, callbackDir)
	if err := os.MkdirAll(cb, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cb, "kubeplay_stats.py"), statsCallback, 0o644); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "app.conf")
	const secret = "s3cr3t-in-the-old-file"
	if err := os.WriteFile(target, []byte("a=1\nword=old\ntoken="+secret+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	playbook := `- hosts: localhost
  gather_facts: false
  tasks:
    - name: write the config
      ansible.builtin.copy: {dest: "` + target + `", content: "a=1\nword=new\nb=2\n"}
    - name: unchanged
      ansible.builtin.copy: {dest: "` + target + `", content: "word=old\n"}
      check_mode: false
      when: false
    - name: always runs
      ansible.builtin.command: "true"
      check_mode: false
    - name: not checkable
      ansible.builtin.command: "true"
    - name: no_log
      ansible.builtin.copy: {dest: "` + target + `.hidden", content: "hidden=1\n"}
      no_log: true
    - name: no diff
      ansible.builtin.copy: {dest: "` + target + `.nodiff", content: "nodiff=1\n"}
      diff: false
`
	if err := os.WriteFile(filepath.Join(dir, "play.yml"), []byte(playbook), 0o644); err != nil {
		t.Fatal(err)
	}
	var raw []byte // the last run's stats document
	run := func(diffs bool, args ...string) Result {
		t.Helper()
		stats := filepath.Join(dir, "stats.json")
		_ = os.Remove(stats)
		cmd := exec.Command(ap, append([]string{"-i", "localhost,", "-c", "local", "play.yml"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "ANSIBLE_CALLBACK_PLUGINS="+cb, "ANSIBLE_CALLBACKS_ENABLED=kubeplay_stats",
			"KUBEPLAY_STATS_FILE="+stats, "ANSIBLE_NOCOLOR=1", "ANSIBLE_LOCALHOST_WARNING=0", "ANSIBLE_PYTHON_INTERPRETER=auto_silent")
		if diffs {
			cmd.Env = append(cmd.Env, "KUBEPLAY_CHECK_DIFFS=1")
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("ansible-playbook %v: %v\n%s", args, err, out)
		}
		doc, err := os.ReadFile(stats)
		if err != nil {
			t.Fatal(err)
		}
		raw = doc
		r, err := ParseResult("{\"rc\":0,\"oom_kills\":0,\"output_size\":0,\"abandoned\":false}\n" + string(doc))
		if err != nil {
			t.Fatalf("%v: %s", err, doc)
		}
		return r
	}
	// By default the document has the size of each change, not its text.
	r := run(false, "--check", "--diff")
	if r.Check == nil {
		t.Fatal("no check in check mode")
	}
	c := r.Check
	if c.ChangeCount != 4 || len(c.Changes) != 4 || c.NotCheckable != 1 {
		t.Fatalf("check %+v", c)
	}
	for _, leak := range []string{secret, "word=old", "word=new", "b=2"} {
		if strings.Contains(string(raw), leak) {
			t.Errorf("the stats document holds %q without KUBEPLAY_CHECK_DIFFS=1: %s", leak, raw)
		}
	}
	w := c.Changes[0]
	if w.Host != "localhost" || w.Task != "write the config" || !strings.HasSuffix(w.Action, "copy") || w.Ran ||
		w.Diff != "" || w.LinesAdded != 2 || w.LinesRemoved != 2 || w.DiffSize < 20 {
		t.Errorf("first change %+v, want +2 -2 lines, a size and no diff", w)
	}
	if a := c.Changes[1]; a.Task != "always runs" || !a.Ran || a.LinesAdded != 0 || a.LinesRemoved != 0 || a.DiffSize != 0 {
		t.Errorf("second change %+v", a)
	}

	// With KUBEPLAY_CHECK_DIFFS=1 (plan_check_diffs) the text too.
	d := run(true, "--check", "--diff").Check
	if d == nil || len(d.Changes) != 4 {
		t.Fatalf("check %+v", d)
	}
	// no_log and diff: false keep a task's diff out, size and all.
	for _, h := range d.Changes[2:] {
		if h.Diff != "" || h.DiffSize != 0 || h.LinesAdded != 0 || h.LinesRemoved != 0 {
			t.Errorf("task %q: %+v, want no diff and no size", h.Task, h)
		}
	}
	if strings.Contains(string(raw), "hidden=1") || strings.Contains(string(raw), "nodiff=1") {
		t.Errorf("the stats document holds a diff of a task with no_log or diff: false: %s", raw)
	}
	dw := d.Changes[0]
	if !strings.Contains(dw.Diff, "-word=old") || !strings.Contains(dw.Diff, "+word=new") || !strings.Contains(dw.Diff, "-token="+secret) ||
		strings.Contains(dw.Diff, "/.ansible/tmp/") || dw.DiffSize != int64(len([]rune(dw.Diff))) ||
		dw.LinesAdded != w.LinesAdded || dw.LinesRemoved != w.LinesRemoved || dw.DiffSize != w.DiffSize {
		t.Errorf("first change with diffs %+v, without %+v", dw, w)
	}
	if b, _ := os.ReadFile(target); string(b) != "a=1\nword=old\ntoken="+secret+"\n" {
		t.Errorf("check mode changed the file: %q", b)
	}
	if again := run(true, "--check", "--diff"); again.Check == nil || again.Check.Changes[0].Diff != dw.Diff {
		t.Errorf("a second check's diff differs from the first's:\n%s\n%s", dw.Diff, again.Check.Changes[0].Diff)
	}
	if r := run(true); r.Check != nil {
		t.Errorf("a run without --check reported a check: %+v", r.Check)
	}
}

// TestCheckDiffsEnv: a check's script tells the callback whether to keep
// diff text, after the run's own env, which so cannot turn it on.
func TestCheckDiffsEnv(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		check, diffs bool
		want         string
	}{{true, false, "KUBEPLAY_CHECK_DIFFS=0"}, {true, true, "KUBEPLAY_CHECK_DIFFS=1"}, {false, true, ""}} {
		b := Bundle{Playbook: "- hosts: all\n", Check: tc.check, Diff: tc.check, CheckDiffs: tc.diffs,
			Env: map[string]string{"KUBEPLAY_CHECK_DIFFS": "1"}}
		s := b.script("", noDigest)
		own := strings.Index(s, "KUBEPLAY_CHECK_DIFFS=")
		line := s[strings.Index(s, "export ANSIBLE_CALLBACK_PLUGINS="):]
		line = line[:strings.IndexByte(line, '\n')]
		if got := line[strings.LastIndexByte(line, ' ')+1:]; tc.want != "" && got != tc.want || tc.want == "" && strings.HasPrefix(got, "KUBEPLAY_CHECK_DIFFS") {
			t.Errorf("check %v, diffs %v: the callback's env ends with %q, want %q", tc.check, tc.diffs, got, tc.want)
		}
		if own < 0 || own > strings.Index(s, line) {
			t.Errorf("the run's env is not before the callback's:\n%s", s)
		}
	}
}
