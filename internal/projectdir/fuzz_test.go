package projectdir

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FuzzValidatePath: an accepted path stays inside any root it is joined to.
func FuzzValidatePath(f *testing.F) {
	for _, s := range []string{"site.yml", "a/b", "../a", "a/../b", "/x", "a//b", ".", "a\\b", "..a", "a/.."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if ValidatePath(p) != nil {
			return
		}
		joined := path.Join("/root/project", p)
		if !strings.HasPrefix(joined, "/root/project/") || path.Clean(p) != p {
			t.Fatalf("%q accepted, but joins to %q", p, joined)
		}
	})
}

// FuzzIgnore: patterns never panic; an anchored literal matches its own
// path, a name pattern matches the name at any depth.
func FuzzIgnore(f *testing.F) {
	f.Add("*.retry\n/top\nbuild/", "x/a.retry", true)
	f.Add("[", "a", false)
	f.Add("a/b", "a/b", false)
	f.Fuzz(func(t *testing.T, patterns, p string, isDir bool) {
		ig, err := NewIgnore(strings.Split(patterns, "\n"))
		if err != nil {
			return
		}
		_ = ig.Match(p, isDir)
		// Patterns are trimmed of white space, so names that start or end with it cannot be named.
		if ValidatePath(p) != nil || strings.ContainsAny(p, "*?[]\\#") || slices.ContainsFunc(strings.Split(p, "/"), func(el string) bool { return strings.TrimSpace(el) != el }) {
			return
		}
		if lit, _ := NewIgnore([]string{"/" + p}); lit == nil || !lit.Match(p, isDir) {
			t.Fatalf("/%s does not match %q", p, p)
		}
		base := path.Base(p)
		if by, _ := NewIgnore([]string{base}); by == nil || !by.Match("deep/er/"+p, isDir) {
			t.Fatalf("%s does not match deep/er/%s", base, p)
		}
	})
}

// FuzzManifest builds a project from the input (one file a line:
// name, then content after the first '='), scans it, writes it as a tar and
// reads it back: every file arrives with its content and mode, the shape
// has the tar's length, a listed manifest ships the same tar and ends with
// the scanned hash, and ignored names never ship.
func FuzzManifest(f *testing.F) {
	f.Add("site.yml=- hosts: all\nroles/web/tasks/main.yml=[]\nx.retry=h\n.git/HEAD=r\nbin/tool=\x00\xff")
	f.Add("a=1\na/b=2")
	f.Add("=\n/=x\n../x=y")
	f.Fuzz(func(t *testing.T, spec string) {
		root := t.TempDir()
		want := map[string]string{}
		for i, line := range strings.Split(spec, "\n") {
			name, content, _ := strings.Cut(line, "=")
			if ValidatePath(name) != nil || len(name) > 100 || i > 20 {
				continue
			}
			p := filepath.Join(root, filepath.FromSlash(name))
			if os.MkdirAll(filepath.Dir(p), 0o755) != nil {
				continue
			}
			mode := os.FileMode(0o644)
			if len(content)%2 == 1 {
				mode = 0o755
			}
			if os.WriteFile(p, []byte(content), mode) != nil || os.Chmod(p, mode) != nil {
				continue
			}
			want[name] = content
		}
		m, err := Scan(root, nil)
		if err != nil {
			t.Fatal(err)
		}
		var data, shape bytes.Buffer
		tw, sw := tar.NewWriter(&data), tar.NewWriter(&shape)
		if err := m.WriteTar(tw, "p/"); err != nil || tw.Close() != nil {
			t.Fatal(err)
		}
		if err := m.WriteShape(sw, "p/"); err != nil || sw.Close() != nil {
			t.Fatal(err)
		}
		if data.Len() != shape.Len() {
			t.Fatalf("shape %d, tar %d", shape.Len(), data.Len())
		}
		// The one-pass ship of a create: List, then WriteTar sums each file
		// as it goes; the same tar, and the same hash as the plan's Scan.
		l, err := List(root, nil)
		if err != nil {
			t.Fatal(err)
		}
		var listed bytes.Buffer
		lw := tar.NewWriter(&listed)
		if err := l.WriteTar(lw, "p/"); err != nil || lw.Close() != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(listed.Bytes(), data.Bytes()) || l.Hash() != m.Hash() {
			t.Fatalf("listed ship: %d bytes, hash %s; scanned: %d bytes, hash %s", listed.Len(), l.Hash(), data.Len(), m.Hash())
		}
		ig, _ := NewIgnore(DefaultIgnores)
		tr := tar.NewReader(&data)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			name := strings.TrimSuffix(strings.TrimPrefix(h.Name, "p/"), "/")
			for d := name; d != "."; d = path.Dir(d) {
				if ig.Match(d, d != name || h.Typeflag == tar.TypeDir) {
					t.Fatalf("%s shipped, but %s is ignored", name, d)
				}
			}
			if h.Typeflag != tar.TypeReg {
				continue
			}
			c, _ := io.ReadAll(tr)
			// Later lines may have overwritten a file, or made it a directory.
			if onDisk, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name))); err != nil || string(c) != string(onDisk) {
				t.Fatalf("%s: shipped %q, on disk %q (%v)", name, c, onDisk, err)
			}
			info, _ := os.Stat(filepath.Join(root, filepath.FromSlash(name)))
			if int64(info.Mode().Perm()) != h.Mode {
				t.Fatalf("%s: mode %o, on disk %o", name, h.Mode, info.Mode().Perm())
			}
			e, ok := m.Find(name)
			if !ok || e.Size != int64(len(c)) {
				t.Fatalf("%s: Find %v %+v", name, ok, e)
			}
		}
		for name := range want {
			if _, ok := m.Find(name); !ok && !ignoredUnder(ig, name) {
				if info, err := os.Stat(filepath.Join(root, filepath.FromSlash(name))); err == nil && !info.IsDir() {
					t.Fatalf("%s is on disk and not ignored, but not in the manifest", name)
				}
			}
		}
	})
}

func ignoredUnder(ig *Ignore, name string) bool {
	for d := name; d != "."; d = path.Dir(d) {
		if ig.Match(d, d != name) || ig.Match(d, false) {
			return true
		}
	}
	return false
}
