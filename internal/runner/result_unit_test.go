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
		Message: "rejected " + outputtail.Redacted + "\r\n" + outputtail.Redacted + ": no", Unreachable: true}
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
