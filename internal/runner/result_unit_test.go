package runner

import (
	"strings"
	"testing"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/outputtail"
)

func TestRedactResult(t *testing.T) {
	const secret = "s3cr3t-value"
	secrets := append(outputtail.SecretValues(`{"token":"`+secret+`","pin":48151623}`), "a\nmulti-line")
	r := bundle.Result{
		FailedTasks: []bundle.FailedTask{{
			Host: "web1", Task: "use " + secret, Message: "rejected " + secret + "\r\nmulti-line: no", Unreachable: true,
		}},
		FailedTaskCount: 7,
		Artifacts:       `{"a<b":"x ` + secret + ` y","n":48151623,"m":48151624,"l":[1,"` + secret + `"],"` + secret + `":true}`,
	}
	tasks, count, artifacts := redactResult(r, secrets)
	want := bundle.FailedTask{Host: "web1", Task: "use " + outputtail.Redacted,
		Message: "rejected " + outputtail.Redacted + "\n" + outputtail.Redacted + ": no", Unreachable: true} // CRLF as LF: sanitized
	if len(tasks) != 1 || tasks[0] != want || count != 7 {
		t.Fatalf("tasks %+v count %d, want %+v", tasks, count, want)
	}
	wantArt := `{"(sensitive value)":true,"a<b":"x (sensitive value) y","l":[1,"(sensitive value)"],"m":48151624,"n":"(sensitive value)"}`
	if artifacts != wantArt {
		t.Fatalf("artifacts\n%s\nwant\n%s", artifacts, wantArt)
	}
	if r.FailedTasks[0].Task != "use "+secret {
		t.Fatal("redaction changed the bundle's result in place")
	}
	if _, _, a := redactResult(bundle.Result{Artifacts: `{"k":"` + secret + `"`}, secrets); strings.Contains(a, secret) {
		t.Fatalf("malformed artifacts kept the secret: %s", a)
	}
	if _, _, a := redactResult(bundle.Result{Artifacts: `{"k":1}`}, nil); a != `{"k":1}` {
		t.Fatalf("no secrets: %s", a)
	}
}

// Finding 10: host_stats keys are redacted as failed_tasks[].host is (two
// hosts that redact alike add up); finding 7: failed tasks and host names
// are sanitized for the terminal.
func TestRedactHostsAndSanitize(t *testing.T) {
	const secret = "s3cr3t-value"
	hosts := map[string]bundle.HostStats{
		"web1": {OK: 1}, "db-" + secret: {OK: 2, Failed: 1}, secret + "-db": {OK: 3}, "\x1b]52;c;ZXZpbA==\x07[red]x": {Changed: 1},
	}
	got := redactHosts(hosts, []string{secret})
	want := map[string]bundle.HostStats{
		"web1": {OK: 1}, "db-" + outputtail.Redacted: {OK: 2, Failed: 1}, outputtail.Redacted + "-db": {OK: 3},
		"␛]52;c;ZXZpbA==␇［red]x": {Changed: 1},
	}
	if len(got) != len(want) {
		t.Fatalf("hosts %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("hosts %v, want %v", got, want)
		}
	}
	if merged := redactHosts(map[string]bundle.HostStats{"a-" + secret: {OK: 1}, "a-" + secret + secret: {OK: 2}},
		[]string{secret}); len(merged) != 1 || merged["a-"+outputtail.Redacted].OK != 3 {
		t.Fatalf("hosts that redact alike: %v", merged)
	}
	tasks, _, _ := redactResult(bundle.Result{FailedTasks: []bundle.FailedTask{{Host: "h\x1b[2J", Task: "[bold]t",
		Message: "m\rfake ok\x1b]52;c;eA==\x07"}}}, []string{secret})
	if w := (bundle.FailedTask{Host: "h␛[2J", Task: "［bold]t", Message: "m␍fake ok␛]52;c;eA==␇"}); tasks[0] != w {
		t.Fatalf("task %+v, want %+v", tasks[0], w)
	}
}

func TestRedactCheck(t *testing.T) {
	const secret = "s3cr3t-value"
	secrets := outputtail.SecretValues(`{"token":"` + secret + `"}`)
	if redactCheck(nil, secrets) != nil {
		t.Fatal("no check became one")
	}
	c := &bundle.Check{ChangeCount: 3, NotCheckable: 1, Changes: []bundle.Change{
		{Host: "web1", Task: "Template " + secret, Action: "template", Diff: "-old\n+token=" + secret + "\n"},
		// A diff cut inside the secret: the cut line goes whole.
		{Host: "web1", Task: "Big", Diff: "+a\n+token=" + secret[:5], DiffSize: 9000},
	}}
	got := redactCheck(c, secrets)
	if got.ChangeCount != 3 || got.NotCheckable != 1 || len(got.Changes) != 2 {
		t.Fatalf("counts: %+v", got)
	}
	if got.Changes[0].Task != "Template "+outputtail.Redacted || got.Changes[0].Diff != "-old\n+token="+outputtail.Redacted+"\n" {
		t.Errorf("first change: %+v", got.Changes[0])
	}
	if got.Changes[1].Diff != "+a\n" || got.Changes[1].DiffSize != 9000 {
		t.Errorf("cut change: %+v", got.Changes[1])
	}
	if c.Changes[0].Diff == got.Changes[0].Diff {
		t.Fatal("redaction changed the bundle's check in place")
	}
}
