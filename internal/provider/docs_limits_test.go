// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
)

// The limits that keep the documentation one a newcomer reads in minutes
// (issue 42). Words are counted as wc -w counts them: whitespace-separated
// tokens.
const (
	// readmeFirstScreen is how many of the README's lines make its first screen.
	readmeFirstScreen = 40
	// docsWordLimit bounds the words of every page under docs/.
	docsWordLimit = 30000
	// runPageWordLimit bounds the words of docs/resources/run.md.
	runPageWordLimit = 3500
	// descriptionWordLimit bounds the words of one attribute's or block's
	// description: an explanation longer than that belongs in a section of
	// the page or a guide, which the description links.
	descriptionWordLimit = 150
)

// TestDocsReadmeFirstScreen checks that the README's first screen gives the
// two commands a newcomer needs.
func TestDocsReadmeFirstScreen(t *testing.T) {
	root, err := acctest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitN(string(b), "\n", readmeFirstScreen+1)
	if len(lines) > readmeFirstScreen {
		lines = lines[:readmeFirstScreen]
	}
	first := strings.Join(lines, "\n")
	for _, cmd := range []string{"make quickstart", "make test-all"} {
		if !strings.Contains(first, cmd) {
			t.Errorf("the README's first %d lines do not contain %q", readmeFirstScreen, cmd)
		}
	}
}

// TestDocsWordLimits checks the size of docs/ as a whole and of the run's page.
func TestDocsWordLimits(t *testing.T) {
	root, err := acctest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	docs := filepath.Join(root, "docs")
	total := 0
	pages := map[string]int{}
	err = filepath.WalkDir(docs, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".md") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		pages[filepath.ToSlash(rel)] = len(strings.Fields(string(b)))
		total += pages[filepath.ToSlash(rel)]
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("no page under docs/")
	}
	t.Logf("docs/: %d words in %d pages", total, len(pages))
	if total > docsWordLimit {
		t.Errorf("docs/ has %d words, more than %d: cut repetition, or link instead of explaining twice", total, docsWordLimit)
	}
	run, ok := pages["docs/resources/run.md"]
	if !ok {
		t.Fatal("docs/resources/run.md is missing")
	}
	if run > runPageWordLimit {
		t.Errorf("docs/resources/run.md has %d words, more than %d", run, runPageWordLimit)
	}
}

// TestDocsDescriptionLength checks that no description of the provider's
// schemas (the provider's own, and every resource's, data source's, action's,
// ephemeral resource's and list resource's, nested attributes and blocks
// included) is longer than descriptionWordLimit words. The schemas come from
// the provider's constructors, as Terraform gets them.
func TestDocsDescriptionLength(t *testing.T) {
	server, err := providerserver.NewProtocol6WithError(New("test")())()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := server.GetProviderSchema(context.Background(), &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range resp.Diagnostics {
		if d.Severity == tfprotov6.DiagnosticSeverityError {
			t.Fatalf("schema: %s: %s", d.Summary, d.Detail)
		}
	}
	schemas := map[string]*tfprotov6.Schema{"provider": resp.Provider}
	add := func(kind string, m map[string]*tfprotov6.Schema) {
		for name, s := range m {
			schemas[kind+" "+name] = s
		}
	}
	add("resource", resp.ResourceSchemas)
	add("data source", resp.DataSourceSchemas)
	add("ephemeral resource", resp.EphemeralResourceSchemas)
	add("list resource", resp.ListResourceSchemas)
	for name, s := range resp.ActionSchemas {
		schemas["action "+name] = s.Schema
	}
	for _, kind := range []string{"resource", "data source", "ephemeral resource", "list resource", "action"} {
		found := false
		for k := range schemas {
			found = found || strings.HasPrefix(k, kind+" ")
		}
		if !found {
			t.Errorf("no %s schema: the walk misses a kind", kind)
		}
	}

	type desc struct {
		where string
		words int
	}
	var all []desc
	var walkBlock func(where string, b *tfprotov6.SchemaBlock)
	var walkAttrs func(where string, attrs []*tfprotov6.SchemaAttribute)
	walkAttrs = func(where string, attrs []*tfprotov6.SchemaAttribute) {
		for _, a := range attrs {
			w := where + "." + a.Name
			all = append(all, desc{w, len(strings.Fields(a.Description))})
			if a.NestedType != nil {
				walkAttrs(w, a.NestedType.Attributes)
			}
		}
	}
	walkBlock = func(where string, b *tfprotov6.SchemaBlock) {
		if b == nil {
			return
		}
		walkAttrs(where, b.Attributes)
		for _, nb := range b.BlockTypes {
			w := where + "." + nb.TypeName
			all = append(all, desc{w, len(strings.Fields(nb.Block.Description))})
			walkBlock(w, nb.Block)
		}
	}
	for name, s := range schemas {
		if s == nil {
			t.Errorf("%s: no schema", name)
			continue
		}
		walkBlock(name, s.Block)
	}
	if len(all) < 100 {
		t.Fatalf("only %d descriptions found: the walk is broken", len(all))
	}
	sort.Slice(all, func(i, j int) bool { return all[i].words > all[j].words })
	t.Logf("%d descriptions; the longest: %s, %d words", len(all), all[0].where, all[0].words)
	for _, d := range all {
		if d.words <= descriptionWordLimit {
			break
		}
		t.Errorf("%s: its description has %d words, more than %d: explain it once in a section of the page or a guide, and link it", d.where, d.words, descriptionWordLimit)
	}
	if testing.Verbose() {
		for _, d := range all[:min(60, len(all))] {
			t.Logf("%4d %s", d.words, d.where)
		}
	}
}

// TestDocsRunStatusReasons keeps the run page's lists of status reasons and
// timeline steps (templates/resources/run.md.tmpl) exactly what
// runner.Reasons and runner.Steps say, since the attributes' descriptions
// link them rather than repeat them. KUBEPLAY_UPDATE_DOCS=1 rewrites the
// lists from the code; make generate then renders them into docs/.
func TestDocsRunStatusReasons(t *testing.T) {
	root, err := acctest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, "templates", "resources", "run.md.tmpl")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := string(b)
	sections := []struct{ start, end, want string }{
		{"<!-- status reasons: generated from runner.Reasons, checked by TestDocsRunStatusReasons -->\n", "<!-- end of status reasons -->", statusReasonsMarkdown()},
		{"<!-- timeline steps: generated from runner.Steps, checked by TestDocsRunStatusReasons -->\n", "<!-- end of timeline steps -->", timelineStepsMarkdown()},
	}
	update := os.Getenv("KUBEPLAY_UPDATE_DOCS") == "1"
	for _, s := range sections {
		i := strings.Index(tmpl, s.start)
		j := strings.Index(tmpl, s.end)
		if i < 0 || j < i {
			t.Errorf("run.md.tmpl lacks the section %q ... %q", s.start, s.end)
			continue
		}
		i += len(s.start)
		if got := tmpl[i:j]; got != s.want {
			if update {
				tmpl = tmpl[:i] + s.want + tmpl[j:]
				continue
			}
			t.Errorf("run.md.tmpl's section after %q is not what the code says (KUBEPLAY_UPDATE_DOCS=1 rewrites it):\n--- got\n%s\n--- want\n%s", s.start, got, s.want)
		}
	}
	if update {
		if err := os.WriteFile(file, []byte(tmpl), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDocsNumbersMatchCode checks numbers that the README and the guides
// state in prose (rather than in generated descriptions) against the
// constants that define them, so that a changed default shows here.
func TestDocsNumbersMatchCode(t *testing.T) {
	root, err := acctest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	grace := fmt.Sprintf("%d seconds", int(runner.AutoscalerGrace.Seconds()))
	for _, c := range []struct{ file, want, what string }{
		{"templates/resources/run.md.tmpl", "for " + fmt.Sprint(int(rerunRecordTTL.Hours()/24)) + " days", "how long a rerun record is kept"},
		{"templates/resources/run.md.tmpl", "waits " + grace, "the wait for a cluster autoscaler"},
		{"templates/guides/getting-started.md.tmpl", "up to " + grace, "the wait for a cluster autoscaler"},
		{"templates/guides/moving-from-nodepool.md.tmpl", grace, "the wait for a cluster autoscaler"},
		{"templates/guides/getting-started.md.tmpl", fmt.Sprintf("the last %d KiB by\ndefault", defaultOutputLimit>>10), "the default output_limit"},
		{"docs/resources/run.md", fmt.Sprintf("Between 1 and %d", maxSlices), "the most slices"},
		{"docs/resources/run.md", fmt.Sprintf("Defaults to `%d`", defaultOutputLimit), "the default output_limit"},
	} {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(c.file)))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), c.want) {
			t.Errorf("%s does not say %q (%s, from the code)", c.file, c.want, c.what)
		}
	}
}
