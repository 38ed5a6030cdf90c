// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-version"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"golang.org/x/sync/errgroup"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
)

// TestDocsCodeBlocksValidate checks every terraform and hcl code block of
// README.md and docs/ as a reader who pastes it would find it: formatted as
// terraform fmt writes it, and valid to terraform validate with the provider
// built from this tree. Validate needs no cluster, but the terraform CLI and
// a build, so the test runs with the acceptance tests (TF_ACC). A block is one
// of three kinds:
//
//   - an example: its text is a file under examples/ that tfplugindocs
//     included. It is validated in a copy of that file's directory, so that
//     the variables it uses and the files it reads are there. A file in a
//     subdirectory of an example (identity/import.tf) is validated with the
//     example's files added, since it refers to what they declare;
//   - a fragment: the line right before its fence is
//     <!-- fragment: why it is incomplete -->, which the rendered page does not
//     show. Only terraform fmt checks it;
//   - a configuration: any other block, validated alone in an empty directory.
//
// Blocks that need a newer Terraform than the one in use (imports by
// identity, actions, list blocks) are only formatted; make testacc's second
// pass runs the test again on Terraform 1.16.
func TestDocsCodeBlocksValidate(t *testing.T) {
	if os.Getenv(resource.EnvTfAcc) == "" {
		t.Skipf("set %s=1 to run it: it runs the terraform CLI with a build of the provider (no cluster)", resource.EnvTfAcc)
	}
	// Each terraform it runs gets its environment in exec.Cmd.Env: nothing
	// process-wide changes.
	acctest.Parallel(t)
	start := time.Now()
	root, err := acctest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := docsCodeBlocks(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) < 30 {
		t.Fatalf("found only %d terraform blocks in README.md and docs/: the scan is broken", len(blocks))
	}
	v := &docsValidator{root: root, version: terraformVersion(t)}
	if v.examples, err = exampleFiles(root); err != nil {
		t.Fatal(err)
	}
	if v.bin, v.cliConfig, err = providerCLI(t); err != nil {
		t.Fatal(err)
	}
	built := time.Now()

	// Each validate starts terraform and the provider, which mostly wait on
	// each other: more at once than there are CPUs.
	results := make([]docBlockResult, len(blocks))
	var g errgroup.Group
	g.SetLimit(max(4, 2*runtime.NumCPU()))
	for i, b := range blocks {
		g.Go(func() error {
			results[i] = v.check(t, b)
			return nil
		})
	}
	_ = g.Wait()

	kinds := map[string]int{}
	var skipped []string
	for i, r := range results {
		b := blocks[i]
		kinds[r.kind]++
		if r.skipped != "" {
			skipped = append(skipped, fmt.Sprintf("%s:%d (%s)", b.file, b.line, r.skipped))
		}
		what := r.kind
		if r.example != "" {
			what += " " + r.example
		}
		for _, err := range r.errs {
			t.Errorf("%s:%d: %s: %v", b.file, b.line, what, err)
		}
	}
	if t.Failed() {
		t.Log("docs/ is generated: fix a block in templates/, examples/ or the schema's MarkdownDescription, then make generate. " +
			"Mark a block that is only a part of a configuration with <!-- fragment: why --> on the line before its fence.")
	}
	if len(skipped) > 0 {
		t.Logf("not validated on Terraform %s, which is too old for them (TF_ACC_TERRAFORM_PATH=.cache/bin/terraform-1.16.0 validates them):\n  %s",
			v.version, strings.Join(skipped, "\n  "))
	}
	t.Logf("%d blocks (examples %d, configurations %d, fragments %d) in %s, of which %s for the provider's build",
		len(blocks), kinds[kindExample], kinds[kindConfiguration], kinds[kindFragment],
		time.Since(start).Round(100*time.Millisecond), built.Sub(start).Round(100*time.Millisecond))
}

// TestMarkdownBlocks: the scan finds terraform and hcl blocks and their
// fragment markers, and refuses a marker that marks nothing or gives no
// reason, or a fence left open; README.md and docs/ scan without error.
func TestMarkdownBlocks(t *testing.T) {
	src := "# T\n" + // 1
		"```terraform\n" + // 2
		"a = 1\n" +
		"```\n" +
		"<!-- fragment: one attribute -->\n" + // 5
		"```hcl\n" + // 6
		"b = 2\n" +
		"```\n" +
		"```text\n" + // 9
		"```terraform\n" + // inside the text block: not a fence
		"```\n" +
		"- a list\n" +
		"\n" +
		"  ````terraform\n" + // 14: indented, four backticks
		"  c = [\n" +
		"    3,\n" +
		"  ]\n" +
		"  ```\n" + // shorter: not the end
		"  ````\n" +
		"~~~ terraform\n" + // 20
		"d = 4\n" +
		"~~~\n"
	got, err := markdownBlocks("t.md", src)
	if err != nil {
		t.Fatal(err)
	}
	want := []docBlock{
		{file: "t.md", line: 2, text: "a = 1\n"},
		{file: "t.md", line: 6, text: "b = 2\n", fragment: "one attribute"},
		{file: "t.md", line: 14, text: "c = [\n  3,\n]\n```\n"},
		{file: "t.md", line: 20, text: "d = 4\n"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("markdownBlocks:\n got %+v\nwant %+v", got, want)
	}

	for _, bad := range []struct{ name, src, want string }{
		{"marker before text", "<!-- fragment: x -->\nsome text\n", "t.md:1: a fragment marker must be"},
		{"marker before a shell block", "<!-- fragment: x -->\n```sh\nls\n```\n", "t.md:1: a fragment marker must be"},
		{"marker with no reason", "<!-- fragment: -->\n```terraform\na = 1\n```\n", "t.md:1: a fragment marker names no reason"},
		{"open fence", "```terraform\na = 1\n", "t.md:1: the code block is never closed"},
	} {
		if _, err := markdownBlocks("t.md", bad.src); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: error %v, want one with %q", bad.name, err, bad.want)
		}
	}

	root, err := acctest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := docsCodeBlocks(root); err != nil {
		t.Error(err)
	}
}

// docBlock is a terraform or hcl code block of a Markdown file.
type docBlock struct {
	// file is the Markdown file, relative to the repository's root.
	file string
	// line is the line of the opening fence.
	line int
	// text is the block's content, without the fence's indentation.
	text string
	// fragment is why the block is incomplete, when a marker says so.
	fragment string
}

var (
	// fenceRE is a code fence: its indentation, its backticks or tildes, and
	// the first word of its info string, the language.
	fenceRE    = regexp.MustCompile("^( *)(`{3,}|~{3,})[ \t]*([^ \t`]*)")
	fragmentRE = regexp.MustCompile(`^\s*<!--\s*fragment:(.*?)-->\s*$`)
)

// docsCodeBlocks returns the terraform and hcl blocks of README.md and of
// every Markdown file under docs/.
func docsCodeBlocks(root string) ([]docBlock, error) {
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(root, p)
			files = append(files, filepath.ToSlash(rel))
			return err
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	var blocks []docBlock
	var errs []error
	for _, f := range files {
		src, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return nil, err
		}
		bs, err := markdownBlocks(f, string(src))
		blocks = append(blocks, bs...)
		errs = append(errs, err)
	}
	return blocks, errors.Join(errs...)
}

// markdownBlocks returns the terraform and hcl code blocks of a Markdown
// file, named name in errors. A fragment marker must be the line right
// before such a block's fence, and say why the block is incomplete.
func markdownBlocks(name, src string) ([]docBlock, error) {
	lines := strings.Split(src, "\n")
	isTerraform := func(lang string) bool { return lang == "terraform" || lang == "hcl" }
	var blocks []docBlock
	var errs []error
	for i := 0; i < len(lines); i++ {
		if m := fragmentRE.FindStringSubmatch(lines[i]); m != nil {
			if strings.TrimSpace(m[1]) == "" {
				errs = append(errs, fmt.Errorf("%s:%d: a fragment marker names no reason: write <!-- fragment: why the block is incomplete -->", name, i+1))
			}
			next := ""
			if i+1 < len(lines) {
				next = lines[i+1]
			}
			if f := fenceRE.FindStringSubmatch(next); f == nil || !isTerraform(f[3]) {
				errs = append(errs, fmt.Errorf("%s:%d: a fragment marker must be the line right before a terraform or hcl code block's fence", name, i+1))
			}
			continue
		}
		m := fenceRE.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		indent, fence, lang := m[1], m[2], m[3]
		open := i
		var body []string
		closed := false
		for i++; i < len(lines); i++ {
			// The closing fence: the same character, at least as many times,
			// and nothing else.
			if l := strings.TrimSpace(lines[i]); len(l) >= len(fence) && strings.Trim(l, fence[:1]) == "" {
				closed = true
				break
			}
			body = append(body, strings.TrimPrefix(lines[i], indent))
		}
		if !closed {
			errs = append(errs, fmt.Errorf("%s:%d: the code block is never closed", name, open+1))
			break
		}
		if !isTerraform(lang) {
			continue
		}
		b := docBlock{file: name, line: open + 1, text: strings.Join(body, "\n") + "\n"}
		if open > 0 {
			if fm := fragmentRE.FindStringSubmatch(lines[open-1]); fm != nil {
				b.fragment = strings.TrimSpace(fm[1])
			}
		}
		blocks = append(blocks, b)
	}
	return blocks, errors.Join(errs...)
}

// exampleFiles maps the text of each Terraform file under examples/, trimmed
// as tfplugindocs includes it, to its path relative to root.
func exampleFiles(root string) (map[string]string, error) {
	files := map[string]string{}
	err := filepath.WalkDir(filepath.Join(root, "examples"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !isConfigFile(p) {
			return err
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if _, dup := files[strings.TrimSpace(string(src))]; !dup && err == nil {
			files[strings.TrimSpace(string(src))] = filepath.ToSlash(rel)
		}
		return err
	})
	return files, err
}

const (
	kindExample       = "example"
	kindFragment      = "fragment"
	kindConfiguration = "configuration"
)

// docBlockResult is what checking one block found.
type docBlockResult struct {
	kind string
	// example is the file under examples/ that an example block shows.
	example string
	// skipped says why validate did not run, when the Terraform in use is
	// too old for the block.
	skipped string
	errs    []error
}

// docsValidator checks blocks with the terraform CLI and the provider build.
type docsValidator struct {
	root           string
	examples       map[string]string
	bin, cliConfig string
	version        *version.Version
}

// newerTerraform are the constructs of the docs that Terraform 1.11, the
// oldest supported, does not know.
var newerTerraform = []struct {
	re    *regexp.Regexp
	minor int
	what  string
}{
	{regexp.MustCompile(`(?m)^\s*identity\s*=`), 12, "an import by identity"},
	{regexp.MustCompile(`(?m)^action\s+"`), 14, "an action"},
	{listBlockRE, 14, "a list block"},
	{regexp.MustCompile(`\b(before|after)_destroy\b`), 16, "a before_destroy or after_destroy action trigger"},
}

var (
	listBlockRE       = regexp.MustCompile(`(?m)^list\s+"`)
	requiredVersionRE = regexp.MustCompile(`required_version\s*=\s*"([^"]*)"`)
)

func (v *docsValidator) check(t *testing.T, b docBlock) docBlockResult {
	var r docBlockResult
	if err := v.fmtCheck(t, b); err != nil {
		r.errs = append(r.errs, err)
	}
	example := v.examples[strings.TrimSpace(b.text)]
	switch {
	case b.fragment != "":
		r.kind = kindFragment
		return r
	case example != "":
		r.kind, r.example = kindExample, example
	default:
		r.kind = kindConfiguration
	}
	dir, blockFile, err := v.configDir(t, b, example)
	if err != nil {
		r.errs = append(r.errs, err)
		return r
	}
	config, err := configText(dir)
	if err != nil {
		r.errs = append(r.errs, err)
		return r
	}
	if r.skipped = v.tooNew(config); r.skipped != "" {
		return r
	}
	r.errs = append(r.errs, v.validate(dir, blockFile, b, example)...)
	return r
}

// fmtCheck runs terraform fmt -check on the block's text: it fails on a block
// that does not parse too.
func (v *docsValidator) fmtCheck(t *testing.T, b docBlock) error {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "block.tf"), []byte(b.text), 0o600); err != nil {
		return err
	}
	out, err := terraformCommand(v.bin, v.cliConfig, dir, nil, "fmt", "-check", "-diff", "-no-color", "block.tf").CombinedOutput()
	if err != nil {
		return fmt.Errorf("terraform fmt -check: the block does not parse, or is not formatted as terraform fmt writes it (%v):\n%s", err, out)
	}
	return nil
}

// configDir returns a directory that holds the block's configuration, and
// the file in it that holds the block (for an example, its path under the
// example's directory).
func (v *docsValidator) configDir(t *testing.T, b docBlock, example string) (dir, blockFile string, err error) {
	dir = filepath.Join(t.TempDir(), "config")
	if example != "" {
		exDir := filepath.Join(v.root, filepath.Dir(example))
		blockFile = filepath.Base(example)
		// A subdirectory of an example (identity/) holds what refers to the
		// example's declarations.
		parent := filepath.Dir(exDir)
		if tfs, _ := filepath.Glob(filepath.Join(parent, "*.tf")); len(tfs) > 0 {
			if err := os.CopyFS(dir, os.DirFS(parent)); err != nil {
				return "", "", err
			}
		}
		if err := os.CopyFS(dir, os.DirFS(exDir)); err != nil {
			return "", "", fmt.Errorf("copying %s: %w", filepath.Dir(example), err)
		}
	} else {
		if err := os.Mkdir(dir, 0o700); err != nil {
			return "", "", err
		}
		// A block of list blocks is a query file.
		blockFile = "main.tf"
		if listBlockRE.MatchString(b.text) {
			blockFile = "main.tfquery.hcl"
		}
		if err := os.WriteFile(filepath.Join(dir, blockFile), []byte(b.text), 0o600); err != nil {
			return "", "", err
		}
	}
	// A configuration that does not say where kubeplay comes from would get
	// hashicorp/kubeplay; the dev_overrides serve kubeplay/kubeplay.
	config, err := configText(dir)
	if err != nil {
		return "", "", err
	}
	if !strings.Contains(config, "required_providers") {
		if err := os.WriteFile(filepath.Join(dir, "docs_test_providers.tf"), []byte(cliRequiredProviders), 0o600); err != nil {
			return "", "", err
		}
	}
	return dir, blockFile, nil
}

// isConfigFile reports whether Terraform reads the file: a configuration or
// query file.
func isConfigFile(name string) bool {
	return strings.HasSuffix(name, ".tf") || strings.HasSuffix(name, ".tfquery.hcl")
}

// configText is the text of the configuration files of dir, one after
// another.
func configText(dir string) (string, error) {
	var all strings.Builder
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if n := e.Name(); !e.IsDir() && isConfigFile(n) {
			src, err := os.ReadFile(filepath.Join(dir, n))
			if err != nil {
				return "", err
			}
			all.Write(src)
			all.WriteString("\n")
		}
	}
	return all.String(), nil
}

// tooNew says why the Terraform in use cannot validate config, or is empty.
func (v *docsValidator) tooNew(config string) string {
	for _, n := range newerTerraform {
		if n.re.MatchString(config) && v.version.Segments()[1] < n.minor {
			return fmt.Sprintf("%s needs Terraform 1.%d", n.what, n.minor)
		}
	}
	for _, m := range requiredVersionRE.FindAllStringSubmatch(config, -1) {
		if c, err := version.NewConstraint(m[1]); err == nil && !c.Check(v.version.Core()) {
			return fmt.Sprintf("its required_version is %q", m[1])
		}
	}
	return ""
}

// validate runs terraform validate in dir and returns its diagnostics but
// the dev_overrides warning, each with the line it names: a line of the
// Markdown file for a configuration block, of the example's file for an
// example.
func (v *docsValidator) validate(dir, blockFile string, b docBlock, example string) []error {
	// Without an example's test files (examples/modules/*/tests), whose run
	// blocks name modules that only terraform init or get installs, in the
	// repository rather than in this copy: TestAccModule_terraformTest runs them.
	args := []string{"validate", "-json", "-no-color", "-no-tests"}
	if matches, _ := filepath.Glob(filepath.Join(dir, "*.tfquery.hcl")); len(matches) > 0 {
		args = append(args, "-query")
	}
	cmd := terraformCommand(v.bin, v.cliConfig, dir, nil, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, runErr := cmd.Output()
	var res struct {
		Diagnostics []struct {
			Severity, Summary, Detail string
			Range                     *struct {
				Filename string
				Start    struct{ Line int }
			}
		}
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return []error{fmt.Errorf("terraform %s: %v (%v)\n%s%s", strings.Join(args, " "), runErr, err, out, stderr.Bytes())}
	}
	var errs []error
	for _, d := range res.Diagnostics {
		if d.Summary == "Provider development overrides are in effect" {
			continue
		}
		where := ""
		if d.Range != nil {
			switch {
			case d.Range.Filename == blockFile && example == "":
				where = fmt.Sprintf("%s:%d: ", b.file, b.line+d.Range.Start.Line)
			case example != "":
				where = fmt.Sprintf("%s:%d: ", v.exampleSource(example, d.Range.Filename), d.Range.Start.Line)
			default:
				where = fmt.Sprintf("%s:%d: ", d.Range.Filename, d.Range.Start.Line)
			}
		}
		errs = append(errs, fmt.Errorf("terraform validate: %s%s: %s: %s", where, d.Severity, d.Summary, d.Detail))
	}
	if runErr != nil && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("terraform %s: %v\n%s", strings.Join(args, " "), runErr, stderr.Bytes()))
	}
	return errs
}

// exampleSource is the file under examples/ that name, a file of the copy of
// example's directory, came from: the example's directory's, else its
// parent's.
func (v *docsValidator) exampleSource(example, name string) string {
	own := filepath.ToSlash(filepath.Join(filepath.Dir(example), name))
	if _, err := os.Stat(filepath.Join(v.root, own)); err == nil {
		return own
	}
	if parent := filepath.ToSlash(filepath.Join(filepath.Dir(filepath.Dir(example)), name)); parent != "" {
		if _, err := os.Stat(filepath.Join(v.root, parent)); err == nil {
			return parent
		}
	}
	return name
}
