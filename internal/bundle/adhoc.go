package bundle

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// AdHoc is a run of one module, as `ansible <Pattern> -m <Module> -a
// <Args>` runs it: the bundle ships it as a one-play playbook
// (adHocPlaybook), so that it runs, reports and is limited, sliced and
// checked exactly as a playbook is.
type AdHoc struct {
	// Module names the module or action (ansible.builtin.command, ping).
	Module string
	// Args is -a's text: key=value pairs or a module's free form, or a
	// JSON object; "" gives the module no arguments.
	Args string
	// Pattern is the host pattern the play targets.
	Pattern string
}

// maxModuleName bounds a module name: no collection or module name comes
// near it, and a YAML parser refuses a mapping key of over 1024 characters.
const maxModuleName = 256

// maxArgKey bounds the keys of JSON object arguments, as maxModuleName
// bounds the module's.
const maxArgKey = 512

var moduleName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

// taskKeywords are the keys a task reads as keywords, not as its module:
// the module of an ad hoc run is its task's key, so a module named so would
// be read as something else (or the task as a block).
var taskKeywords = []string{
	"action", "always", "any_errors_fatal", "args", "async", "become", "become_exe", "become_flags", "become_method",
	"become_user", "block", "changed_when", "check_mode", "collections", "connection", "debugger", "delay",
	"delegate_facts", "delegate_to", "diff", "environment", "failed_when", "ignore_errors", "ignore_unreachable",
	"listen", "local_action", "loop", "loop_control", "module_defaults", "name", "no_log", "notify", "poll", "port",
	"register", "remote_user", "rescue", "retries", "run_once", "tags", "throttle", "timeout", "until", "vars", "when",
}

// ValidateModuleName checks an ad hoc run's module: a module or action
// name, short or fully qualified (namespace.collection.module), that a
// task can name as its action.
func ValidateModuleName(s string) error {
	switch {
	case len(s) > maxModuleName:
		return fmt.Errorf("the module name %.32q... is longer than %d characters", s, maxModuleName)
	case !moduleName.MatchString(s):
		return fmt.Errorf("%q is not a module name: letters, digits and _, not starting with a digit, in dot-separated parts (ping, ansible.builtin.command)", s)
	case slices.Contains(taskKeywords, s) || strings.HasPrefix(s, "with_"):
		return fmt.Errorf("%q is a task keyword, not a module: name the module to run", s)
	case strings.HasSuffix("."+s, ".import_playbook"):
		// As the ansible command refuses it.
		return fmt.Errorf("%q imports a playbook, which an ad hoc run cannot: give the playbook instead", s)
	}
	return nil
}

// ValidateHostPattern checks an ad hoc run's host pattern.
func ValidateHostPattern(s string) error {
	switch {
	case strings.TrimSpace(s) == "":
		return errors.New("the host pattern is empty: give a host, a group, all, or a pattern such as web:&prod")
	case strings.ContainsAny(s, "\n\r\x00"):
		return fmt.Errorf("the host pattern %q holds a line break or a NUL byte, which no pattern can", s)
	case !utf8.ValidString(s):
		return fmt.Errorf("the host pattern %q is not valid UTF-8", s)
	}
	return nil
}

func (a *AdHoc) validate() error {
	if err := ValidateModuleName(a.Module); err != nil {
		return fmt.Errorf("ad hoc: %w", err)
	}
	if err := ValidateHostPattern(a.Pattern); err != nil {
		return fmt.Errorf("ad hoc: %w", err)
	}
	switch {
	case strings.ContainsRune(a.Args, 0):
		return errors.New("ad hoc: the module arguments hold a NUL byte, which no command line can")
	case !utf8.ValidString(a.Args):
		return errors.New("ad hoc: the module arguments are not valid UTF-8")
	}
	if obj, ok := a.jsonArgs(); ok {
		return checkArgKeys(obj)
	}
	return nil
}

// jsonArgs is Args as the ansible command reads -a that starts with "{"
// and ends with "}": a JSON object when it parses as one that is not empty;
// otherwise (a Jinja2 expression, say) it is key=value text. Python's
// json also takes NaN and Infinity, which such an object cannot hold here.
func (a *AdHoc) jsonArgs() (map[string]any, bool) {
	if !strings.HasPrefix(a.Args, "{") || !strings.HasSuffix(a.Args, "}") {
		return nil, false
	}
	dec := json.NewDecoder(strings.NewReader(a.Args))
	dec.UseNumber() // numbers go on as written, for Ansible's JSON parser to read
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil || len(obj) == 0 {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false // data after the object
	}
	return obj, true
}

// checkArgKeys refuses object keys that a YAML parser would not read back
// (see maxArgKey), at any depth.
func checkArgKeys(v any) error {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if len(yamlSafeJSON(mustMarshal(k))) > maxArgKey {
				return fmt.Errorf("ad hoc: the argument key %.32q... is longer than %d characters", k, maxArgKey)
			}
			if err := checkArgKeys(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range v {
			if err := checkArgKeys(e); err != nil {
				return err
			}
		}
	}
	return nil
}

func mustMarshal(v any) []byte {
	j, err := json.Marshal(v)
	if err != nil {
		panic(err) // strings, maps of them and json.Numbers always marshal
	}
	return j
}

// adHocPlay is the play the ansible command builds for an ad hoc run
// (AdHocCLI._play_ds), fields in its order.
type adHocPlay struct {
	Name        string           `json:"name"`
	Hosts       string           `json:"hosts"`
	GatherFacts bool             `json:"gather_facts"`
	Tasks       []map[string]any `json:"tasks"`
}

// playbook is the run as a playbook: one play on Pattern without facts,
// whose one task has Module for its key and Args for its value, as text
// (which Ansible splits into key=value pairs or a free form as -a's),
// as an object when -a would be read as JSON, or null when empty. It is
// JSON, which Ansible reads as such before YAML, escaped so that a YAML
// parser reads it the same: no value can add a key or a task.
func (a *AdHoc) playbook() []byte {
	var args any
	if obj, ok := a.jsonArgs(); ok {
		args = obj
	} else if a.Args != "" {
		args = a.Args
	}
	play := adHocPlay{Name: "kubeplay ad hoc: " + a.Module, Hosts: a.Pattern,
		Tasks: []map[string]any{{"name": a.Module, a.Module: args}}}
	return append(yamlSafeJSON(mustMarshal([]adHocPlay{play})), '\n')
}

// yamlSafeJSON escapes, in JSON that encoding/json wrote, the characters
// that YAML does not allow unescaped in a document (DEL, the C1 controls,
// U+FEFF and the non-characters U+FFFE and U+FFFF). They can only be in
// strings: JSON's syntax is ASCII.
func yamlSafeJSON(j []byte) []byte {
	unsafe := func(r rune) bool { return r >= 0x7f && r <= 0x9f || r == 0xfeff || r == 0xfffe || r == 0xffff }
	if bytes.IndexFunc(j, unsafe) < 0 {
		return j
	}
	var out bytes.Buffer
	for _, r := range string(j) {
		if unsafe(r) {
			fmt.Fprintf(&out, `\u%04x`, r)
		} else {
			out.WriteRune(r)
		}
	}
	return out.Bytes()
}
