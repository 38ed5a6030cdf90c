package bundle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/outputtail"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podexec"
)

const marker = "\x1ekubeplay-test-7f3a "

// TestAccBundleRunsInPod ships bundles into a real pod of the test image over
// exec stdin and checks what the runner reports: exit codes, the play recap
// read from the stats callback, secrets delivered only through the stream and
// redacted from the output.
func TestAccBundleRunsInPod(t *testing.T) {
	cfg, kube := acctest.Clients(t)
	acctest.Parallel(t)
	// 30 minutes: on a slower 2-core machine under make test-all's load the
	// run of 400 hosts the test had then took 1,150 s alone.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	ns := acctest.Namespace(t, kube, "kp-bundle")
	pod, err := acctest.StartPod(ctx, kube, ns, "bundle", acctest.TestImage())
	if err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, b bundle.Bundle, secrets ...string) (bundle.Result, string) {
		t.Helper()
		b.Marker = marker
		out := outputtail.New(outputtail.Options{Limit: 64 << 10, Secrets: secrets})
		errs := outputtail.New(outputtail.Options{Limit: 4 << 10})
		results := bundle.NewResultStream(marker, errs, bundle.MaxResultSize)
		var in bytes.Buffer
		if err := b.Write(&in); err != nil {
			t.Fatal(err)
		}
		// stdin: the bundle, a beat every BeatInterval (the watchdog ends a
		// run without beats after the grace, and a loaded machine can take
		// longer than that for 400 hosts), and once the whole result has
		// come, "done", as the runner sends them.
		pr, pw := io.Pipe()
		go func() {
			_, _ = pw.Write(in.Bytes())
			tick := time.NewTicker(bundle.BeatInterval)
			defer tick.Stop()
			for seq := uint64(1); ; seq++ {
				if _, err := io.WriteString(pw, bundle.Beat(0, seq)); err != nil {
					return
				}
				select {
				case <-tick.C:
					continue
				case <-results.Done():
				}
				break
			}
			_, _ = io.WriteString(pw, bundle.DoneLine)
			_ = pw.Close()
		}()
		dir := bundle.RunDir(strconv.FormatInt(time.Now().UnixNano(), 36))
		_, err := podexec.Run(ctx, cfg, kube, ns, pod, "worker", bundle.DeliverCommand(dir, int64(in.Len()), 1), pr, out, results)
		_ = pr.Close()
		_ = out.Close()
		_ = errs.Close()
		if err != nil {
			t.Fatalf("exec: %v", err)
		}
		res, err := results.Result()
		if err != nil {
			t.Fatalf("%v (stderr %q, output %q)", err, errs.String(), out.String())
		}
		return res, out.String()
	}

	t.Run("two tasks with secrets", func(t *testing.T) {
		const secretEnv, secretVar = "env-s3cr3t-9f2c", "var-s3cr3t-41d0"
		res, out := run(t, bundle.Bundle{
			Playbook: `- hosts: all
  gather_facts: false
  tasks:
    - name: write
      copy: {dest: "/tmp/out.txt", content: "{{ greeting }} {{ lookup('env', 'API_KEY') }} {{ token }}"}
    - name: show
      debug: {msg: "{{ lookup('file', '/tmp/out.txt') }}"}
`,
			ExtraVars:  []byte(`{"greeting":"hello"}`),
			SecretVars: []byte(`{"token":"` + secretVar + `"}`),
			SecretEnv:  map[string]string{"API_KEY": secretEnv},
		}, secretEnv, secretVar)
		if res.ExitCode != 0 {
			t.Fatalf("rc %d, output:\n%s", res.ExitCode, out)
		}
		h := res.Hosts["localhost"]
		if h.OK != 2 || h.Changed != 1 || h.Failed != 0 {
			t.Fatalf("stats %+v, want ok=2 changed=1 failed=0; output:\n%s", h, out)
		}
		if !strings.Contains(out, "hello "+outputtail.Redacted+" "+outputtail.Redacted) {
			t.Fatalf("the secrets did not reach the playbook, or were not redacted:\n%s", out)
		}
		if strings.Contains(out, secretEnv) || strings.Contains(out, secretVar) {
			t.Fatalf("a secret reached the output:\n%s", out)
		}
	})

	t.Run("failing playbook", func(t *testing.T) {
		res, out := run(t, bundle.Bundle{Playbook: `- hosts: all
  gather_facts: false
  tasks:
    - command: /bin/false
`})
		if res.ExitCode != 2 || res.Hosts["localhost"].Failed != 1 {
			t.Fatalf("rc %d stats %+v, want rc 2 and one failure; output:\n%s", res.ExitCode, res.Hosts, out)
		}
	})

	t.Run("failed tasks and artifacts", func(t *testing.T) {
		res, out := run(t, bundle.Bundle{
			Inventory: "localhost ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n" +
				"ghost ansible_connection=ssh ansible_host=127.0.0.1 ansible_port=1 ansible_ssh_timeout=5\n",
			Playbook: `- hosts: all
  gather_facts: false
  tasks:
    - set_stats: {data: {version: "1.2", list: [1], n: 1, nested: {a: 1}}}
      when: inventory_hostname == 'localhost'
    - set_stats: {data: {list: [2], n: 2, nested: {b: 2}}}
      when: inventory_hostname == 'localhost'
    - set_stats: {data: {version: "1.3"}, aggregate: false}
      when: inventory_hostname == 'localhost'
    - set_stats: {data: {mine: 1}, per_host: true}
    - name: ignored failure
      fail: {msg: not counted}
      ignore_errors: true
      when: inventory_hostname == 'localhost'
    - name: ignored unreachable
      ping:
      ignore_unreachable: true
      when: inventory_hostname == 'ghost'
    - name: unreachable host
      ping:
      when: inventory_hostname == 'ghost'
    - name: break it
      fail: {msg: "a deliberate {{ 'failure' }}"}
`})
		if res.ExitCode == 0 || res.FailedTaskCount != 2 || len(res.FailedTasks) != 2 {
			t.Fatalf("rc %d, %d failed tasks (%+v); output:\n%s", res.ExitCode, res.FailedTaskCount, res.FailedTasks, out)
		}
		unreachable, failed := res.FailedTasks[0], res.FailedTasks[1]
		if unreachable.Host != "ghost" || unreachable.Task != "unreachable host" || !unreachable.Unreachable || unreachable.Message == "" {
			t.Errorf("unreachable task %+v", unreachable)
		}
		if failed != (bundle.FailedTask{Host: "localhost", Task: "break it", Message: "a deliberate failure"}) {
			t.Errorf("failed task %+v", failed)
		}
		// aggregate merges dicts, adds numbers, joins lists; aggregate: false replaces; per_host data are left out.
		if want := `{"list":[1,2],"n":3,"nested":{"a":1,"b":2},"version":"1.3"}`; res.Artifacts != want {
			t.Errorf("artifacts %s, want %s", res.Artifacts, want)
		}
	})

	// The stats of 400 hosts once ended a run as an error: they came in one
	// line, which the output tail cuts at outputtail.DefaultMaxLine. What
	// broke was their size, so 100 hosts with long names make it, at a
	// quarter of the forks (Ansible forks a worker per host and task); the
	// provider's TestAccRun_manyHosts runs 500 through the same runner.
	t.Run("100 hosts with 64 KiB of stats", func(t *testing.T) {
		const n = 100
		var inv strings.Builder
		inv.WriteString("[all]\n")
		name := func(i int) string {
			return fmt.Sprintf("host-%03d.%sexample.com", i, strings.Repeat("long-label.", 60))
		}
		for i := range n {
			inv.WriteString(name(i) + "\n")
		}
		inv.WriteString("[all:vars]\nansible_connection=local\nansible_python_interpreter=/usr/bin/python3\n")
		res, out := run(t, bundle.Bundle{Inventory: inv.String(), Forks: 10,
			Playbook: "- hosts: all\n  gather_facts: false\n  tasks:\n    - debug: {msg: hi}\n"})
		if res.ExitCode != 0 || len(res.Hosts) != n || res.Hosts[name(n-1)].OK != 1 {
			t.Fatalf("rc %d, %d hosts; output tail:\n%s", res.ExitCode, len(res.Hosts), out[max(0, len(out)-2000):])
		}
		stats, err := json.Marshal(res.Hosts)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d hosts' stats: %d bytes", n, len(stats))
		if len(stats) < 4*outputtail.DefaultMaxLine {
			t.Fatalf("the hosts' stats take %d bytes, want at least %d: lengthen the host names in name()",
				len(stats), 4*outputtail.DefaultMaxLine)
		}
	})

	t.Run("command mode keeps its exit code", func(t *testing.T) {
		res, out := run(t, bundle.Bundle{Command: []string{"sh", "-c", "echo from-command; exit 42"}})
		if res.ExitCode != 42 || res.Hosts != nil || !strings.Contains(out, "from-command") {
			t.Fatalf("rc %d hosts %v output %q", res.ExitCode, res.Hosts, out)
		}
	})

	// Issue 40: a task that forges the stats file (and keeps the callback
	// from replacing it) cannot turn the failed playbook into exit code 0.
	t.Run("a forged stats file keeps the exit code", func(t *testing.T) {
		for _, forged := range forgedStats {
			res, out := run(t, bundle.Bundle{Files: map[string]string{"forged.json": forged}, Playbook: forgePlaybook})
			if res.ExitCode != 2 || res.StatsErr == nil || res.Hosts != nil {
				t.Fatalf("stats %s: rc %d, stats error %v, hosts %v; want rc 2 and the stats refused; output:\n%s",
					forged, res.ExitCode, res.StatsErr, res.Hosts, out)
			}
		}
	})
}

// forgedStats are what a process of a run may write to its stats file to
// turn its exit code into 0: the splice of issue 40, and a key twice.
var forgedStats = []string{`null,"rc":0`, `{"hosts":{"localhost":{"failures":1}},"hosts":{"localhost":{"ok":1}}}`}

// forgePlaybook copies forged.json over the stats file, makes the
// callback's temporary file a directory so that it cannot replace it, and
// fails.
const forgePlaybook = `- hosts: all
  gather_facts: false
  tasks:
    - name: forge the stats
      shell: cp "{{ playbook_dir }}/forged.json" "$KUBEPLAY_STATS_FILE" && mkdir "$KUBEPLAY_STATS_FILE.tmp"
    - name: fail
      command: /bin/false
`
