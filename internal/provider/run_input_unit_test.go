package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/action"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
)

// Finding 7: the run's diagnostic and the action's progress quote pod
// output, messages and events sanitized.
func TestReportAndProgressSanitize(t *testing.T) {
	hostile := "\x1b]52;c;Y3VybCBldmls\x07 [red]fake[reset] \x1b[2J\rgone"
	res := runner.Result{Status: runner.StatusError, Message: "runner said " + hostile, Events: []string{"Ev: " + hostile},
		Output: "line\n" + hostile + "\n"}
	var diags diag.Diagnostics
	(&runResource{}).report(runModel{IgnoreFailure: types.BoolValue(false)}, res, "Run", "timeouts.create", &diags)
	_, detail := oneDiag(t, diags)
	var sent []string
	p := &progress{send: func(e action.InvokeProgressEvent) { sent = append(sent, e.Message) }}
	p.line(hostile)
	p.event("status: " + hostile)
	p.finish(res, true)
	p.close()
	for _, s := range append(sent, detail) {
		if strings.ContainsAny(s, "\x1b\x07\r") || strings.Contains(s, "[red]") || strings.Contains(s, "[reset]") {
			t.Errorf("unsanitized: %q", s)
		}
	}
	if !strings.Contains(detail, "␛]52;c;Y3VybCBldmls␇ ［red]fake［reset] ␛[2J␍gone") {
		t.Errorf("detail %q", detail)
	}
}

// Finding 10: a write-only secret (or a line of one) of 1 or 2 bytes is
// a validation error at its attribute: it could not be redacted.
func TestShortWriteOnlySecretsRefused(t *testing.T) {
	ctx := context.Background()
	var rs resource.SchemaResponse
	(&runResource{}).Schema(ctx, resource.SchemaRequest{}, &rs)
	str := func(name, v string) diag.Diagnostics {
		var d diag.Diagnostics
		a, ok := rs.Schema.Attributes[name].(schema.StringAttribute)
		if !ok {
			t.Fatalf("%s is not a string attribute", name)
		}
		for _, val := range a.Validators {
			r := &validator.StringResponse{}
			val.ValidateString(ctx, validator.StringRequest{Path: path.Root(name), ConfigValue: types.StringValue(v)}, r)
			d.Append(r.Diagnostics...)
		}
		return d
	}
	mp := func(name, k, v string) diag.Diagnostics {
		var d diag.Diagnostics
		m, _ := types.MapValue(types.StringType, map[string]attr.Value{k: types.StringValue(v)})
		a, ok := rs.Schema.Attributes[name].(schema.MapAttribute)
		if !ok {
			t.Fatalf("%s is not a map attribute", name)
		}
		for _, val := range a.Validators {
			r := &validator.MapResponse{}
			val.ValidateMap(ctx, validator.MapRequest{Path: path.Root(name), ConfigValue: m}, r)
			d.Append(r.Diagnostics...)
		}
		return d
	}
	for _, c := range []struct {
		what  string
		diags diag.Diagnostics
		at    string
	}{
		{"env_wo", mp("env_wo", "TOKEN", "ab"), `env_wo["TOKEN"]`},
		{"env_wo multi-line", mp("env_wo", "KEY", "long enough\nx\n"), `env_wo["KEY"]`},
		{"vault_password_wo", str("vault_password_wo", "pw"), "vault_password_wo"},
		{"vault_passwords_wo", mp("vault_passwords_wo", "ops", "p"), `vault_passwords_wo["ops"]`},
		{"extra_vars_wo", str("extra_vars_wo", `{"token":"long-enough","pin":42}`), "extra_vars_wo"},
	} {
		if len(c.diags) != 1 || c.diags[0].Summary() != "Secret Too Short To Redact" ||
			!strings.Contains(c.diags[0].Detail(), "Use a longer") {
			t.Errorf("%s: %v", c.what, c.diags)
			continue
		}
		if wp, ok := c.diags[0].(diag.DiagnosticWithPath); !ok || wp.Path().String() != c.at {
			t.Errorf("%s: not at %s: %v", c.what, c.at, c.diags)
		}
	}
	for _, ok := range []diag.Diagnostics{
		mp("env_wo", "TOKEN", "abc"), mp("env_wo", "EMPTY", ""), str("vault_password_wo", "pw1"),
		str("extra_vars_wo", `{"token":"abc","pin":481,"on":true,"none":null}`),
	} {
		if len(ok) != 0 {
			t.Errorf("refused: %v", ok)
		}
	}
}

// Finding 9: host_count counts every host of the result, of which
// host_stats holds the ones the runner kept: with record_all_hosts, the
// first of all; by default, the first that failed or were unreachable.
func TestRecordHostCount(t *testing.T) {
	res := runner.Result{Status: runner.StatusFailed, HostCount: 250_000,
		Hosts:       map[string]bundle.HostStats{"a": {OK: 1}, "b": {OK: 1}},
		HostCounts:  bundle.HostCounts{OK: 249_000, Failed: 1000},
		FailedHosts: map[string]bundle.HostStats{"x": {Failed: 1}}}
	var m runModel
	var diags diag.Diagnostics
	(&runResource{}).record(&m, res, &diags)
	if diags.HasError() || m.HostCount.ValueInt64() != 250_000 || len(m.HostStats.Elements()) != 1 ||
		m.HostStats.Elements()["x"] == nil || m.HostCounts.Attributes()["failed"].String() != "1000" {
		t.Fatalf("host_count %v, host_stats %v, host_counts %v, %v", m.HostCount, m.HostStats, m.HostCounts, diags)
	}
	m.RecordAllHosts = types.BoolValue(true)
	(&runResource{}).record(&m, res, &diags)
	if diags.HasError() || len(m.HostStats.Elements()) != 2 {
		t.Fatalf("host_stats %v, %v", m.HostStats, diags)
	}
	res.HostCount = 0 // a runner.Result made without a count
	(&runResource{}).record(&m, res, &diags)
	if m.HostCount.ValueInt64() != 2 {
		t.Fatalf("host_count %v", m.HostCount)
	}
}
