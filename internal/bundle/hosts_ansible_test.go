package bundle

import (
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// needAnsible skips a test where ansible-core is not installed: the
// acceptance tests run it in a pod.
func needAnsible(t *testing.T) {
	t.Helper()
	for _, cmd := range []string{"ansible", "ansible-playbook"} {
		if _, err := exec.LookPath(cmd); err != nil {
			t.Skipf("no %s on this host (ansible-core is not installed): the real Ansible run is skipped", cmd)
		}
	}
}

// localInventory is a YAML (JSON) inventory of hosts that Ansible runs on
// this host, in groups.
func localInventory(t *testing.T, groups map[string][]string) string {
	t.Helper()
	children := map[string]any{}
	for g, hosts := range groups {
		hs := map[string]any{}
		for _, h := range hosts {
			hs[h] = map[string]string{"ansible_connection": "local", "ansible_python_interpreter": "auto_silent"}
		}
		children[g] = map[string]any{"hosts": hs}
	}
	j, err := json.Marshal(map[string]any{"all": map[string]any{"children": children}})
	if err != nil {
		t.Fatal(err)
	}
	return string(j)
}

// TestHostStepRealAnsible slices 20 hosts (some with names JSON escapes)
// 3 ways under real ansible-core: each slice's stats, from the stats
// callback, are exactly its hosts.
func TestHostStepRealAnsible(t *testing.T) {
	needAnsible(t)
	t.Parallel()
	var names []string
	for i := range 17 {
		names = append(names, fmt.Sprintf("h%02d", i))
	}
	names = append(names, `q"uote`, `back\slash`, "sp ace")
	sorted := slices.Sorted(slices.Values(names))
	inv := localInventory(t, map[string][]string{"web": names[:10], "db": names[10:]})
	got := map[string]int{}
	for i := range 3 {
		b := Bundle{Playbook: "- hosts: all\n  gather_facts: false\n  tasks:\n    - ansible.builtin.debug: {msg: '{{ inventory_hostname }}'}\n",
			Inventory: inv, Slice: i + 1, Slices: 3, Marker: testMarker}
		out, stderr, code := runScript(t, extract(t, &b))
		r := report(t, stderr)
		var want []string
		for p, h := range sorted {
			if p%3 == i {
				want = append(want, h)
			}
		}
		if hosts := slices.Sorted(maps.Keys(r.Hosts)); code != 0 || !slices.Equal(hosts, want) {
			t.Fatalf("slice %d: exit %d, stats of %q, want %q\n%s", i+1, code, hosts, want, out)
		}
		if r.HostsTotal != 20 || r.SliceHosts != int64(len(want)) || r.HostsSHA256 != hostsDigest(names) {
			t.Errorf("slice %d: report %+v", i+1, r)
		}
		if line := fmt.Sprintf("kubeplay: slice %d/3: %d of 20 hosts (hosts sha256 %s)\n", i+1, len(want), r.HostsSHA256[:12]); !strings.HasPrefix(out, line) {
			t.Errorf("slice %d: output starts %.100q, want %q", i+1, out, line)
		}
		for h, s := range r.Hosts {
			got[h]++
			if s.OK != 1 {
				t.Errorf("slice %d: host %q: %+v", i+1, h, s)
			}
		}
	}
	if len(got) != 20 {
		t.Errorf("the slices ran %d hosts, want 20: %v", len(got), got)
	}
}

// TestAdHocRealAnsible runs ad hoc runs under real ansible-core: a command
// on a group's hosts with -a's free form, set_stats with a JSON object,
// and a re-run of some hosts of the pattern.
func TestAdHocRealAnsible(t *testing.T) {
	needAnsible(t)
	t.Parallel()
	web, db := []string{"w1", "w2", "w3"}, []string{"d1", "d2"}
	inv := localInventory(t, map[string][]string{"web": web, "db": db})
	run := func(a AdHoc, only []string) (string, Result) {
		t.Helper()
		b := Bundle{AdHoc: &a, Inventory: inv, OnlyHosts: only, Verbosity: 1, Marker: testMarker}
		out, stderr, code := runScript(t, extract(t, &b))
		r := report(t, stderr)
		if code != 0 || r.ExitCode != 0 {
			t.Fatalf("%+v: exit %d\n%s", a, code, out)
		}
		return out, r
	}
	out, r := run(AdHoc{Module: "ansible.builtin.command", Args: `echo "hi there"`, Pattern: "web"}, nil)
	if hosts := slices.Sorted(maps.Keys(r.Hosts)); !slices.Equal(hosts, web) || r.HostList {
		t.Errorf("stats of %q (host list %v), want %q", hosts, r.HostList, web)
	}
	for h, s := range r.Hosts {
		if s != (HostStats{OK: 1, Changed: 1}) {
			t.Errorf("host %s: %+v", h, s)
		}
	}
	// The minimal callback, as the ansible command prints: each host's
	// result with the module's output.
	if n := strings.Count(out, " | CHANGED | rc=0 >>\nhi there\n"); n != 3 {
		t.Errorf("the command printed hi there %d times, want 3:\n%s", n, out)
	}
	_, r = run(AdHoc{Module: "ansible.builtin.set_stats", Args: `{"data": {"k": "v", "n": 1.5}, "aggregate": false}`, Pattern: "db"}, nil)
	if r.Artifacts != `{"k":"v","n":1.5}` || len(r.Hosts) != 2 {
		t.Errorf("set_stats with JSON arguments: artifacts %s, %d hosts", r.Artifacts, len(r.Hosts))
	}
	_, r = run(AdHoc{Module: "ping", Pattern: "web:db"}, []string{"w2", "d1", "x"})
	if hosts := slices.Sorted(maps.Keys(r.Hosts)); !slices.Equal(hosts, []string{"d1", "w2"}) || r.HostsTotal != 5 || r.SliceHosts != 2 {
		t.Errorf("re-run of w2, d1 and x: stats of %q, report %+v", hosts, r)
	}
}
