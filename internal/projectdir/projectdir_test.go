package projectdir

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func write(t testing.TB, root, rel, content string, mode fs.FileMode) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func TestScan(t *testing.T) {
	root := t.TempDir()
	write(t, root, "site.yml", "- hosts: all\n", 0o644)
	write(t, root, "bin/tool", "\x00\x01\xff", 0o755)
	write(t, root, "roles/web/tasks/main.yml", "[]\n", 0o600)
	write(t, root, ".git/HEAD", "ref\n", 0o644)
	write(t, root, "deep/.terraform/x", "x", 0o644)
	write(t, root, "site.retry", "h\n", 0o644)
	write(t, root, "a.bak", "b", 0o644)
	write(t, root, "keep/a.bak.txt", "kept", 0o644)
	write(t, root, "secrets/key.pem", "k", 0o644)
	write(t, root, "other/secrets/key.pem", "kept too", 0o644)
	write(t, root, "build/out", "o", 0o644)
	write(t, root, IgnoreFile, "# comment\n\n/secrets/*.pem\nbuild/\n", 0o644)
	if err := os.Mkdir(filepath.Join(root, "empty"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("site.yml", filepath.Join(root, "link.yml")); err != nil {
		t.Fatal(err)
	}
	m, err := Scan(root, []string{"*.bak"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"site.yml":                 "0644 sha256:" + sum("- hosts: all\n"),
		"bin/tool":                 "0755 sha256:" + sum("\x00\x01\xff"),
		"roles/web/tasks/main.yml": "0600 sha256:" + sum("[]\n"),
		"keep/a.bak.txt":           "0644 sha256:" + sum("kept"),
		"other/secrets/key.pem":    "0644 sha256:" + sum("kept too"),
		"empty":                    "dir 0750",
		"link.yml":                 "symlink -> site.yml",
		"secrets":                  "dir 0755", // its one file is ignored
		"deep":                     "dir 0755", // so is all it holds
	}
	if got := m.Files(); !maps.Equal(got, want) {
		t.Errorf("files\n got %v\nwant %v", got, want)
	}
	paths := make([]string, len(m.Entries))
	for i, e := range m.Entries {
		paths[i] = e.Path
	}
	if !slices.IsSortedFunc(paths, comparePaths) {
		t.Errorf("entries not in walk order: %v", paths)
	}
	for _, p := range paths {
		if _, ok := m.Find(p); !ok {
			t.Errorf("Find(%q) found nothing", p)
		}
	}
	if _, ok := m.Find("build/out"); ok {
		t.Error("an ignored file was found")
	}
	h := m.Hash()
	write(t, root, "bin/tool", "\x00\x01\xff", 0o644)
	m2, err := Scan(root, []string{"*.bak"})
	if err != nil {
		t.Fatal(err)
	}
	if m2.Hash() == h {
		t.Error("a mode change left the hash unchanged")
	}
	write(t, root, "site.retry", "changed", 0o644)
	m3, _ := Scan(root, []string{"*.bak"})
	if m3.Hash() != m2.Hash() {
		t.Error("a change to an ignored file changed the hash")
	}
}

func TestScanErrors(t *testing.T) {
	root := t.TempDir()
	write(t, root, "sub/a.yml", "a", 0o644)
	for _, target := range []string{"../../outside", "/etc/passwd", "../..", ".."} {
		link := filepath.Join(root, "sub", "l")
		_ = os.Remove(link)
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		_, err := Scan(root, nil)
		var pe *PathError
		if !errors.Is(err, ErrLinkOutside) || !errors.As(err, &pe) || pe.Path != "sub/l" {
			t.Errorf("link -> %s: %v", target, err)
		}
	}
	_ = os.Remove(filepath.Join(root, "sub", "l"))
	// Up and back inside is inside.
	if err := os.Symlink("../sub/a.yml", filepath.Join(root, "sub", "l")); err != nil {
		t.Fatal(err)
	}
	if _, err := Scan(root, nil); err != nil {
		t.Errorf("a link that stays inside: %v", err)
	}
	// Each link alone stays inside; resolved in turn, they leave.
	chain := t.TempDir()
	write(t, chain, "c/x", "x", 0o644)
	write(t, chain, "a/b/f", "f", 0o644)
	symlink := func(target, p string) {
		if err := os.Symlink(target, filepath.Join(chain, p)); err != nil {
			t.Fatal(err)
		}
	}
	symlink("../../c", "a/b/r")
	symlink("r/../..", "a/b/l")
	if _, err := Scan(chain, nil); !errors.Is(err, ErrLinkOutside) {
		t.Errorf("a chain of links that leaves: %v", err)
	}
	if _, err := Scan(root, []string{"[bad"}); !errors.Is(err, ErrBadPattern) {
		t.Errorf("bad pattern: %v", err)
	}
	if _, err := Scan(filepath.Join(root, "sub", "a.yml"), nil); !errors.Is(err, ErrNotDir) {
		t.Errorf("a file as the root: %v", err)
	}
	if _, err := Scan(filepath.Join(root, "missing"), nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing root: %v", err)
	}
}

// readBack reads a tar into name -> (header, content).
func readBack(t testing.TB, r io.Reader) map[string]*tar.Header {
	t.Helper()
	tr := tar.NewReader(r)
	out := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		c, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		h.PAXRecords = map[string]string{"content": string(c)}
		out[h.Name] = h
	}
}

func TestWriteTar(t *testing.T) {
	root := t.TempDir()
	write(t, root, "bin/tool", strings.Repeat("\x00\xfe", 5000), 0o755)
	write(t, root, "a.yml", "a", 0o640)
	if err := os.Symlink("bin/tool", filepath.Join(root, "tool")); err != nil {
		t.Fatal(err)
	}
	m, err := Scan(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	var data, shape bytes.Buffer
	tw := tar.NewWriter(&data)
	if err := m.WriteTar(tw, "project/"); err != nil || tw.Close() != nil {
		t.Fatal(err)
	}
	sw := tar.NewWriter(&shape)
	if err := m.WriteShape(sw, "project/"); err != nil || sw.Close() != nil {
		t.Fatal(err)
	}
	if data.Len() != shape.Len() {
		t.Errorf("shape %d bytes, tar %d", shape.Len(), data.Len())
	}
	got := readBack(t, &data)
	if h := got["project/bin/tool"]; h == nil || h.Mode != 0o755 || h.PAXRecords["content"] != strings.Repeat("\x00\xfe", 5000) {
		t.Errorf("bin/tool: %+v", h)
	}
	if h := got["project/a.yml"]; h == nil || h.Mode != 0o640 {
		t.Errorf("a.yml: %+v", h)
	}
	if h := got["project/bin/"]; h == nil || h.Typeflag != tar.TypeDir {
		t.Errorf("bin/: %+v", h)
	}
	if h := got["project/tool"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "bin/tool" {
		t.Errorf("tool: %+v", h)
	}

	// A file that changes after Scan ends the stream.
	for _, change := range []string{"b", "ab", ""} {
		write(t, root, "a.yml", change, 0o640)
		err := m.WriteTar(tar.NewWriter(io.Discard), "")
		var pe *PathError
		if !errors.Is(err, ErrChanged) || !errors.As(err, &pe) || pe.Path != "a.yml" {
			t.Errorf("a.yml now %q: %v", change, err)
		}
	}
}

func TestIgnoreMatch(t *testing.T) {
	ig, err := NewIgnore([]string{"*.retry", "/top.txt", "docs/build", "cache/", " # c", ""})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		path  string
		dir   bool
		match bool
	}{
		{"a.retry", false, true}, {"x/y/a.retry", false, true}, {"top.txt", false, true}, {"x/top.txt", false, false},
		{"docs/build", true, true}, {"x/docs/build", true, false}, {"cache", true, true}, {"cache", false, false},
		{"a/cache", true, true}, {"retry", false, false},
	}
	for _, c := range cases {
		if got := ig.Match(c.path, c.dir); got != c.match {
			t.Errorf("Match(%q, dir %v) = %v", c.path, c.dir, got)
		}
	}
	for _, bad := range []string{"[", "/", "a/[b"} {
		if _, err := NewIgnore([]string{bad}); !errors.Is(err, ErrBadPattern) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestValidatePath(t *testing.T) {
	for _, ok := range []string{"site.yml", "a/b.yml", ".hidden", "a..b"} {
		if err := ValidatePath(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "../a", "/a", "a/", "a//b", "a/./b", "a\\b", "a\x00"} {
		if err := ValidatePath(bad); !errors.Is(err, ErrBadProjectPath) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// List reads no file: WriteTar sums them as it ships them, to the sums
// Scan finds, and still ends the stream when one changed in length.
func TestListThenWriteTar(t *testing.T) {
	root := t.TempDir()
	write(t, root, "bin/tool", strings.Repeat("\x00\xfe", 5000), 0o755)
	write(t, root, "a.yml", "a", 0o640)
	if err := os.Symlink("bin/tool", filepath.Join(root, "tool")); err != nil {
		t.Fatal(err)
	}
	scanned, err := Scan(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	listed, err := List(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := listed.Find("a.yml"); e.Sum != "" || e.Size != 1 {
		t.Errorf("listed a.yml: %+v", e)
	}
	var fromScan, fromList bytes.Buffer
	if err := scanned.WriteTar(tar.NewWriter(&fromScan), "p/"); err != nil {
		t.Fatal(err)
	}
	if err := listed.WriteTar(tar.NewWriter(&fromList), "p/"); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fromScan.Bytes(), fromList.Bytes()) {
		t.Error("List's tar differs from Scan's")
	}
	if listed.Hash() != scanned.Hash() || !reflect.DeepEqual(listed.Entries, scanned.Entries) {
		t.Errorf("after WriteTar, listed %+v; scanned %+v", listed.Entries, scanned.Entries)
	}

	for _, change := range []string{"ab", ""} {
		listed, err := List(root, nil)
		if err != nil {
			t.Fatal(err)
		}
		write(t, root, "a.yml", change, 0o640)
		err = listed.WriteTar(tar.NewWriter(io.Discard), "")
		var pe *PathError
		if !errors.Is(err, ErrChanged) || !errors.As(err, &pe) || pe.Path != "a.yml" {
			t.Errorf("a.yml now %q: %v", change, err)
		}
	}
}
