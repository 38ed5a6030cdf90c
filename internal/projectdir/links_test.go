//go:build unix

package projectdir

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// within runs fn and fails the test when it has not returned in d: the
// old code hung (FIFO) or read without end (/dev/urandom).
func within(t *testing.T, d time.Duration, what string, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("%s: still running after %s", what, d)
		return nil
	}
}

// The ignore file is read only as a regular file of the project: a link
// (to a device, a FIFO or a file outside) or a FIFO in its place is
// refused at once with a message that quotes nothing of what it names.
func TestIgnoreFileNotRegular(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secret, []byte("[token-s3cr3t-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(outside, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(p string) error{
		"link to /dev/urandom":       func(p string) error { return os.Symlink("/dev/urandom", p) },
		"link to a FIFO":             func(p string) error { return os.Symlink(fifo, p) },
		"FIFO":                       func(p string) error { return syscall.Mkfifo(p, 0o600) },
		"link to a file outside":     func(p string) error { return os.Symlink(secret, p) },
		"link to a file inside":      func(p string) error { return os.Symlink("site.yml", p) },
		"directory":                  func(p string) error { return os.Mkdir(p, 0o755) },
		"link to a directory inside": func(p string) error { return os.Symlink("roles", p) },
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			write(t, root, "site.yml", "[inside\n", 0o644)
			write(t, root, "roles/a/tasks/main.yml", "[]\n", 0o644)
			if err := mk(filepath.Join(root, IgnoreFile)); err != nil {
				t.Fatal(err)
			}
			for _, read := range []func(string, []string) (*Manifest, error){Scan, List} {
				err := within(t, 3*time.Second, "reading the project", func() error { _, err := read(root, nil); return err })
				var pe *PathError
				if !errors.Is(err, ErrIgnoreFileKind) || !errors.As(err, &pe) || pe.Path != IgnoreFile {
					t.Fatalf("want ErrIgnoreFileKind at %s, got %v", IgnoreFile, err)
				}
				if strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), "[inside") {
					t.Fatalf("the error quotes the file it names: %v", err)
				}
			}
		})
	}
}

// An ignore file larger than the cap is refused with a clear error; one at
// the cap is read.
func TestIgnoreFileSize(t *testing.T) {
	root := t.TempDir()
	write(t, root, "site.yml", "x", 0o644)
	line := "*.bak\n"
	write(t, root, IgnoreFile, strings.Repeat(line, MaxIgnoreFileSize/len(line)), 0o644)
	if _, err := Scan(root, nil); err != nil {
		t.Fatalf("an ignore file under the cap: %v", err)
	}
	write(t, root, IgnoreFile, strings.Repeat(line, MaxIgnoreFileSize/len(line)+1), 0o644)
	_, err := Scan(root, nil)
	if !errors.Is(err, ErrIgnoreFileSize) || !strings.Contains(err.Error(), "KiB") {
		t.Fatalf("an ignore file over the cap: %v", err)
	}
}

// A project_dir that is itself a link is resolved once and read as the
// directory it names (it used to ship an empty project).
func TestProjectDirIsLink(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "site.yml", "- hosts: all\n", 0o644)
	write(t, dir, IgnoreFile, "*.bak\n", 0o644)
	write(t, dir, "x.bak", "b", 0o644)
	link := filepath.Join(t.TempDir(), "project")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	for name, read := range map[string]func(string, []string) (*Manifest, error){"Scan": Scan, "List": List} {
		m, err := read(link, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, ok := m.Find("site.yml"); !ok || len(m.Entries) != 1 {
			t.Fatalf("%s through a link: %+v", name, m.Entries)
		}
		var buf bytes.Buffer
		if err := m.WriteTar(tar.NewWriter(&buf), "p/"); err != nil {
			t.Fatalf("%s: WriteTar: %v", name, err)
		}
		if h := readBack(t, &buf)["p/site.yml"]; h == nil || h.PAXRecords["content"] != "- hosts: all\n" {
			t.Fatalf("%s: site.yml shipped as %+v", name, h)
		}
	}
}

// Links are resolved as the pod will see them: within the shipped project,
// whatever the host holds around it. A chain that leaves the project there
// is refused even when, on the host, its target does not exist.
func TestLinkChainLeavesInPod(t *testing.T) {
	for name, links := range map[string][][2]string{
		// deep/deeper/s -> .. is deep; deep/.. is the root, and one more .. leaves.
		"up through a link": {{"deep/deeper/s", ".."}, {"x", "deep/deeper/s/../../../kubeplay-no-such-file"}},
		// a/b/s -> .. is a, so s/../.. is the root's parent; read lexically, a/kubeplay-no-such-dir/f.
		"sideways": {{"a/b/s", ".."}, {"a/b/y", "s/../../kubeplay-no-such-dir/f"}},
		// Through a chain of two links.
		"two hops": {{"deep/deeper/s", ".."}, {"deep/t", "deeper/s"}, {"z", "deep/t/../../kubeplay-no-such-file"}},
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			write(t, root, "deep/deeper/f", "f", 0o644)
			write(t, root, "a/b/c/f", "f", 0o644)
			for _, l := range links {
				if err := os.Symlink(l[1], filepath.Join(root, filepath.FromSlash(l[0]))); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Scan(root, nil)
			var pe *PathError
			if !errors.Is(err, ErrLinkOutside) || !errors.As(err, &pe) || pe.Path != links[len(links)-1][0] {
				t.Fatalf("want ErrLinkOutside at %s, got %v", links[len(links)-1][0], err)
			}
		})
	}
	// Chains that stay inside pass, dangling ones too.
	root := t.TempDir()
	write(t, root, "deep/deeper/f", "f", 0o644)
	for _, l := range [][2]string{{"deep/deeper/s", ".."}, {"x", "deep/deeper/s/../deeper/f"}, {"d", "deep/missing"},
		{"deep/u", "deeper/s/f2"}} {
		if err := os.Symlink(l[1], filepath.Join(root, filepath.FromSlash(l[0]))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Scan(root, nil); err != nil {
		t.Fatalf("links that stay inside: %v", err)
	}
}

// A file swapped after the project was listed (for a link, a FIFO, or
// another file of the same size) ends the stream with ErrChanged: files
// are opened without following links and checked against the listing.
func TestSwapAfterListing(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("s3cr3t"), 0o600); err != nil {
		t.Fatal(err)
	}
	swaps := map[string]func(t *testing.T, root string){
		"file to link outside": func(t *testing.T, root string) {
			p := filepath.Join(root, "vars", "a.yml")
			if err := os.Remove(p); err != nil || os.Symlink(outside, p) != nil {
				t.Fatal(err)
			}
		},
		"file to FIFO": func(t *testing.T, root string) {
			p := filepath.Join(root, "vars", "a.yml")
			if err := os.Remove(p); err != nil || syscall.Mkfifo(p, 0o600) != nil {
				t.Fatal(err)
			}
		},
		"directory to link": func(t *testing.T, root string) {
			other := t.TempDir()
			write(t, other, "a.yml", "s3cr3t", 0o644)
			if err := os.RemoveAll(filepath.Join(root, "vars")); err != nil || os.Symlink(other, filepath.Join(root, "vars")) != nil {
				t.Fatal(err)
			}
		},
		"file to another file": func(t *testing.T, root string) {
			p := filepath.Join(root, "vars", "a.yml")
			if err := os.Rename(outside+"2", p); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, swap := range swaps {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			write(t, root, "vars/a.yml", "a: 12\n", 0o644)
			if err := os.WriteFile(outside+"2", []byte("a: 21\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			listed, err := List(root, nil)
			if err != nil {
				t.Fatal(err)
			}
			swap(t, root)
			var buf bytes.Buffer
			err = within(t, 3*time.Second, "shipping", func() error { return listed.WriteTar(tar.NewWriter(&buf), "p/") })
			var pe *PathError
			if !errors.Is(err, ErrChanged) || !errors.As(err, &pe) || pe.Path != "vars/a.yml" {
				t.Fatalf("want ErrChanged at vars/a.yml, got %v", err)
			}
			if bytes.Contains(buf.Bytes(), []byte("s3cr3t")) {
				t.Fatal("the swapped-in content was shipped")
			}
		})
	}
}

// TestHardLinks (#40): a file with a hard link outside what is shipped (a
// file outside the project, or one the project ignores) is refused, by
// Scan and by List, naming the file; hard links that all lie within what
// is shipped are shipped as the files they are.
func TestHardLinks(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(outside, []byte("token-s3cr3t-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		mk      func(root string) error
		refused string
	}{
		"link to a file outside": {refused: "vars/secret.yml", mk: func(root string) error {
			return os.Link(outside, filepath.Join(root, "vars", "secret.yml"))
		}},
		"link to an ignored file": {refused: "vars/copy.yml", mk: func(root string) error {
			write(t, root, "cache/x.yml", "a: 1\n", 0o644)
			return os.Link(filepath.Join(root, "cache", "x.yml"), filepath.Join(root, "vars", "copy.yml"))
		}},
		"links within the project": {mk: func(root string) error {
			return os.Link(filepath.Join(root, "site.yml"), filepath.Join(root, "vars", "site.yml"))
		}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			write(t, root, "site.yml", "- hosts: all\n", 0o644)
			write(t, root, "vars/main.yml", "a: 1\n", 0o644)
			if err := c.mk(root); err != nil {
				t.Fatal(err)
			}
			for fn, read := range map[string]func(string, []string) (*Manifest, error){"Scan": Scan, "List": List} {
				m, err := read(root, []string{"cache"})
				if c.refused == "" {
					if err != nil {
						t.Fatalf("%s: %v", fn, err)
					}
					if _, ok := m.Find("vars/site.yml"); !ok {
						t.Errorf("%s: the second link is not shipped", fn)
					}
					continue
				}
				var pe *PathError
				if !errors.Is(err, ErrHardLink) || !errors.As(err, &pe) || pe.Path != c.refused {
					t.Fatalf("%s: %v; want %s refused with ErrHardLink", fn, err, c.refused)
				}
				if strings.Contains(err.Error(), "s3cr3t") || !strings.Contains(err.Error(), "2 links, 1 of them") {
					t.Errorf("%s: %v", fn, err)
				}
			}
		})
	}
}
