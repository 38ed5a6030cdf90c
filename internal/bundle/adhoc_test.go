package bundle

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// parseAdHoc reads a's playbook as YAML: its one play's hosts, gather_facts
// and one task (nil and an error when it is not so).
func parseAdHoc(a *AdHoc) (map[string]any, map[string]any, error) {
	var plays []map[string]any
	if err := yaml.Unmarshal(a.playbook(), &plays); err != nil {
		return nil, nil, err
	}
	if len(plays) != 1 {
		return nil, nil, io.ErrUnexpectedEOF
	}
	tasks, _ := plays[0]["tasks"].([]any)
	if len(tasks) != 1 {
		return nil, nil, io.ErrUnexpectedEOF
	}
	task, _ := tasks[0].(map[string]any)
	return plays[0], task, nil
}

// checkAdHoc checks that a's playbook is one play on a.Pattern without
// facts and one task of a.Module with a.Args: text, an object when -a
// would be read as JSON, or null.
func checkAdHoc(t *testing.T, a *AdHoc) {
	t.Helper()
	play, task, err := parseAdHoc(a)
	if err != nil {
		t.Fatalf("%+v: the playbook %s does not parse as one play of one task: %v", a, a.playbook(), err)
	}
	if len(play) != 4 || play["hosts"] != a.Pattern || play["gather_facts"] != false {
		t.Fatalf("%+v: play %v", a, play)
	}
	if len(task) != 2 || task["name"] != a.Module {
		t.Fatalf("%+v: task %v", a, task)
	}
	args, ok := task[a.Module]
	if !ok {
		t.Fatalf("%+v: the task %v does not run the module", a, task)
	}
	var want any
	if obj, isObj := a.jsonArgs(); isObj {
		// The object as YAML reads its JSON: Ansible reads the playbook as
		// JSON, but a YAML parser may read a number such as 1e400 otherwise.
		if err := yaml.Unmarshal(yamlSafeJSON(mustMarshal(obj)), &want); err != nil {
			t.Fatal(err)
		}
	} else if a.Args != "" {
		want = a.Args
	}
	if !reflect.DeepEqual(args, want) {
		t.Fatalf("%+v: the module gets %#v, want %#v", a, args, want)
	}
}

func TestAdHocPlaybook(t *testing.T) {
	for _, a := range []AdHoc{
		{Module: "ping", Pattern: "all"},
		{Module: "ansible.builtin.command", Args: "echo hi", Pattern: "web"},
		{Module: "ansible.builtin.shell", Args: `echo "$HOME" 'it''s' \n {{ x }}` + "\n\tnext line", Pattern: "web:&prod:!db1"},
		{Module: "copy", Args: `{"dest": "/tmp/x", "content": "a\nb", "mode": 420}`, Pattern: "~(web|db)[0-9]+"},
		{Module: "debug", Args: "{{ a }}", Pattern: "-x"},
		{Module: "debug", Args: "{}", Pattern: "x"},
		{Module: "debug", Args: `{"a": 1} {"b": 2}`, Pattern: "x"},
		{Module: "debug", Args: "msg=\u0085\u007f\ufeff\uffff\u2028<&>\U0001F600", Pattern: "h\u0080\ufffe"},
		{Module: "x", Args: `"]}], "hosts": "all", "x": [{"`, Pattern: `"}], "hosts": "all`},
	} {
		checkAdHoc(t, &a)
	}
	// -a's JSON form: an object, as written; any other text stays text.
	for args, want := range map[string]string{
		`{"a": 1e5, "b": [true, null], "a": "last"}`: `{"a":"last","b":[true,null]}`,
		`{"n": 1.50}`: `{"n":1.50}`,
	} {
		_, task, err := parseAdHoc(&AdHoc{Module: "m", Args: args, Pattern: "p"})
		if j, _ := json.Marshal(task["m"]); err != nil || !json.Valid(j) {
			t.Fatalf("%s: %v", args, err)
		}
		a := AdHoc{Module: "m", Args: args}
		obj, ok := a.jsonArgs()
		if got := mustMarshal(obj); !ok || string(got) != want {
			t.Errorf("%s: the module gets %s, want %s", args, got, want)
		}
	}
	var buf bytes.Buffer
	b := Bundle{AdHoc: &AdHoc{Module: "ping", Pattern: "all"}, Marker: testMarker}
	if err := b.Write(&buf); err != nil {
		t.Fatal(err)
	}
	if _, all := readTar(t, &buf); all[PlaybookName].content != string(b.AdHoc.playbook()) ||
		!strings.Contains(all[ScriptName].content, Quote(PlaybookName)) {
		t.Errorf("the bundle does not run the ad hoc playbook: %q", all[PlaybookName].content)
	}
}

func TestValidateAdHoc(t *testing.T) {
	for _, m := range []string{"ping", "ansible.builtin.command", "_x", "a1.b_2.C3", "include_tasks"} {
		if err := ValidateModuleName(m); err != nil {
			t.Errorf("ValidateModuleName(%q) = %v", m, err)
		}
	}
	for m, want := range map[string]string{
		"": "not a module name", "1x": "not a module name", "a..b": "not a module name", "a.": "not a module name",
		"a b": "not a module name", "a-b": "not a module name", "a.1b": "not a module name", "é": "not a module name",
		"name": "task keyword", "when": "task keyword", "block": "task keyword", "with_items": "task keyword",
		"local_action": "task keyword", "import_playbook": "imports a playbook", "ansible.builtin.import_playbook": "imports a playbook",
		strings.Repeat("a", 257): "longer than 256",
	} {
		if err := ValidateModuleName(m); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateModuleName(%.20q) = %v, want an error with %q", m, err, want)
		}
	}
	for _, p := range []string{"all", "web:&prod", "-x", "h é", "*"} {
		if err := ValidateHostPattern(p); err != nil {
			t.Errorf("ValidateHostPattern(%q) = %v", p, err)
		}
	}
	for p, want := range map[string]string{"": "empty", " \t": "empty", "a\nb": "line break", "a\rb": "line break", "a\x00": "NUL", "\xff": "UTF-8"} {
		if err := ValidateHostPattern(p); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateHostPattern(%q) = %v, want an error with %q", p, err, want)
		}
	}
	ping := AdHoc{Module: "ping", Pattern: "all"}
	for _, c := range []struct {
		name string
		b    Bundle
		want string
	}{
		{"and a playbook", Bundle{AdHoc: &ping, Playbook: "- hosts: all\n"}, "an ad hoc run is its own playbook"},
		{"and a project playbook", Bundle{AdHoc: &ping, ProjectPlaybook: "site.yml"}, "an ad hoc run is its own playbook"},
		{"and a command", Bundle{AdHoc: &ping, Command: []string{"true"}}, "an ad hoc run is its own playbook"},
		{"bad module", Bundle{AdHoc: &AdHoc{Module: "a b", Pattern: "all"}}, `ad hoc: "a b" is not a module name`},
		{"no pattern", Bundle{AdHoc: &AdHoc{Module: "ping"}}, "ad hoc: the host pattern is empty"},
		{"NUL in args", Bundle{AdHoc: &AdHoc{Module: "ping", Args: "a\x00", Pattern: "all"}}, "ad hoc: the module arguments hold a NUL"},
		{"args not UTF-8", Bundle{AdHoc: &AdHoc{Module: "ping", Args: "\xff", Pattern: "all"}}, "not valid UTF-8"},
		{"long argument key", Bundle{AdHoc: &AdHoc{Module: "ping", Args: `{"a": [{"` + strings.Repeat("k", 513) + `": 1}]}`, Pattern: "all"}},
			"longer than 512 characters"},
	} {
		b := c.b
		b.Marker = testMarker
		if err := b.Write(io.Discard); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}

// FuzzAdHocPlaybook: for any module, arguments and pattern that pass
// validation, the playbook parses as YAML to exactly one play on that
// pattern, without facts, with one task of that module and arguments.
func FuzzAdHocPlaybook(f *testing.F) {
	f.Add("ansible.builtin.command", "echo hi", "web")
	f.Add("copy", `{"dest": "/x", "content": "\u0085\"}", "n": 1e400}`, "a:&b")
	f.Add("x", `"]}], "hosts": "all", "x": [{"`, `"}], "hosts": "all`)
	f.Add("debug", "msg='{{ x }}'\n- hosts: all", "*\u2028\u007f")
	f.Add("m", `{"a":{"b":[{"c":"\ud800"}]}}`, "h")
	f.Fuzz(func(t *testing.T, module, args, pattern string) {
		a := AdHoc{Module: module, Args: args, Pattern: pattern}
		if a.validate() != nil {
			return
		}
		checkAdHoc(t, &a)
	})
}
