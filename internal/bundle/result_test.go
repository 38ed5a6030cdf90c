package bundle

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// hostsDoc is a result document for n hosts, as the callback writes it.
func hostsDoc(rc, n int) string {
	hosts := map[string]HostStats{}
	for i := range n {
		hosts[fmt.Sprintf("host-%05d.example.com", i)] = HostStats{OK: 1}
	}
	j, _ := json.Marshal(map[string]any{"hosts": hosts})
	return report1(rc, string(j))
}

// stream feeds stderr to a ResultStream in chunks of size k.
func stream(stderr string, k, limit int) (Result, string, error) {
	var before bytes.Buffer
	s := NewResultStream(testMarker, &before, limit)
	for b := []byte(stderr); len(b) > 0; b = b[min(k, len(b)):] {
		if n, err := s.Write(b[:min(k, len(b))]); err != nil || n != min(k, len(b)) {
			panic("short write")
		}
	}
	r, err := s.Result()
	return r, before.String(), err
}

// TestResultStreamManyHosts: 5,000 hosts' stats (about 300 KB on one line,
// far over the output's line cap) come through whole, however the stream
// is split, and what came before the separator is passed on.
func TestResultStreamManyHosts(t *testing.T) {
	doc := hostsDoc(0, 5000)
	stderr := "tar: a warning\n" + "\n" + testMarker + "\n" + doc + "\n"
	for _, k := range []int{1, 7, len(testMarker), 4096, len(stderr)} {
		r, before, err := stream(stderr, k, MaxResultSize)
		if err != nil || r.ExitCode != 0 || len(r.Hosts) != 5000 || r.Hosts["host-04999.example.com"].OK != 1 {
			t.Fatalf("chunks of %d: %d hosts, rc %d, %v", k, len(r.Hosts), r.ExitCode, err)
		}
		if before != "tar: a warning\n" {
			t.Fatalf("chunks of %d: before the separator %q", k, before)
		}
	}
}

func TestResultStreamErrors(t *testing.T) {
	// No separator: all of stderr is passed on, in order.
	if _, before, err := stream("sh: tar: not found\n"+testMarker, 3, 100); !errors.Is(err, ErrNoResult) || before != "sh: tar: not found\n"+testMarker {
		t.Fatalf("no separator: %q, %v", before, err)
	}
	// The marker must be a line of its own: a playbook line holding it is not one.
	if _, _, err := stream("x"+testMarker+"\n{\"rc\":0}\nnull", 5, 100); !errors.Is(err, ErrNoResult) {
		t.Fatalf("marker inside a line: %v", err)
	}
	var tooLarge *ResultTooLargeError
	_, _, err := stream("\n"+testMarker+"\n"+hostsDoc(0, 100), 64, 1000)
	if !errors.As(err, &tooLarge) || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("over the limit: %v", err)
	}
	for _, c := range []struct{ doc, want string }{
		{"{\"rc\":0\nnull", "not JSON"},
		{"{\"rc\":0} {\"rc\":1}\nnull", "data follows"},
		{"{\"oom_kills\":0}\nnull", "no exit code"},
	} {
		if _, _, err := stream("\n"+testMarker+"\n"+c.doc, 10, 1000); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.doc, err, c.want)
		}
	}
}

func TestDecodeResultFailedTasksAndArtifacts(t *testing.T) {
	tasks := make([]FailedTask, 0, MaxFailedTasks+5)
	for i := range MaxFailedTasks + 5 {
		tasks = append(tasks, FailedTask{Host: fmt.Sprint("h", i), Task: "t", Message: strings.Repeat("é", MaxTaskMessage+i)})
	}
	tasks[0].Unreachable = true
	j, _ := json.Marshal(map[string]any{
		"hosts": map[string]any{}, "failed_tasks": tasks, "failed_task_count": 3,
		"artifacts": json.RawMessage(`{ "b": [1, 2],  "a": {"x": "y"} }`),
	})
	r, err := ParseResult(report1(2, string(j)))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.FailedTasks) != MaxFailedTasks || r.FailedTaskCount != int64(MaxFailedTasks+5) {
		t.Fatalf("%d tasks kept, count %d", len(r.FailedTasks), r.FailedTaskCount)
	}
	if !r.FailedTasks[0].Unreachable || r.FailedTasks[1].Unreachable || r.FailedTasks[7].Host != "h7" {
		t.Fatalf("tasks %+v", r.FailedTasks[:2])
	}
	for _, ft := range r.FailedTasks {
		if n := utf8.RuneCountInString(ft.Message); n > MaxTaskMessage || ft.Message != strings.Repeat("é", MaxTaskMessage) && !strings.HasSuffix(ft.Message, "...") {
			t.Fatalf("a message of %d characters: %q", n, ft.Message[:20])
		}
	}
	if r.FailedTasks[0].Message != strings.Repeat("é", MaxTaskMessage) {
		t.Fatal("a message at the limit was cut")
	}
	if r.Artifacts != `{"b":[1,2],"a":{"x":"y"}}` {
		t.Fatalf("artifacts %s", r.Artifacts)
	}
	if r, err := ParseResult(report1(0, `{"artifacts":null}`)); err != nil || r.Artifacts != "" {
		t.Fatalf("null artifacts: %q, %v", r.Artifacts, err)
	}
}

// TestCallbackLimitsMatch: the callback and the parser agree on the bounds.
func TestCallbackLimitsMatch(t *testing.T) {
	for name, want := range map[string]int{"MAX_FAILED_TASKS": MaxFailedTasks, "MAX_MESSAGE": MaxTaskMessage} {
		re := regexp.MustCompile(`(?m)^` + name + ` = (\d+)$`)
		m := re.FindSubmatch(statsCallback)
		if m == nil || string(m[1]) != fmt.Sprint(want) {
			t.Errorf("kubeplay_stats.py sets %s to %q, want %d", name, m, want)
		}
	}
}

// TestScriptReportsOnItsOwnStderr: the script's result follows the playbook
// whatever it prints, on stderr, and the playbook's own stderr goes to
// stdout, so it cannot reach the result channel.
func TestScriptReportsOnItsOwnStderr(t *testing.T) {
	doc := hostsDoc(0, 400)
	stats := strings.TrimSpace(doc[strings.IndexByte(doc, '\n'):])
	b := Bundle{Command: []string{"sh", "-c", `printf '%s' "$1" > stats.json; echo out; echo err >&2; printf 'no newline'; exit 3`, "sh", stats}, Marker: testMarker}
	stdout, stderr, code := runScript(t, extract(t, &b))
	if code != 3 || stdout != "out\nerr\nno newline" {
		t.Fatalf("exit %d, stdout %q", code, stdout)
	}
	r := report(t, stderr)
	if r.ExitCode != 3 || len(r.Hosts) != 400 {
		t.Fatalf("rc %d, %d hosts", r.ExitCode, len(r.Hosts))
	}
}

// FuzzDecodeResult: any stream decodes without a panic, a decoded result
// holds at most MaxFailedTasks tasks of bounded messages, and its exit code
// is the header line's whatever follows it: the stats' bytes, which any
// process of the run may write, never change it.
func FuzzDecodeResult(f *testing.F) {
	f.Add([]byte(hostsDoc(2, 3)), 5)
	f.Add([]byte(report1(0, `{"failed_tasks":[{"host":"a","task":"b","message":"c","unreachable":true}],"failed_task_count":9,"artifacts":{"k":[1,{"x":null}]}}`)), 1)
	f.Add([]byte(report1(1, `{"artifacts":"x"}`)), 100)
	f.Add([]byte("\n"+testMarker+"\n{\"rc\":0}\nnull"), 2)
	f.Add([]byte(report1(1, `{"x":{"y":[{}]},"hosts":null,"failed_tasks":null,"artifacts":null}`)), 3)
	f.Add([]byte("{\"abandoned\":true,\"rc\":0} \n{} "), 4)
	f.Add([]byte(report1(3, `{"hosts":{"a":{"ok":1},"a":{"ok":2}}}`)), 5)
	f.Add([]byte("null\nnull"), 6)
	f.Add([]byte("{\"rc\":0}\n{}{}"), 7)
	for _, stats := range forgedStats {
		f.Add([]byte(report1(3, stats)), 8)
	}
	f.Add([]byte("{\"rc\":1,\"rc\":0}\nnull"), 9)
	sum := strings.Repeat("0123456789abcdef", 4)
	f.Add([]byte(`{"rc":0,"oom_kills":0,"output_size":0,"abandoned":false,"hosts_total":10,"hosts_sha256":"`+sum+`","slice_hosts":4}`+"\nnull\n"), 10)
	f.Add([]byte(`{"rc":0,"hosts_total":1,"slice_hosts":0}`+"\n"+`{"hosts_sha256":"`+sum+`"}`), 11)
	f.Fuzz(func(t *testing.T, doc []byte, k int) {
		k = max(1, k%64+1)
		var before bytes.Buffer
		s := NewResultStream(testMarker, &before, 1<<16)
		for b := doc; len(b) > 0; b = b[min(k, len(b)):] {
			_, _ = s.Write(b[:min(k, len(b))])
		}
		_, _ = s.Result()
		if before.Len() > len(doc) {
			t.Fatalf("passed on %d bytes of %d", before.Len(), len(doc))
		}
		r, err := DecodeResult(bytes.NewReader(doc))
		if err != nil {
			return
		}
		// The header is the first line, one JSON object with rc once: the
		// exit code is its rc.
		line, rest, ok := bytes.Cut(doc, []byte("\n"))
		var header map[string]json.RawMessage
		if !ok || json.Unmarshal(line, &header) != nil || bytes.Count(line, []byte(`"rc"`)) != 1 {
			t.Fatalf("accepted %q, whose first line is not a header with one rc", doc)
		}
		if rc := 0; json.Unmarshal(header["rc"], &rc) != nil || rc != r.ExitCode {
			t.Fatalf("rc %d, header %q", r.ExitCode, line)
		}
		// The host list's fields are the header's, all three, consistent.
		_, hasTotal := header["hosts_total"]
		if r.HostList != hasTotal || r.HostList && (!sha256Hex.MatchString(r.HostsSHA256) || r.SliceHosts < 0 || r.SliceHosts > r.HostsTotal) ||
			!r.HostList && (r.HostsTotal != 0 || r.HostsSHA256 != "" || r.SliceHosts != 0) {
			t.Fatalf("host list %v: %d hosts, sha256 %q, %d in the slice; header %q", r.HostList, r.HostsTotal, r.HostsSHA256, r.SliceHosts, line)
		}
		// Whatever follows has the same exit code, or is refused.
		for _, tail := range [][]byte{[]byte(`,"rc":0}`), []byte("\n{\"rc\":0}\nnull\n")} {
			if r2, err := DecodeResult(bytes.NewReader(append(bytes.Clone(doc), tail...))); err == nil && r2.ExitCode != r.ExitCode {
				t.Fatalf("appending %q changed the exit code from %d to %d", tail, r.ExitCode, r2.ExitCode)
			}
		}
		if r.StatsErr != nil {
			if r.Hosts != nil || r.HostCount != 0 || r.FailedTasks != nil || r.FailedTaskCount != 0 || r.Artifacts != "" || r.Check != nil {
				t.Fatalf("refused stats (%v) left %+v", r.StatsErr, r)
			}
			return
		}
		// Accepted stats are one JSON value: null or an object.
		var stats map[string]json.RawMessage
		if !json.Valid(rest) || json.Unmarshal(rest, &stats) != nil {
			t.Fatalf("accepted stats %q, not a JSON object or null", rest)
		}
		if len(r.FailedTasks) > MaxFailedTasks || r.FailedTaskCount < int64(len(r.FailedTasks)) {
			t.Fatalf("%d tasks, count %d", len(r.FailedTasks), r.FailedTaskCount)
		}
		for _, ft := range r.FailedTasks {
			if utf8.RuneCountInString(ft.Message) > MaxTaskMessage {
				t.Fatalf("a message of %d characters", utf8.RuneCountInString(ft.Message))
			}
		}
		if r.Artifacts != "" && !json.Valid([]byte(r.Artifacts)) {
			t.Fatalf("artifacts %q are not JSON", r.Artifacts)
		}
		if len(r.Hosts) > MaxHosts || int64(len(r.Hosts)) > r.HostCount || len(r.Artifacts) > MaxArtifacts {
			t.Fatalf("%d hosts of %d, %d bytes of artifacts", len(r.Hosts), r.HostCount, len(r.Artifacts))
		}
		c := r.HostCounts
		if c.OK+c.Changed+c.Failed+c.Unreachable != r.HostCount || len(r.FailedHosts) > MaxFailedHosts ||
			int64(len(r.FailedHosts)) > c.Failed+c.Unreachable || c.Rescued > r.HostCount || c.Ignored > r.HostCount {
			t.Fatalf("host counts %+v of %d hosts, %d failed hosts kept", c, r.HostCount, len(r.FailedHosts))
		}
		for h, s := range r.FailedHosts {
			if !s.NotOK() {
				t.Fatalf("failed host %s ended %s", h, s.Outcome())
			}
		}
	})
}

// A host named twice in the stats (JSON leaves its meaning open) refuses
// the stats: counted by its last value, a host that failed, then did not,
// would read as ok.
func TestHostNamedTwiceRefusesStats(t *testing.T) {
	for _, stats := range []string{`{"hosts":{"a":{"ok":1},"a":{"ok":2},"b":{"ok":1}}}`,
		`{"hosts":{"a":{"failures":1,"ignored":1},"a":{"ok":2},"b":{"changed":1}}}`} {
		res, err := DecodeResult(strings.NewReader(report1(2, stats)))
		if err != nil || res.StatsErr == nil || res.ExitCode != 2 || res.Hosts != nil || res.HostCount != 0 {
			t.Errorf("%s: %+v, %v; want rc 2, no hosts, the stats refused", stats, res, err)
		}
	}
}

// TestHostOutcome: a host that failed is failed whatever else it was, one
// that was unreachable (and did not fail) unreachable, then changed, then
// ok; rescued, ignored and skipped tasks do not change that.
func TestHostOutcome(t *testing.T) {
	for _, c := range []struct {
		s     HostStats
		want  string
		notOK bool
	}{
		{HostStats{}, OutcomeOK, false},
		{HostStats{OK: 3, Skipped: 2, Rescued: 1, Ignored: 1}, OutcomeOK, false},
		{HostStats{OK: 3, Changed: 1, Rescued: 1}, OutcomeChanged, false},
		{HostStats{OK: 3, Changed: 1, Unreachable: 1}, OutcomeUnreachable, true},
		{HostStats{Unreachable: 1, Failed: 1}, OutcomeFailed, true},
		{HostStats{OK: 5, Changed: 2, Failed: 1, Ignored: 3}, OutcomeFailed, true},
	} {
		if got := c.s.Outcome(); got != c.want || c.s.NotOK() != c.notOK {
			t.Errorf("%+v: outcome %s, not ok %v; want %s, %v", c.s, got, c.s.NotOK(), c.want, c.notOK)
		}
	}
}

// TestFailedHosts: of the hosts, those that failed or were unreachable, the
// first MaxFailedHosts by name.
func TestFailedHosts(t *testing.T) {
	hosts := map[string]HostStats{"ok": {OK: 1}, "changed": {Changed: 1}, "rescued": {OK: 1, Rescued: 1}}
	for i := range MaxFailedHosts + 50 {
		hosts[fmt.Sprintf("f-%04d", i)] = HostStats{Failed: 1}
		hosts[fmt.Sprintf("u-%04d", i)] = HostStats{Unreachable: 1}
	}
	got := FailedHosts(hosts)
	if len(got) != MaxFailedHosts {
		t.Fatalf("%d failed hosts, want %d", len(got), MaxFailedHosts)
	}
	for h := range got {
		if !strings.HasPrefix(h, "f-") || h >= fmt.Sprintf("f-%04d", MaxFailedHosts) {
			t.Fatalf("kept %s, not among the first %d failed hosts by name", h, MaxFailedHosts)
		}
	}
	if got := FailedHosts(map[string]HostStats{"a": {OK: 1}, "b": {Unreachable: 2}}); len(got) != 1 || got["b"].Unreachable != 2 {
		t.Fatalf("failed hosts %v", got)
	}
	if got := FailedHosts(nil); got == nil || len(got) != 0 {
		t.Fatalf("no hosts: %v", got)
	}
}

// TestDecodeHostCounts: the counts cover every host, those past MaxHosts
// too, and the failed hosts kept are the first by name among all of them,
// not among the MaxHosts that Hosts keeps.
func TestDecodeHostCounts(t *testing.T) {
	hosts := map[string]HostStats{}
	n := MaxHosts + 1000
	for i := range n {
		s := HostStats{OK: 1}
		switch {
		case i%10 == 1:
			s.Changed = 1
		case i%1000 == 2:
			s.Ignored = 1
		case i%1000 == 3: // 5 of them under MaxHosts
			s.Rescued, s.Changed = 1, 1
		}
		hosts[fmt.Sprintf("host-%05d", i)] = s
	}
	// Past the MaxHosts kept: 150 that failed (some of them after rescues
	// elsewhere) and 30 unreachable.
	for i := range 150 {
		hosts[fmt.Sprintf("host-%05d", MaxHosts+i)] = HostStats{OK: 2, Failed: 1, Rescued: int64(i % 2)}
	}
	for i := range 30 {
		hosts[fmt.Sprintf("host-%05d", MaxHosts+500+i)] = HostStats{Unreachable: 1}
	}
	j, _ := json.Marshal(map[string]any{"hosts": hosts})
	res, err := ParseResult(report1(2, string(j)))
	if err != nil {
		t.Fatal(err)
	}
	var want HostCounts
	for _, s := range hosts {
		want.add(s, 1)
	}
	if res.HostCount != int64(n) || res.HostCounts != want || want.Failed != 150 || want.Unreachable != 30 || want.Rescued != 5+75 {
		t.Fatalf("%d hosts, counts %+v, want %d and %+v", res.HostCount, res.HostCounts, n, want)
	}
	if len(res.Hosts) != MaxHosts || len(res.FailedHosts) != MaxFailedHosts {
		t.Fatalf("%d hosts, %d failed hosts kept", len(res.Hosts), len(res.FailedHosts))
	}
	for i := range MaxFailedHosts {
		if s, ok := res.FailedHosts[fmt.Sprintf("host-%05d", MaxHosts+i)]; !ok || s.Failed != 1 || s.OK != 2 {
			t.Fatalf("failed host %d: %+v, %v", MaxHosts+i, s, ok)
		}
	}
}

// resultChunks writes s to a fresh ResultStream in the pieces cuts marks.
func resultChunks(s string, cuts []byte) *ResultStream {
	var before strings.Builder
	rs := NewResultStream(testMarker, &before, MaxResultSize)
	rest := s
	for _, c := range cuts {
		n := min(int(c), len(rest))
		_, _ = rs.Write([]byte(rest[:n]))
		rest = rest[n:]
	}
	_, _ = rs.Write([]byte(rest))
	return rs
}

// FuzzResultStreamEnd: however the stream is cut into writes, a document
// closed by the separator is whole once it has come (Done), and reads as
// the document alone; without the closing separator Done stays open.
func FuzzResultStreamEnd(f *testing.F) {
	f.Add([]byte{1, 5, 30}, "ok: [localhost]\n", `{"rc":2}`)
	f.Add([]byte{40, 3, 1, 1, 1}, "", `{"rc":0}`)
	f.Add([]byte{0, 22, 2}, "line\n", `{"rc":1,"oom_kills":0,"output_size":3,"abandoned":false}`)
	f.Fuzz(func(t *testing.T, cuts []byte, before, doc string) {
		if strings.Contains(before, testMarker) || strings.Contains(doc, "\n") || strings.Contains(doc, testMarker) {
			return
		}
		doc += "\nnull\n" // the header line, then no stats
		want, werr := ParseResult(doc)
		sep := "\n" + testMarker + "\n"
		rs := resultChunks(before+sep+doc+sep, cuts)
		select {
		case <-rs.Done():
		default:
			t.Fatal("a closed document did not signal Done")
		}
		got, err := rs.Result()
		if (err == nil) != (werr == nil) || (err == nil && got.ExitCode != want.ExitCode) || (err == nil && got.HostCount != want.HostCount) {
			t.Fatalf("result %+v, %v; want %+v, %v", got, err, want, werr)
		}
		open := resultChunks(before+sep+doc, cuts)
		select {
		case <-open.Done():
			t.Fatal("Done without the closing separator")
		default:
		}
	})
}
