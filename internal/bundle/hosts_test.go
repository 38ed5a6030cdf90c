package bundle

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testGroup is the slice group of a bundle with testMarker.
var testGroup = (&Bundle{Marker: testMarker}).sliceGroup()

// fakeInventory is what the stand-in ansible lists: hosts for any pattern.
type fakeInventory struct {
	hosts  []string
	header string // replaces the "  hosts (N):" line of hosts
	fail   bool   // listing hosts fails
}

// fakeListing writes stand-ins for ansible and ansible-playbook into a
// directory for PATH, which they record their arguments in: ansible lists
// inv (calls separated by "==="), ansible-playbook keeps the slice's
// inventory source (slice.json) and writes empty stats.
func fakeListing(t *testing.T, inv fakeInventory) string {
	t.Helper()
	bin := t.TempDir()
	write := func(name, content string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(bin, name), []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	lines := func(names []string) string {
		if len(names) == 0 {
			return ""
		}
		return strings.Join(names, "\n") + "\n"
	}
	write("hosts", lines(inv.hosts), 0o644)
	if inv.header != "" {
		write("header", inv.header+"\n", 0o644)
	}
	if inv.fail {
		write("fail", "", 0o644)
	}
	write("ansible", `#!/bin/sh
bin=`+Quote(bin)+`
{ for a; do printf '%s\n' "$a"; done; echo ===; } >>"$bin/ansible.args"
pwd >>"$bin/ansible.pwd"
f=$bin/hosts
[ -e "$bin/fail" ] && { echo 'ERROR! the inventory is broken' >&2; exit 4; }
echo '[WARNING]: a warning on stderr' >&2
if [ -e "$bin/header" ]; then cat "$bin/header"; else printf '  hosts (%d):\n' "$(grep -c '' "$f")"; fi
sed 's/^/    /' "$f"
`, 0o755)
	write("ansible-playbook", `#!/bin/sh
bin=`+Quote(bin)+`
for a; do printf '%s\n' "$a"; done >"$bin/playbook.args"
pwd >"$bin/playbook.pwd"
for a; do case $a in *`+sliceInventory+`) cp "$a" "$bin/slice.json" ;; esac; done
printf '{"hosts":{}}' >"$KUBEPLAY_STATS_FILE"
echo PLAYBOOK RAN
`, 0o755)
	return bin
}

// readIn reads a file of dir; "" when there is none.
func readIn(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// sliceHosts reads the slice's inventory source that the playbook got:
// the hosts of its one group, with no vars.
func sliceHosts(t *testing.T, bin string) []string {
	t.Helper()
	var doc map[string]map[string]map[string]any
	raw := readIn(t, bin, "slice.json")
	if err := json.Unmarshal([]byte(raw), &doc); err != nil || len(doc) != 1 || len(doc[testGroup]) != 1 {
		t.Fatalf("the slice's inventory source is not one group of hosts (%v):\n%s", err, raw)
	}
	for h, v := range doc[testGroup]["hosts"] {
		if v != nil {
			t.Errorf("host %q has vars %v in the slice's inventory source", h, v)
		}
	}
	return slices.Sorted(maps.Keys(doc[testGroup]["hosts"]))
}

// hostsDigest is the digest of the sorted host list, as the step makes it.
func hostsDigest(names []string) string {
	s := slices.Sorted(slices.Values(names))
	sum := sha256.Sum256([]byte(strings.Join(s, "\n") + "\n"))
	if len(s) == 0 {
		sum = sha256.Sum256(nil)
	}
	return hex.EncodeToString(sum[:])
}

// trickyHosts are host names that JSON must escape or a shell could
// misread, in no order.
var trickyHosts = []string{"web-01", `db "primary"`, `back\slash\`, "héllo ☃", "two words", "it's", "$(touch pwned)",
	"10.0.0.1", "fe80::1", "z*?"}

// hostRun is a run of b with the stand-ins; ran tells whether the playbook ran.
type hostRun struct {
	out    string
	code   int
	res    Result
	ran    bool
	sliced []string
	bin    string
}

func runHostStep(t *testing.T, b Bundle, inv fakeInventory) hostRun {
	t.Helper()
	bin := fakeListing(t, inv)
	if b.Marker == "" {
		b.Marker = testMarker
	}
	if b.Playbook == "" && b.AdHoc == nil {
		b.Playbook = "- hosts: all\n"
	}
	dir := extract(t, &b)
	out, stderr, code := runScript(t, dir, bin)
	r := hostRun{out: out, code: code, res: report(t, stderr), bin: bin}
	if r.res.ExitCode != code {
		t.Errorf("the report's exit code %d is not the script's %d", r.res.ExitCode, code)
	}
	if _, err := os.Stat(filepath.Join(bin, "playbook.args")); err == nil {
		r.ran = true
		r.sliced = sliceHosts(t, bin)
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Error("a host name ran a command")
	}
	return r
}

// TestHostStepSlices: 10 hosts in 3 slices are 4, 3 and 3, each host in
// one slice, at the positions p % 3 of the sorted list, whatever order
// the inventory lists them in; each slice's playbook gets an inventory
// source with exactly its hosts (names escaped), --limit to their group,
// and the report says how many hosts there were and their digest.
func TestHostStepSlices(t *testing.T) {
	t.Parallel()
	sorted := slices.Sorted(slices.Values(trickyHosts))
	digest := hostsDigest(trickyHosts)
	var got [3][]string
	for i := range 3 {
		t.Run(strconv.Itoa(i+1), func(t *testing.T) {
			b := Bundle{Slice: i + 1, Slices: 3, Limit: []string{"web:db"}, Vault: map[string]string{"default": "pw"}, Tags: []string{"t"}}
			r := runHostStep(t, b, fakeInventory{hosts: trickyHosts})
			var want []string
			for p, h := range sorted {
				if p%3 == i {
					want = append(want, h)
				}
			}
			slices.Sort(want)
			if r.code != 0 || !r.ran || !slices.Equal(r.sliced, want) {
				t.Fatalf("exit %d, ran %v, hosts %q; want %q\noutput %q", r.code, r.ran, r.sliced, want, r.out)
			}
			got[i] = r.sliced
			line := fmt.Sprintf("kubeplay: slice %d/3: %d of 10 hosts (hosts sha256 %s)\n", i+1, len(want), digest[:12])
			if r.out != line+"PLAYBOOK RAN\n" {
				t.Errorf("output %q, want %q then the playbook's", r.out, line)
			}
			if !r.res.HostList || r.res.HostsTotal != 10 || r.res.HostsSHA256 != digest || r.res.SliceHosts != int64(len(want)) {
				t.Errorf("report: host list %v, %d hosts, sha256 %s, %d in the slice; want 10, %s, %d",
					r.res.HostList, r.res.HostsTotal, r.res.HostsSHA256, r.res.SliceHosts, digest, len(want))
			}
			// The listing has the run's inventory, limit and vault; the
			// playbook is limited to the group: one inventory load each.
			vault := "--vault-id\ndefault@" + vaultDir + "/default\n"
			wantList := "-i\ninventory\n--limit\nweb:db\n" + vault + "--list-hosts\n--\nall\n===\n"
			if args := readIn(t, r.bin, "ansible.args"); args != wantList {
				t.Errorf("ansible got\n%s\nwant\n%s", args, wantList)
			}
			wantPlay := "-i\ninventory\n-i\n" + sliceInventory + "\n" + vault + "--limit\n" + testGroup + "\n--tags\nt\n" + PlaybookName + "\n"
			if args := readIn(t, r.bin, "playbook.args"); args != wantPlay {
				t.Errorf("ansible-playbook got\n%s\nwant\n%s", args, wantPlay)
			}
		})
	}
	t.Cleanup(func() {
		if len(got[0]) != 4 || len(got[1]) != 3 || len(got[2]) != 3 {
			t.Errorf("slices of %d, %d and %d hosts, want 4, 3 and 3", len(got[0]), len(got[1]), len(got[2]))
		}
		if all := slices.Sorted(slices.Values(slices.Concat(got[:]...))); !slices.Equal(all, sorted) {
			t.Errorf("the slices hold %q, want each of %q once", all, sorted)
		}
	})
}

// TestHostStepDeterministic: the inventory's order does not change a
// slice's hosts or the digest.
func TestHostStepDeterministic(t *testing.T) {
	t.Parallel()
	b := Bundle{Slice: 2, Slices: 3}
	one := runHostStep(t, b, fakeInventory{hosts: trickyHosts})
	rev := slices.Clone(trickyHosts)
	slices.Reverse(rev)
	two := runHostStep(t, b, fakeInventory{hosts: rev})
	if !slices.Equal(one.sliced, two.sliced) || one.res.HostsSHA256 != two.res.HostsSHA256 || len(one.sliced) != 3 {
		t.Errorf("slice 2 of the hosts in two orders: %q (%s) and %q (%s)", one.sliced, one.res.HostsSHA256, two.sliced, two.res.HostsSHA256)
	}
}

// TestHostStepOnlyHosts: only the named hosts that the inventory has run,
// whole names only, and sliced as the rest when the run is.
func TestHostStepOnlyHosts(t *testing.T) {
	t.Parallel()
	only := []string{"it's", "web-01", "gone", `db "primary"`, "web", "web-01", "two"}
	digest := hostsDigest(trickyHosts)
	t.Run("whole", func(t *testing.T) {
		t.Parallel()
		r := runHostStep(t, Bundle{OnlyHosts: only}, fakeInventory{hosts: trickyHosts})
		want := []string{`db "primary"`, "it's", "web-01"}
		if r.code != 0 || !slices.Equal(r.sliced, want) {
			t.Fatalf("exit %d, hosts %q; want %q; output %q", r.code, r.sliced, want, r.out)
		}
		if line := "kubeplay: re-running 3 of 10 hosts that failed (hosts sha256 " + digest[:12] + ")\n"; !strings.HasPrefix(r.out, line) {
			t.Errorf("output %q, want it to start with %q", r.out, line)
		}
		if r.res.HostsTotal != 10 || r.res.SliceHosts != 3 || r.res.HostsSHA256 != digest {
			t.Errorf("report %+v", r.res)
		}
	})
	t.Run("sliced", func(t *testing.T) {
		t.Parallel()
		r := runHostStep(t, Bundle{OnlyHosts: only, Slice: 2, Slices: 2}, fakeInventory{hosts: trickyHosts})
		if r.code != 0 || !slices.Equal(r.sliced, []string{"it's"}) {
			t.Fatalf("exit %d, hosts %q; want the second of the 3 to re-run; output %q", r.code, r.sliced, r.out)
		}
		if line := "kubeplay: slice 2/2: 1 of the 3 hosts to re-run, of 10 hosts (hosts sha256 " + digest[:12] + ")\n"; !strings.HasPrefix(r.out, line) {
			t.Errorf("output %q, want it to start with %q", r.out, line)
		}
	})
}

// TestHostStepNoHosts: a slice without hosts, or a re-run of none, says
// so in one line and succeeds without running the playbook.
func TestHostStepNoHosts(t *testing.T) {
	t.Parallel()
	two := []string{"a", "b"}
	for _, c := range []struct {
		name string
		b    Bundle
		line string
	}{
		{"empty slice", Bundle{Slice: 3, Slices: 3}, "kubeplay: slice 3/3 has no hosts, of 2 (hosts sha256 %s): ansible-playbook did not run\n"},
		{"no hosts to re-run", Bundle{OnlyHosts: []string{}}, "kubeplay: none of the hosts to re-run is among the run's 2 hosts (hosts sha256 %s): ansible-playbook did not run\n"},
		{"none of them", Bundle{OnlyHosts: []string{"c"}, Slices: 2, Slice: 1}, "kubeplay: slice 1/2 has none of the 0 hosts to re-run, of 2 hosts (hosts sha256 %s): ansible-playbook did not run\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := runHostStep(t, c.b, fakeInventory{hosts: two})
			if line := fmt.Sprintf(c.line, hostsDigest(two)[:12]); r.code != 0 || r.ran || r.out != line {
				t.Errorf("exit %d, playbook ran %v, output %q; want 0, no playbook, %q", r.code, r.ran, r.out, line)
			}
			if r.res.Hosts != nil || r.res.StatsErr != nil || !r.res.HostList || r.res.HostsTotal != 2 || r.res.SliceHosts != 0 {
				t.Errorf("report %+v", r.res)
			}
		})
	}
}

// TestHostStepRefusals: a host list that cannot be read or sliced as it
// is, or that is not the one the other slices saw, ends the run with its
// exit code and why, before the playbook.
func TestHostStepRefusals(t *testing.T) {
	t.Parallel()
	digest := hostsDigest(trickyHosts)
	other := strings.Repeat("ab", 32)
	for _, c := range []struct {
		name string
		b    Bundle
		inv  fakeInventory
		code int
		says string
	}{
		{"range", Bundle{Slices: 2, Slice: 1}, fakeInventory{hosts: []string{"a", "web[1:3]"}}, ExitHostList,
			"kubeplay: the inventory has a host named 'web[1:3]'"},
		{"control character", Bundle{Slices: 2, Slice: 2}, fakeInventory{hosts: []string{"a", "tab\there", "z"}}, ExitHostList,
			"kubeplay: the inventory has a host named 'tab?here' (control characters shown as ?)"},
		{"port", Bundle{OnlyHosts: []string{"a"}}, fakeInventory{hosts: []string{"a", "db:5432"}}, ExitHostList,
			"kubeplay: the inventory has a host named 'db:5432'"},
		{"empty name", Bundle{Slices: 2, Slice: 1}, fakeInventory{hosts: []string{"a", ""}}, ExitHostList,
			"kubeplay: the inventory has a host named ''"},
		{"listing fails", Bundle{Slices: 2, Slice: 1}, fakeInventory{hosts: trickyHosts, fail: true}, ExitHostList,
			"ERROR! the inventory is broken\nkubeplay: listing the run's hosts (ansible --list-hosts, with the run's inventories and limit) failed with exit code 4"},
		{"count mismatch", Bundle{Slices: 2, Slice: 1}, fakeInventory{hosts: trickyHosts, header: "  hosts (11):"}, ExitHostList,
			"kubeplay: ansible --list-hosts said 11 hosts but listed 10"},
		{"no header", Bundle{Slices: 2, Slice: 1}, fakeInventory{hosts: trickyHosts, header: "hosts:"}, ExitHostList,
			"kubeplay: ansible --list-hosts did not start its output with the line '  hosts (N):'"},
		{"other hosts", Bundle{Slices: 2, Slice: 2, ExpectHostsSHA256: func() string { return other }}, fakeInventory{hosts: trickyHosts}, ExitHostsChanged,
			"kubeplay: the inventory's host list differs from the one the run's other slices saw (10 hosts with sha256 " + digest + " here, sha256 " + other + " there)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := runHostStep(t, c.b, c.inv)
			if r.code != c.code || r.ran || !strings.Contains(r.out, c.says) {
				t.Errorf("exit %d, playbook ran %v, output %q; want exit %d, no playbook, and %q", r.code, r.ran, r.out, c.code, c.says)
			}
			if r.res.Hosts != nil {
				t.Errorf("stats %+v without a playbook", r.res.Hosts)
			}
		})
	}
	t.Run("same hosts", func(t *testing.T) {
		t.Parallel()
		r := runHostStep(t, Bundle{Slices: 2, Slice: 2, ExpectHostsSHA256: func() string { return digest }}, fakeInventory{hosts: trickyHosts})
		if r.code != 0 || !r.ran || len(r.sliced) != 5 {
			t.Errorf("exit %d, ran %v, %d hosts; output %q", r.code, r.ran, len(r.sliced), r.out)
		}
	})
}

// TestHostStepAdHoc: an ad hoc run lists its own pattern's hosts.
func TestHostStepAdHoc(t *testing.T) {
	t.Parallel()
	r := runHostStep(t, Bundle{AdHoc: &AdHoc{Module: "ping", Pattern: "-web"}, Slices: 2, Slice: 1}, fakeInventory{hosts: []string{"w1", "w2"}})
	if r.code != 0 || !slices.Equal(r.sliced, []string{"w1"}) {
		t.Fatalf("exit %d, hosts %q, output %q", r.code, r.sliced, r.out)
	}
	if args := readIn(t, r.bin, "ansible.args"); !strings.HasPrefix(args, "-i\ninventory\n--list-hosts\n--\n-web\n===\n") {
		t.Errorf("ansible got\n%s", args)
	}
}

// TestHostStepProject: with a project, the step runs where the playbook
// does, once the requirements are installed, with the project's
// inventories; the playbook reads the step's source from the bundle.
func TestHostStepProject(t *testing.T) {
	t.Parallel()
	bin := fakeListing(t, fakeInventory{hosts: []string{"web1", "web2", "web3"}})
	galaxy := "#!/bin/sh\necho galaxy >>" + Quote(filepath.Join(bin, "ansible.pwd")) + "\n"
	if err := os.WriteFile(filepath.Join(bin, "ansible-galaxy"), []byte(galaxy), 0o755); err != nil {
		t.Fatal(err)
	}
	b := Bundle{Project: testProject(t), ProjectPlaybook: "site.yml", Inventories: []string{"inv/hosts.ini"},
		Requirements: "roles: []\n", Limit: []string{"web"}, Slice: 2, Slices: 2, Marker: testMarker}
	dir := untar(t, &b)
	out, stderr, code := runScript(t, dir, bin)
	if code != 0 || report(t, stderr).SliceHosts != 1 || !slices.Equal(sliceHosts(t, bin), []string{"web2"}) {
		t.Fatalf("exit %d, output %q", code, out)
	}
	project := filepath.Join(dir, ProjectDir)
	if pwd := readIn(t, bin, "ansible.pwd"); pwd != strings.Repeat("galaxy\n", 4)+project+"\n" {
		t.Errorf("ansible-galaxy and ansible ran in\n%s", pwd)
	}
	if args := readIn(t, bin, "ansible.args"); !strings.HasPrefix(args, "-i\ninv/hosts.ini\n--limit\nweb\n--list-hosts\n--\nall\n===\n") {
		t.Errorf("ansible got\n%s", args)
	}
	if args := readIn(t, bin, "playbook.args"); !strings.HasPrefix(args, "-i\ninv/hosts.ini\n-i\n../"+sliceInventory+"\n--limit\n"+testGroup+"\n") {
		t.Errorf("ansible-playbook got\n%s", args)
	}
}

// TestExpectHostsSHA256 is asked as the bundle is written, never for its
// size, which does not depend on it; it must return a digest or "".
func TestExpectHostsSHA256(t *testing.T) {
	calls := 0
	digest := hostsDigest([]string{"a"})
	b := Bundle{Playbook: "- hosts: all\n", Slices: 2, Slice: 1, Marker: testMarker,
		ExpectHostsSHA256: func() string { calls++; return digest }}
	size, err := b.Size()
	if err != nil || calls != 0 {
		t.Fatalf("Size: %v, %d calls", err, calls)
	}
	var buf bytes.Buffer
	if err := b.Write(&buf); err != nil || calls != 1 || int64(buf.Len()) != size {
		t.Fatalf("Write: %v, %d calls, %d bytes of %d", err, calls, buf.Len(), size)
	}
	if _, all := readTar(t, &buf); !strings.Contains(all[ScriptName].content, digest) {
		t.Error("the script does not expect the digest")
	}
	for _, bad := range []string{"abc", strings.ToUpper(digest), digest + "0"} {
		b.ExpectHostsSHA256 = func() string { return bad }
		if err := b.Write(io.Discard); err == nil || !strings.Contains(err.Error(), "not a SHA-256 digest") {
			t.Errorf("digest %q: %v", bad, err)
		}
	}
}

func TestValidateHostStep(t *testing.T) {
	for _, c := range []struct {
		name string
		b    Bundle
		want string
	}{
		{"slice 0 of 3", Bundle{Slices: 3}, "slice 0 of 3: slices are numbered from 1 to 3"},
		{"slice 4 of 3", Bundle{Slice: 4, Slices: 3}, "slice 4 of 3"},
		{"slice without slices", Bundle{Slice: 2}, "slice 2 of a run that is not sliced"},
		{"negative slice", Bundle{Slice: -1}, "numbered from 1"},
		{"command", Bundle{Playbook: "", Command: []string{"true"}, Slice: 1, Slices: 2}, "a command has none"},
		{"command with only hosts", Bundle{Playbook: "", Command: []string{"true"}, OnlyHosts: []string{}}, "a command has none"},
		{"empty host", Bundle{OnlyHosts: []string{"a", ""}}, "only_hosts: an element is empty"},
		{"newline in a host", Bundle{OnlyHosts: []string{"a\nb"}}, `only_hosts: "a\nb" holds a newline`},
	} {
		b := c.b
		b.Marker = testMarker
		if len(b.Command) == 0 {
			b.Playbook = "- hosts: all\n"
		}
		if err := b.Write(io.Discard); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
	for _, b := range []Bundle{{Slice: 1}, {Slice: 1, Slices: 1}, {Slices: -2}, {Slice: 3, Slices: 3}, {OnlyHosts: []string{" a ", "é"}}} {
		b.Playbook, b.Marker = "- hosts: all\n", testMarker
		if err := b.Write(io.Discard); err != nil {
			t.Errorf("%+v: %v", b, err)
		}
	}
	b := Bundle{Playbook: "- hosts: all\n", Marker: testMarker, OnlyHosts: []string{"b", "a", "b"}}
	var buf bytes.Buffer
	if err := b.Write(&buf); err != nil {
		t.Fatal(err)
	}
	if _, all := readTar(t, &buf); all[onlyHostsName].content != "a\nb\n" {
		t.Errorf("%s holds %q, want the names sorted, once each", onlyHostsName, all[onlyHostsName].content)
	}
	for _, name := range []string{onlyHostsName, sliceInventory, hostsDir + "/x"} {
		if err := ValidatePath(name); err == nil || !strings.Contains(err.Error(), "reserved") {
			t.Errorf("ValidatePath(%q) = %v, want it reserved", name, err)
		}
	}
}

// TestHostStepTenThousand: 10,000 hosts, half of them to re-run, in 4
// slices: the step is linear, so this takes well under a second.
func TestHostStepTenThousand(t *testing.T) {
	t.Parallel()
	var hosts, only []string
	for i := range 10000 {
		hosts = append(hosts, fmt.Sprintf("host-%05d.example.com", (i*7919)%10000))
		if i%2 == 0 {
			only = append(only, fmt.Sprintf("host-%05d.example.com", i))
		}
	}
	start := time.Now()
	r := runHostStep(t, Bundle{OnlyHosts: only, Slice: 4, Slices: 4}, fakeInventory{hosts: hosts})
	t.Logf("the run took %v", time.Since(start))
	if r.code != 0 || len(r.sliced) != 1250 || r.res.HostsTotal != 10000 || r.res.SliceHosts != 1250 || r.res.HostsSHA256 != hostsDigest(hosts) {
		t.Fatalf("exit %d, %d hosts, report %+v, output %.200q", r.code, len(r.sliced), r.res, r.out)
	}
	for _, h := range r.sliced {
		if n, _ := strconv.Atoi(h[5:10]); n%8 != 6 {
			t.Fatalf("host %s is not in the 4th slice of the even hosts", h)
		}
	}
}
