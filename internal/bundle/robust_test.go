package bundle

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"testing"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/strictyaml"
)

// Regression (issue #11): FuzzValidatePath failed at once on ".", which
// ValidatePath accepted although it names the bundle directory itself.
func TestValidatePath(t *testing.T) {
	for _, p := range []string{"", ".", "..", "../a", "/a", "a/", "a//b", "./a", "a/.", "a/../b", "x\\y", "a\x00b", ScriptName, "inventory/x", "callback_plugins/y.py"} {
		if ValidatePath(p) == nil {
			t.Errorf("ValidatePath(%q) accepted it", p)
		}
	}
	for _, p := range []string{"a", "a/b", "roles/x/tasks/main.yml", "...", "..a", "a..", ".hidden", "inventory.d/x"} {
		if err := ValidatePath(p); err != nil {
			t.Errorf("ValidatePath(%q): %v", p, err)
		}
	}
}

func TestValidateRejects(t *testing.T) {
	cases := []struct {
		name string
		b    Bundle
		want string
	}{
		{"a file that is another's directory", Bundle{Files: map[string]string{"a": "", "a/b/c": ""}}, `"a" is a file`},
		{"NUL in a secret env value", Bundle{SecretEnv: map[string]string{"K": "s3cr\x00t"}}, `value of K holds a NUL`},
		{"NUL in a command", Bundle{Playbook: "", Command: []string{"echo", "a\x00"}}, `holds a NUL`},
		{"NUL in the marker", Bundle{Marker: "m\x00"}, `marker`},
		{"comma in a tag", Bundle{Tags: []string{"a", "b,c"}}, `tags: "b,c" holds a comma`},
		{"comma in a limit pattern", Bundle{Limit: []string{"web,db"}}, `limit: "web,db" holds a comma`},
		{"empty skip tag", Bundle{SkipTags: []string{""}}, `skip_tags: an element is empty`},
		{"NUL in a limit pattern", Bundle{Limit: []string{"web\x00"}}, `limit: "web\x00" holds a NUL`},
		{"duplicate extra var", Bundle{ExtraVars: []byte("{\"a\": 1,\n \"a\": 2}")}, `line 2: key "a" is set twice`},
		{"duplicate nested secret var", Bundle{SecretVars: []byte(`{"db": {"user": "u", "user": "v"}}`)}, `line 1: key "user" is set twice`},
		{"secret vars not an object", Bundle{SecretVars: []byte(`"hunter2"`)}, `must be a JSON object`},
		{"duplicate inventory key", Bundle{Inventory: "all:\n  hosts:\n    a: {}\n  hosts:\n    b: {}\n"}, `inventory: line 4: key "hosts" is set twice`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := c.b
			if b.Playbook == "" && len(b.Command) == 0 {
				b.Playbook = "- hosts: all\n"
			}
			if b.Marker == "" {
				b.Marker = "m"
			}
			err := b.Write(io.Discard)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error = %v, want %q", err, c.want)
			}
			if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "s3cr") {
				t.Fatalf("the error shows a secret: %v", err)
			}
		})
	}
	var de *strictyaml.DuplicateKeyError
	if err := ValidateVars([]byte(`{"a": [{"b": 1}, {"b": 2}], "c": {"a": 1}}`)); err != nil {
		t.Fatalf("keys repeated in different objects: %v", err)
	}
	if err := ValidateInventory("[web]\nhost1\nhost1\n"); err != nil {
		t.Fatalf("an INI inventory: %v", err)
	}
	if err := ValidateVars([]byte("{\"a\": {\"b\": 1,\n\n \"b\": 1}}")); !errors.As(err, &de) || de.Line != 3 {
		t.Fatalf("error = %v", err)
	}
}

// keyTokens counts the object keys written in a valid JSON document, and
// decodedKeys those that survive decoding: they differ exactly when an
// object sets a key twice.
func keyTokens(doc []byte) int {
	dec := json.NewDecoder(bytes.NewReader(doc))
	var stack []byte
	expectKey := []bool{}
	n := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return n
		}
		top := len(stack) - 1
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				if top >= 0 && stack[top] == '{' {
					expectKey[top] = true
				}
				stack = append(stack, byte(d))
				expectKey = append(expectKey, d == '{')
			default:
				stack, expectKey = stack[:top], expectKey[:top]
			}
			continue
		}
		if top >= 0 && stack[top] == '{' {
			if expectKey[top] {
				n++
			}
			expectKey[top] = !expectKey[top]
		}
	}
}

func decodedKeys(v any) int {
	n := 0
	switch x := v.(type) {
	case map[string]any:
		n += len(x)
		for _, e := range x {
			n += decodedKeys(e)
		}
	case []any:
		for _, e := range x {
			n += decodedKeys(e)
		}
	}
	return n
}

// FuzzValidateVars: accepted variables are a JSON object that loses no key
// in decoding; a duplicate key is reported exactly when one would be lost.
func FuzzValidateVars(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"a":1,"a":2}`, `{"a":{"b":[{"c":1,"c":2}]}}`, `[1]`, `null`, `{"a":`,
		`{"a":{"b":1},"b":{"a":1}}`, `{"":1,"":2}`, `{"\u0061":1,"a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		err := ValidateVars(doc)
		var obj map[string]any
		valid := json.Unmarshal(doc, &obj) == nil && obj != nil
		if !valid {
			if err == nil {
				t.Fatalf("accepted %q, which is not a JSON object", doc)
			}
			return
		}
		lost := keyTokens(doc) != decodedKeys(obj)
		var de *strictyaml.DuplicateKeyError
		if lost != errors.As(err, &de) || (!lost && err != nil) {
			t.Fatalf("ValidateVars(%q) = %v; keys lost in decoding: %v", doc, err, lost)
		}
	})
}

// FuzzWrite: whatever the files, env and variables, Write either refuses
// them or writes a tar stream that extracts cleanly inside the bundle
// directory (no entry outside it, no file where a directory must go), with
// every file's content intact, a script that does not depend on the
// secrets' values, and limit and tags each passed as one quoted argument.
func FuzzWrite(f *testing.F) {
	f.Add("a", "x", "b/c", "y", "K", "v", "s3cr3t", []byte(`{"a":1}`), "", "deploy")
	f.Add("a", "x", "a/b", "y", "K", "v", "s3cr3t", []byte(`{"a":1,"a":2}`), "all:\n  hosts: {}\n", "a,b")
	f.Add(".", "x", "..", "y", "1K", "v\x00", "s\x00", []byte(`[]`), "[web]\nh\n", "")
	f.Add("roles/r/tasks/main.yml", "- debug: msg=hi\n", "templates/t.j2", "{{ x }}", "A_B", "it's", "'; rm -rf / #", []byte(`{"x":{"y":[1,2]}}`), "all:\n  hosts:\n    a: {}\n    a: {}\n", "web:!db")
	f.Add("a", "x", "b", "y", "K", "v", "s3cr3t", []byte(`{}`), "", "it's $(touch pwned) `x` ;|&")
	f.Fuzz(func(t *testing.T, p1, c1, p2, c2, envK, envV, secret string, vars []byte, inventory, tag string) {
		b := Bundle{
			Playbook: "- hosts: all\n", Files: map[string]string{p1: c1, p2: c2}, Inventory: inventory,
			ExtraVars: vars, Env: map[string]string{envK: envV}, SecretEnv: map[string]string{"SECRET": secret},
			Limit: []string{tag}, Tags: []string{tag, "b"},
			Marker: "\x1ekubeplay-fuzz ",
			// A held node's script too, for half the inputs.
			Held: len(secret)%2 == 1,
		}
		var buf bytes.Buffer
		if err := b.Write(&buf); err != nil {
			return
		}
		entries := map[string]bool{} // name -> is a directory
		var script []byte
		tr := tar.NewReader(&buf)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("the stream does not read back: %v", err)
			}
			name := strings.TrimSuffix(h.Name, "/")
			isDir := h.Typeflag == tar.TypeDir
			if j := path.Join("/bundle", name); !strings.HasPrefix(j, "/bundle/") || j != "/bundle/"+name {
				t.Fatalf("entry %q resolves to %q", h.Name, j)
			}
			if _, dup := entries[name]; dup {
				t.Fatalf("entry %q written twice", name)
			}
			for d := path.Dir(name); d != "."; d = path.Dir(d) {
				if isd, ok := entries[d]; ok && !isd {
					t.Fatalf("entry %q is under the file %q", name, d)
				}
			}
			entries[name] = isDir
			content, _ := io.ReadAll(tr)
			if want, ok := b.Files[name]; ok && !isDir && string(content) != want {
				t.Fatalf("file %q holds %q, want %q", name, content, want)
			}
			if name == ScriptName {
				script = content
			}
		}
		for p := range b.Files {
			if isDir, ok := entries[p]; !ok || isDir {
				t.Fatalf("file %q missing from the stream", p)
			}
		}
		// A tag or pattern is one quoted argv element, joined with commas:
		// accepted only when Ansible's split on commas gives it back whole.
		if ValidateListItem(tag) != nil {
			t.Fatalf("the list element %q was accepted", tag)
		}
		if want := " '--limit' " + Quote(tag) + " '--tags' " + Quote(tag+",b") + " "; !strings.Contains(string(script), want) {
			t.Fatalf("the script lacks %s:\n%s", want, script)
		}
		b.SecretEnv["SECRET"] = "other-" + strings.Repeat("x", len(secret))
		if got := b.script(invNameOf(b.Inventory), noDigest); got != string(script) {
			t.Fatalf("the script depends on a secret's value:\n%s\n---\n%s", script, got)
		}
		// A held node's run takes turns and spares the worker; any other ends it.
		if takesTurns := strings.Contains(string(script), "flock 9"); takesTurns != b.Held {
			t.Fatalf("held %v, but the script takes the node's lock: %v", b.Held, takesTurns)
		}
		if endsWorker := strings.Contains(string(script), `kill -TERM "$w"`); endsWorker == b.Held {
			t.Fatalf("held %v, but the script ends the worker: %v", b.Held, endsWorker)
		}
	})
}

func invNameOf(inv string) string {
	if inv != "" && isYAMLMap(inv) {
		return "inventory.yml"
	}
	return "inventory"
}

// FuzzParseResultRoundTrip: whatever the runner reports, ParseResult reads
// back the exit code and every host's counts.
func FuzzParseResultRoundTrip(f *testing.F) {
	f.Add(0, "localhost", int64(1), int64(2), int64(0), int64(0), false, int64(-1), int64(0), []byte{})
	f.Add(-1, "", int64(-5), int64(1<<62), int64(3), int64(4), true, int64(10), int64(4), []byte{1, 2})
	f.Fuzz(func(t *testing.T, rc int, host string, ok, changed, failed, skipped int64, noStats bool, total, slice int64, seed []byte) {
		hs := HostStats{OK: ok, Changed: changed, Failed: failed, Skipped: skipped}
		var stats any = map[string]any{"hosts": map[string]HostStats{host: hs}}
		if noStats {
			stats = nil
		}
		j, err := json.Marshal(stats)
		if err != nil {
			t.Fatal(err)
		}
		j = []byte(report1(rc, string(j)))
		// A host step's fields, as the script writes them, when the counts
		// are ones it can write.
		hostList := total >= 0 && slice >= 0 && slice <= total
		sum := sha256.Sum256(seed)
		digest := hex.EncodeToString(sum[:])
		if hostList {
			j = bytes.Replace(j, []byte("}\n"), fmt.Appendf(nil, `,"hosts_total":%d,"hosts_sha256":"%s","slice_hosts":%d}`+"\n", total, digest, slice), 1)
		}
		r, err := ParseResult(string(j))
		if err != nil || r.ExitCode != rc {
			t.Fatalf("ParseResult(%s) = %+v, %v", j, r, err)
		}
		if r.HostList != hostList || hostList && (r.HostsTotal != total || r.SliceHosts != slice || r.HostsSHA256 != digest) {
			t.Fatalf("ParseResult(%s): host list %v, %d, %d, %s", j, r.HostList, r.HostsTotal, r.SliceHosts, r.HostsSHA256)
		}
		var key string // the host name as JSON carries it: each invalid byte becomes U+FFFD
		hj, _ := json.Marshal(host)
		_ = json.Unmarshal(hj, &key)
		if noStats != (r.Hosts == nil) || (!noStats && (len(r.Hosts) != 1 || r.Hosts[key] != hs)) {
			t.Fatalf("ParseResult(%s) hosts = %+v", j, r.Hosts)
		}
	})
}
