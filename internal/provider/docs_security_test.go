// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
)

// testLink is a link to a test of this repository, as the security model
// guide writes it: [`TestName`](https://github.com/.../blob/main/path_test.go).
var testLink = regexp.MustCompile("\\[`?(Test[A-Za-z0-9_]+|Fuzz[A-Za-z0-9_]+)`?\\]\\(https://github\\.com/kubeplay/terraform-provider-kubeplay/blob/main/([^)#]+_test\\.go)\\)")

// TestSecurityGuideGuaranteesLinkTests keeps the security model guide honest:
// each row of its guarantee tables (a table whose header has a "Proved by"
// column) names at least one test, and every test it links to exists in the
// file the link names. A guarantee without a test is not written.
func TestSecurityGuideGuaranteesLinkTests(t *testing.T) {
	root, err := acctest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	guide, err := os.ReadFile(filepath.Join(root, "templates", "guides", "security-model.md.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	links, rows := 0, 0
	inTable, provedBy := false, -1
	for i, line := range strings.Split(string(guide), "\n") {
		for _, m := range testLink.FindAllStringSubmatch(line, -1) {
			links++
			name, file := m[1], m[2]
			src, ok := files[file]
			if !ok {
				b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(file)))
				if err != nil {
					t.Errorf("line %d links %s in %s, which cannot be read: %v", i+1, name, file, err)
					continue
				}
				src = string(b)
				files[file] = src
			}
			if !strings.Contains(src, "func "+name+"(") {
				t.Errorf("line %d links %s, but %s has no func %s", i+1, name, file, name)
			}
		}
		if !strings.HasPrefix(line, "|") {
			inTable, provedBy = false, -1
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		switch {
		case !inTable:
			inTable, provedBy = true, -1
			for j, c := range cells {
				if strings.TrimSpace(c) == "Proved by" {
					provedBy = j
				}
			}
		case provedBy < 0 || strings.Trim(strings.TrimSpace(line), "|-: ") == "":
			// Not a guarantee table, or its separator row.
		default:
			rows++
			if provedBy >= len(cells) || !testLink.MatchString(cells[provedBy]) {
				t.Errorf("line %d: a guarantee with no test linked in its Proved by column: %s", i+1, line)
			}
		}
	}
	if rows < 10 || links < rows {
		t.Errorf("the guide has %d guarantee rows and %d test links; want at least 10 rows, each with a link", rows, links)
	}
}
