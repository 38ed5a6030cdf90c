package bundle

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestDecodeCheck(t *testing.T) {
	doc := "{\"rc\":0}\n" + `{"hosts":{"web1":{"ok":2,"changed":1}},"check":{"changes":[` +
		`{"host":"web1","task":"Template the config","action":"ansible.builtin.template","diff":"--- before\n+++ after\n-a\n+b\n","diff_size":0,"ran":false},` +
		`{"host":"web1","task":"Restart","action":"command","diff":"","ran":true,"extra":{"x":1}}],` +
		`"change_count":2,"not_checkable":3,"future":[1]}}`
	r, err := ParseResult(doc)
	if err != nil {
		t.Fatal(err)
	}
	if r.Check == nil {
		t.Fatal("no check")
	}
	c := *r.Check
	if len(c.Changes) != 2 || c.ChangeCount != 2 || c.NotCheckable != 3 {
		t.Fatalf("check = %+v", c)
	}
	if c.Changes[0].Host != "web1" || c.Changes[0].Task != "Template the config" || !strings.Contains(c.Changes[0].Diff, "+b") || c.Changes[0].Ran {
		t.Errorf("first change = %+v", c.Changes[0])
	}
	if !c.Changes[1].Ran || c.Changes[1].Action != "command" {
		t.Errorf("second change = %+v", c.Changes[1])
	}
	// A run that was not in check mode reports none.
	r, err = ParseResult(report1(0, `{"hosts":{}}`))
	if err != nil || r.Check != nil {
		t.Fatalf("check without check mode: %+v, %v", r.Check, err)
	}
	r, err = ParseResult(report1(0, `{"check":null}`))
	if err != nil || r.Check != nil {
		t.Fatalf("null check: %+v, %v", r.Check, err)
	}
}

func TestDecodeCheckLimits(t *testing.T) {
	var sb strings.Builder
	sb.WriteString("{\"rc\":0}\n" + `{"check":{"change_count":1,"changes":[`)
	for i := range MaxChanges + 7 {
		if i > 0 {
			sb.WriteString(",")
		}
		diff := ""
		if i == 0 {
			diff = strings.Repeat("é", MaxDiff+10) // a callback that did not cut
		}
		fmt.Fprintf(&sb, `{"host":"h%d","task":%q,"diff":%q}`, i, strings.Repeat("t", MaxTaskMessage+5), diff)
	}
	sb.WriteString(`],"not_checkable":-4}}`)
	r, err := ParseResult(sb.String())
	if err != nil {
		t.Fatal(err)
	}
	c := r.Check
	if len(c.Changes) != MaxChanges || c.ChangeCount != MaxChanges+7 || c.NotCheckable != 0 {
		t.Fatalf("%d changes, count %d, not checkable %d", len(c.Changes), c.ChangeCount, c.NotCheckable)
	}
	if n := utf8.RuneCountInString(c.Changes[0].Diff); n != MaxDiff || c.Changes[0].DiffSize != MaxDiff+10 {
		t.Errorf("diff of %d characters, size %d", n, c.Changes[0].DiffSize)
	}
	if n := utf8.RuneCountInString(c.Changes[1].Task); n != MaxTaskMessage {
		t.Errorf("task of %d characters", n)
	}
}

func FuzzDecodeCheck(f *testing.F) {
	f.Add(`{"changes":[{"host":"a","task":"b","action":"c","diff":"d","diff_size":9,"ran":true}],"change_count":1,"not_checkable":2}`)
	f.Add(`{"changes":null,"change_count":-1}`)
	f.Add(`{"changes":[{}],"changes":[],"x":{"y":[]}}`)
	f.Add(`{"changes":[{"diff":"\u00e9\u00e9"}],"change_count":"1"}`)
	f.Fuzz(func(t *testing.T, check string) {
		r, err := ParseResult(report1(0, `{"check":`+check+`}`))
		if err != nil || r.Check == nil {
			return
		}
		c := r.Check
		if len(c.Changes) > MaxChanges || c.ChangeCount < int64(len(c.Changes)) || c.NotCheckable < 0 {
			t.Fatalf("%d changes, count %d, not checkable %d", len(c.Changes), c.ChangeCount, c.NotCheckable)
		}
		for _, ch := range c.Changes {
			if utf8.RuneCountInString(ch.Diff) > MaxDiff || ch.DiffSize < 0 {
				t.Fatalf("a diff of %d characters, size %d", utf8.RuneCountInString(ch.Diff), ch.DiffSize)
			}
			if utf8.RuneCountInString(ch.Host) > MaxTaskMessage || utf8.RuneCountInString(ch.Task) > MaxTaskMessage {
				t.Fatalf("a name too long: %q %q", ch.Host, ch.Task)
			}
		}
		// What was kept encodes and decodes to itself.
		b, _ := json.Marshal(map[string]any{"changes": c.Changes, "change_count": c.ChangeCount, "not_checkable": c.NotCheckable})
		r2, err := ParseResult(report1(0, `{"check":`+string(b)+`}`))
		if err != nil || len(r2.Check.Changes) != len(c.Changes) || r2.Check.ChangeCount != c.ChangeCount {
			t.Fatalf("round trip: %v, %+v, want %+v", err, r2.Check, c)
		}
	})
}
