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
// changed task with its diff, the task with check_mode: false that ran,
// and the command skipped as not checkable. Without --check it reports no
// check.
func TestStatsCallbackCheckMode(t *testing.T) {
	ap, err := exec.LookPath("ansible-playbook")
	if err != nil {
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
	if err := os.WriteFile(target, []byte("word=old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	playbook := `- hosts: localhost
  gather_facts: false
  tasks:
    - name: write the config
      ansible.builtin.copy: {dest: "` + target + `", content: "word=new\n"}
    - name: unchanged
      ansible.builtin.copy: {dest: "` + target + `", content: "word=old\n"}
      check_mode: false
      when: false
    - name: always runs
      ansible.builtin.command: "true"
      check_mode: false
    - name: not checkable
      ansible.builtin.command: "true"
`
	if err := os.WriteFile(filepath.Join(dir, "play.yml"), []byte(playbook), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) Result {
		t.Helper()
		stats := filepath.Join(dir, "stats.json")
		_ = os.Remove(stats)
		cmd := exec.Command(ap, append([]string{"-i", "localhost,", "-c", "local", "play.yml"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "ANSIBLE_CALLBACK_PLUGINS="+cb, "ANSIBLE_CALLBACKS_ENABLED=kubeplay_stats",
			"KUBEPLAY_STATS_FILE="+stats, "ANSIBLE_NOCOLOR=1", "ANSIBLE_LOCALHOST_WARNING=0", "ANSIBLE_PYTHON_INTERPRETER=auto_silent")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("ansible-playbook %v: %v\n%s", args, err, out)
		}
		doc, err := os.ReadFile(stats)
		if err != nil {
			t.Fatal(err)
		}
		r, err := ParseResult(`{"rc":0,"stats":` + string(doc) + `}`)
		if err != nil {
			t.Fatalf("%v: %s", err, doc)
		}
		return r
	}
	r := run("--check", "--diff")
	if r.Check == nil {
		t.Fatal("no check in check mode")
	}
	c := r.Check
	if c.ChangeCount != 2 || len(c.Changes) != 2 || c.NotCheckable != 1 {
		t.Fatalf("check %+v", c)
	}
	w := c.Changes[0]
	if w.Host != "localhost" || w.Task != "write the config" || !strings.HasSuffix(w.Action, "copy") || w.Ran ||
		!strings.Contains(w.Diff, "-word=old") || !strings.Contains(w.Diff, "+word=new") || strings.Contains(w.Diff, "/.ansible/tmp/") {
		t.Errorf("first change %+v", w)
	}
	if a := c.Changes[1]; a.Task != "always runs" || !a.Ran {
		t.Errorf("second change %+v", a)
	}
	if b, _ := os.ReadFile(target); string(b) != "word=old\n" {
		t.Errorf("check mode changed the file: %q", b)
	}
	if again := run("--check", "--diff"); again.Check == nil || again.Check.Changes[0].Diff != w.Diff {
		t.Errorf("a second check's diff differs from the first's:\n%s\n%s", w.Diff, again.Check.Changes[0].Diff)
	}
	if r := run(); r.Check != nil {
		t.Errorf("a run without --check reported a check: %+v", r.Check)
	}
}
