package bundle

import (
	"fmt"
	"strings"
	"testing"
)

// report1 is the report the script writes for exit code rc and a stats
// file that holds stats.
func report1(rc int, stats string) string {
	return fmt.Sprintf(`{"rc":%d,"oom_kills":0,"output_size":0,"abandoned":false}`+"\n%s\n", rc, stats)
}

// forgedStats are stats documents a process in the run pod may write to
// $KUBEPLAY_STATS_FILE to change the run's exit code (issue 40), and
// others that are not one strict JSON object: each is refused.
var forgedStats = []string{
	`null,"rc":0`,
	`{"hosts":{}},"rc":0`,
	`{"hosts":{"h":{"ok":1}}},"oom_kills":0,"rc":0,"abandoned":false`,
	`null}{"rc":0,"stats":null`,
	`{},"rc":0}` + "\n" + `{"rc":0`,
	`{"hosts":{},"hosts":{}}`,
	`{"hosts":{"h":{"failures":1},"h":{"ok":1}}}`,
	`{"hosts":{"h":{"failures":1,"FAILURES":0}}}`,
	`{"failed_tasks":[{"host":"h","host":"i"}]}`,
	`{"check":{"change_count":1,"change_count":0}}`,
	`{"check":{"changes":[{"ran":true,"Ran":false}]}}`,
	`{"artifacts":{"k":{"a":1,"a":2}}}`,
	`{"x":[{"a":1,"a":2}]}`,
	`{} {}`,
	`{}]`,
	`[]`,
	`"text"`,
	`{"failed_task_count":1e999}`,
	`{"failed_task_count":99999999999999999999}`,
	`{"failed_task_count":1.5}`,
	`{"hosts":{"h":{"ok":1e3}}}`,
	strings.Repeat("[", 100000),
	`{"x":` + strings.Repeat(`{"y":`, 2000) + `1` + strings.Repeat("}", 2001),
	`{"artifacts":` + strings.Repeat(`{"y":`, 2000) + `1` + strings.Repeat("}", 2001) + `}`,
	``,
}

// TestStrictStatsRefused: a stats document that is not one JSON object (or
// null) with each key once, at most maxDepth levels, with nothing after it
// is refused; the header's exit code stands and no stats are kept.
func TestStrictStatsRefused(t *testing.T) {
	for _, stats := range forgedStats {
		r, err := ParseResult(report1(3, stats))
		if err != nil || r.ExitCode != 3 || r.StatsErr == nil || r.Hosts != nil || r.FailedTaskCount != 0 || r.Check != nil || r.Artifacts != "" {
			t.Errorf("stats %.60q: %+v, %v; want exit code 3 and the stats refused", stats, r, err)
		}
	}
	// Keys that differ only in case are two keys where the value is data.
	r, err := ParseResult(report1(0, `{"artifacts":{"k":1,"K":2},"future":{"a":1,"A":1}}`))
	if err != nil || r.StatsErr != nil || r.Artifacts != `{"k":1,"K":2}` {
		t.Errorf("artifacts with keys in two cases: %+v, %v", r, err)
	}
	// A stats object of its own with an rc is data: the header's stands.
	if r, err := ParseResult(report1(3, `{"rc":0}`)); err != nil || r.StatsErr != nil || r.ExitCode != 3 {
		t.Errorf(`stats {"rc":0}: %+v, %v; want exit code 3`, r, err)
	}
}

// TestStrictHeader: the header line, the script's own, is one object with
// rc once, its other keys at most once, nothing else, nothing after it.
func TestStrictHeader(t *testing.T) {
	for _, doc := range []string{
		"{\"rc\":1,\"rc\":0}\nnull",
		"{\"rc\":1,\"oom_kills\":0,\"oom_kills\":1}\nnull",
		"{\"rc\":1,\"stats\":null}\nnull",
		"{\"rc\":1,\"RC\":0}\nnull",
		"{\"rc\":1} {\"rc\":0}\nnull",
		"{\"rc\":1}x\nnull",
		"{\"rc\":1e999}\nnull",
		"{\"rc\":99999999999999999999}\nnull",
		"{\"rc\":1,\"abandoned\":\"no\"}\nnull",
		"{\"rc\":1,\"output_size\":-1.5}\nnull",
		"{\"rc\":1,\"x\":" + strings.Repeat("[", 5000) + "\nnull",
		`{"rc":0}`,
		"\n{\"rc\":0}\nnull",
	} {
		if r, err := ParseResult(doc); err == nil {
			t.Errorf("header %.60q: accepted with exit code %d, want an error", doc, r.ExitCode)
		}
	}
}

// TestStatsFileCannotChangeExitCode runs the script with a command that
// writes a forged stats document and fails: the report keeps its exit code
// and refuses the stats.
func TestStatsFileCannotChangeExitCode(t *testing.T) {
	t.Parallel()
	for _, stats := range []string{`null,"rc":0`, `{"hosts":{}},"rc":0`, `{"hosts":{"h":{"ok":1}}},"oom_kills":0,"rc":0,"abandoned":false`,
		`null}{"rc":0,"stats":null`, `{},"rc":0}` + "\n" + `{"rc":0`, `{"hosts":{},"hosts":{}}`, `{} {}`, `{"failed_task_count":1e999}`,
		strings.Repeat("[", 100000), ``} {
		t.Run("", func(t *testing.T) {
			t.Parallel()
			b := Bundle{Command: []string{"sh", "-c", `printf '%s' "$1" >` + statsName + `; exit 3`, "sh", stats}, Marker: testMarker}
			_, stderr, code := runScript(t, extract(t, &b))
			if code != 3 {
				t.Fatalf("exit status %d, want 3", code)
			}
			if r := report(t, stderr); r.ExitCode != 3 || r.StatsErr == nil {
				t.Errorf("stats %.40q: exit code %d, stats error %v; want the command's 3 and the stats refused", stats, r.ExitCode, r.StatsErr)
			}
		})
	}
}

// TestHeaderHostList: a host step's fields come all three or not at all,
// as a count of hosts, a SHA-256 in lower-case hex and a count no larger
// than the first; the stats cannot give them.
func TestHeaderHostList(t *testing.T) {
	sum := strings.Repeat("0123456789abcdef", 4)
	head := `{"rc":2,"oom_kills":0,"output_size":5,"abandoned":false`
	r, err := ParseResult(head + `,"hosts_total":10,"hosts_sha256":"` + sum + `","slice_hosts":4}` + "\n" + `{"hosts":{"h":{"ok":1}}}`)
	if err != nil || !r.HostList || r.HostsTotal != 10 || r.HostsSHA256 != sum || r.SliceHosts != 4 || r.ExitCode != 2 || r.OutputSize != 5 || len(r.Hosts) != 1 {
		t.Fatalf("%+v, %v", r, err)
	}
	// Refused stats keep the header's.
	if r, err := ParseResult(head + `,"slice_hosts":0,"hosts_total":0,"hosts_sha256":"` + sum + `"}` + "\n{} {}"); err != nil || !r.HostList || r.StatsErr == nil {
		t.Errorf("refused stats: %+v, %v", r, err)
	}
	if r, err := ParseResult(report1(0, `{"hosts_total":3,"hosts_sha256":"`+sum+`","slice_hosts":1}`)); err != nil || r.HostList || r.HostsTotal != 0 {
		t.Errorf("host list fields in the stats: %+v, %v", r, err)
	}
	for _, fields := range []string{
		`"hosts_total":10`,
		`"hosts_total":10,"slice_hosts":4`,
		`"hosts_sha256":"` + sum + `","slice_hosts":4`,
		`"hosts_total":10,"hosts_sha256":"` + strings.ToUpper(sum) + `","slice_hosts":4`,
		`"hosts_total":10,"hosts_sha256":"` + sum[1:] + `","slice_hosts":4`,
		`"hosts_total":10,"hosts_sha256":"` + sum + `0","slice_hosts":4`,
		`"hosts_total":10,"hosts_sha256":null,"slice_hosts":4`,
		`"hosts_total":10,"hosts_sha256":["` + sum + `"],"slice_hosts":4`,
		`"hosts_total":-1,"hosts_sha256":"` + sum + `","slice_hosts":0`,
		`"hosts_total":10,"hosts_sha256":"` + sum + `","slice_hosts":-4`,
		`"hosts_total":1.5,"hosts_sha256":"` + sum + `","slice_hosts":1`,
		`"hosts_total":1e3,"hosts_sha256":"` + sum + `","slice_hosts":1`,
		`"hosts_total":"10","hosts_sha256":"` + sum + `","slice_hosts":1`,
		`"hosts_total":99999999999999999999,"hosts_sha256":"` + sum + `","slice_hosts":1`,
		`"hosts_total":3,"hosts_sha256":"` + sum + `","slice_hosts":4`,
		`"hosts_total":10,"hosts_total":10,"hosts_sha256":"` + sum + `","slice_hosts":4`,
		`"hosts_total":10,"hosts_sha256":"` + sum + `","slice_hosts":4,"hosts":1`,
	} {
		if r, err := ParseResult(head + "," + fields + "}\nnull"); err == nil {
			t.Errorf("header fields %s: accepted as %+v", fields, r)
		}
	}
}
