// Package projectdir reads an Ansible project directory on the provider's
// host into a manifest (paths, modes, sizes and SHA-256 sums, never the
// content) and streams it from disk into a tar writer. Ignore rules keep
// version control, Terraform and Ansible leftovers out.
package projectdir

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// IgnoreFile holds extra ignore patterns, one a line, at the project's root.
const IgnoreFile = ".kubeplayignore"

// MaxIgnoreFileSize bounds IgnoreFile: patterns, not data.
const MaxIgnoreFileSize = 256 << 10

// maxLinkHops is the kernel's bound on links followed in one resolution
// (Linux's MAXSYMLINKS); a chain longer than that fails in the pod too.
const maxLinkHops = 40

// DefaultIgnores are always left out: version control, Terraform's working
// files and state, Ansible's retry files and Python caches.
var DefaultIgnores = []string{
	".git", ".hg", ".svn", ".terraform", ".terraform.lock.hcl", "*.tfstate", "*.tfstate.*",
	"*.retry", ".DS_Store", "__pycache__", "*.pyc", IgnoreFile,
}

// Kind is what an entry is.
type Kind uint8

// Entry kinds.
const (
	File Kind = iota
	Dir
	Symlink
)

// Entry is one path of the project.
type Entry struct {
	// Path is slash-separated and relative to the root.
	Path string
	Kind Kind
	// Mode holds the permission bits (and setuid, setgid, sticky).
	Mode fs.FileMode
	// Size is the content's length; 0 for directories and links.
	Size int64
	// Sum is the hex SHA-256 of a file's content or a link's target.
	Sum string
	// Target is a symlink's target, relative and inside the project.
	Target string
	// dev and ino identify a file as listed, so that the file opened to
	// be read is the one listed (0 where the system gives none).
	dev, ino uint64
	// links is the file's hard link count (0 where the system gives none).
	links uint64
}

// Manifest is a project as scanned: every entry that is not ignored,
// sorted by path, directories before what they hold.
type Manifest struct {
	Root    string
	Entries []Entry
}

// Errors of Scan and WriteTar; each is wrapped with the path at fault.
var (
	ErrNotDir         = errors.New("the project is not a directory")
	ErrLinkOutside    = errors.New("the symbolic link points outside the project")
	ErrSpecial        = errors.New("not a regular file, directory or symbolic link")
	ErrBadPattern     = errors.New("the ignore pattern is malformed")
	ErrChanged        = errors.New("the file changed since the project was read")
	ErrBadProjectPath = errors.New("the path is not a clean relative path inside the project")
	ErrIgnoreFileKind = errors.New("the ignore file is not a regular file: kubeplay reads it only as a plain file " +
		"of the project, never through a link, from a FIFO or a device; replace it with a plain file")
	ErrIgnoreFileSize = fmt.Errorf("the ignore file is larger than the %d KiB kubeplay reads: keep it to patterns, "+
		"one a line", MaxIgnoreFileSize>>10)
	ErrHardLink = errors.New("the file has hard links outside what is shipped: its content is shared with a " +
		"file outside the project (or one it ignores), and a change made there would be shipped")
)

// PathError names the project path (or ignore pattern) at fault.
type PathError struct {
	Path string
	Err  error
}

func (e *PathError) Error() string { return fmt.Sprintf("%s: %v", e.Path, e.Err) }
func (e *PathError) Unwrap() error { return e.Err }

// Ignore holds ignore patterns. A pattern is a path.Match glob. One with no
// slash matches an entry's name at any depth; one with a slash (other than
// a trailing one) matches the whole path from the root; a trailing slash
// matches directories only. A matched directory is left out whole. There
// is no negation.
type Ignore struct {
	patterns []pattern
}

type pattern struct {
	glob     string
	anchored bool
	dirOnly  bool
}

// NewIgnore checks patterns (blank lines and # comments skipped; leading
// and trailing white space is not part of a pattern).
func NewIgnore(patterns []string) (*Ignore, error) {
	ig := &Ignore{}
	for _, raw := range patterns {
		p := strings.TrimSpace(raw)
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		var pt pattern
		if strings.HasSuffix(p, "/") {
			pt.dirOnly, p = true, strings.TrimRight(p, "/")
		}
		if strings.HasPrefix(p, "/") {
			pt.anchored, p = true, strings.TrimLeft(p, "/")
		}
		if strings.Contains(p, "/") {
			pt.anchored = true
		}
		if p == "" {
			return nil, &PathError{Path: raw, Err: ErrBadPattern}
		}
		if _, err := path.Match(p, ""); err != nil {
			return nil, &PathError{Path: raw, Err: ErrBadPattern}
		}
		pt.glob = p
		ig.patterns = append(ig.patterns, pt)
	}
	return ig, nil
}

// Match reports whether the entry at p (clean, slash-separated, relative)
// is ignored.
func (ig *Ignore) Match(p string, isDir bool) bool {
	base := path.Base(p)
	for _, pt := range ig.patterns {
		if pt.dirOnly && !isDir {
			continue
		}
		subject := base
		if pt.anchored {
			subject = p
		}
		if ok, _ := path.Match(pt.glob, subject); ok {
			return true
		}
	}
	return false
}

// readIgnoreFile returns the lines of root's IgnoreFile, none when absent.
// Only a regular file is read, opened without following a link and without
// waiting on a FIFO, and only up to MaxIgnoreFileSize: what it names could
// otherwise be a device that never ends, a FIFO that never opens, or a file
// outside the project whose lines a pattern error would quote.
func readIgnoreFile(root string) ([]string, error) {
	p := filepath.Join(root, IgnoreFile)
	info, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, &PathError{Path: IgnoreFile, Err: fmt.Errorf("%w (it is %s)", ErrIgnoreFileKind, kindName(info.Mode()))}
	}
	f, err := openListed(p, info)
	if errors.Is(err, ErrChanged) {
		return nil, &PathError{Path: IgnoreFile, Err: fmt.Errorf("%w (it changed while being read)", ErrIgnoreFileKind)}
	}
	if err != nil {
		return nil, &PathError{Path: IgnoreFile, Err: err}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxIgnoreFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxIgnoreFileSize {
		return nil, &PathError{Path: IgnoreFile, Err: ErrIgnoreFileSize}
	}
	return strings.Split(string(data), "\n"), nil
}

// kindName names a file's type for an error.
func kindName(m fs.FileMode) string {
	switch m.Type() {
	case fs.ModeSymlink:
		return "a symbolic link"
	case fs.ModeDir:
		return "a directory"
	case fs.ModeNamedPipe:
		return "a FIFO"
	case fs.ModeSocket:
		return "a socket"
	case fs.ModeDevice, fs.ModeDevice | fs.ModeCharDevice:
		return "a device"
	}
	return "not a regular file"
}

// openListed opens the regular file at p without following a link and
// without blocking on a FIFO, and checks it is the file listed as info: a
// path swapped since (for a link, a FIFO, another file, or through a
// directory swapped for a link) is ErrChanged.
func openListed(p string, info fs.FileInfo) (*os.File, error) {
	dev, ino := fileID(info)
	return openChecked(p, dev, ino)
}

func openChecked(p string, dev, ino uint64) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|openNoFollow, 0)
	if err != nil {
		if isLoop(err) {
			return nil, ErrChanged
		}
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if d, i := fileID(st); !st.Mode().IsRegular() || (ino != 0 && (d != dev || i != ino)) {
		f.Close()
		return nil, ErrChanged
	}
	return f, nil
}

// Scan reads the project at root: the default ignores, then extra, then
// the project's IgnoreFile. It reads every file once to sum it.
func Scan(root string, extra []string) (*Manifest, error) {
	return scan(root, extra, true)
}

// List is Scan without reading the files: their sums stay empty until
// WriteTar fills them in, in the same pass that ships them, so that a
// project about to be shipped is read once. Hash and Describe need the
// sums: call them only once WriteTar has returned without error.
func List(root string, extra []string) (*Manifest, error) {
	return scan(root, extra, false)
}

func scan(root string, extra []string, sum bool) (*Manifest, error) {
	// A root that is (or goes through) a link is resolved once, here, and
	// read as the directory it names: every later path is under it.
	resolved, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, err
	}
	fi, err := os.Lstat(resolved)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, &PathError{Path: root, Err: ErrNotDir}
	}
	root = resolved
	fromFile, err := readIgnoreFile(root)
	if err != nil {
		return nil, err
	}
	ig, err := NewIgnore(slices.Concat(DefaultIgnores, extra, fromFile))
	if err != nil {
		return nil, err
	}
	m := &Manifest{Root: root}
	var buf []byte
	if sum {
		buf = make([]byte, 64<<10)
	}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if ig.Match(rel, d.IsDir()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		e, err := entry(p, rel, d, buf)
		if err != nil {
			return err
		}
		m.Entries = append(m.Entries, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := m.checkHardLinks(); err != nil {
		return nil, err
	}
	for _, e := range m.Entries {
		if e.Kind == Symlink && !m.linkStaysInside(e.Path) {
			return nil, &PathError{Path: e.Path, Err: fmt.Errorf("%w (-> %s, followed through the project's links as "+
				"the pod will)", ErrLinkOutside, e.Target)}
		}
	}
	return m, nil
}

// checkHardLinks refuses a file with more hard links than the project
// ships: the others are outside it (a pnpm store, a `cp -al` copy) or
// ignored. Git never makes hard links in a work tree.
func (m *Manifest) checkHardLinks() error {
	shipped := map[[2]uint64]uint64{}
	for _, e := range m.Entries {
		if e.Kind == File && e.links > 1 {
			shipped[[2]uint64{e.dev, e.ino}]++
		}
	}
	for _, e := range m.Entries {
		if n := shipped[[2]uint64{e.dev, e.ino}]; e.Kind == File && e.links > n && n > 0 {
			return &PathError{Path: e.Path, Err: fmt.Errorf("%w (%d links, %d of them in the project as shipped)", ErrHardLink, e.links, n)}
		}
	}
	return nil
}

// linkStaysInside resolves the link at rel as the pod's kernel will, within
// what is shipped: each element that is a shipped link is replaced by its
// target, ".." goes up from where the links led (not lexically), and the
// result must stay strictly inside the project at every step. An element
// that is not shipped is taken as named: the link dangles in the pod. A
// chain longer than the kernel follows is refused.
func (m *Manifest) linkStaysInside(rel string) bool {
	var at []string // resolved elements from the root
	if d := path.Dir(rel); d != "." {
		at = strings.Split(d, "/")
	}
	e, _ := m.Find(rel)
	todo := strings.Split(e.Target, "/")
	for hops := 1; len(todo) > 0; {
		el := todo[0]
		todo = todo[1:]
		switch el {
		case "", ".":
			continue
		case "..":
			if len(at) == 0 {
				return false
			}
			at = at[:len(at)-1]
			continue
		}
		next := strings.Join(append(at[:len(at):len(at)], el), "/")
		if l, ok := m.Find(next); ok && l.Kind == Symlink {
			if hops++; hops > maxLinkHops || strings.HasPrefix(l.Target, "/") {
				return false
			}
			todo = append(strings.Split(l.Target, "/"), todo...)
			continue
		}
		at = append(at, el)
	}
	return len(at) > 0
}

func entry(p, rel string, d fs.DirEntry, buf []byte) (Entry, error) {
	info, err := d.Info()
	if err != nil {
		return Entry{}, err
	}
	e := Entry{Path: rel, Mode: info.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)}
	switch info.Mode().Type() {
	case fs.ModeDir:
		e.Kind = Dir
	case fs.ModeSymlink:
		target, err := os.Readlink(p)
		if err != nil {
			return Entry{}, err
		}
		target = filepath.ToSlash(target)
		if !LinkInside(rel, target) {
			return Entry{}, &PathError{Path: rel, Err: fmt.Errorf("%w (-> %s)", ErrLinkOutside, target)}
		}
		sum := sha256.Sum256([]byte(target))
		e.Kind, e.Target, e.Sum, e.Mode = Symlink, target, hex.EncodeToString(sum[:]), 0o777
	case 0:
		e.Kind, e.Size = File, info.Size()
		e.dev, e.ino = fileID(info)
		e.links = linkCount(info)
		if buf == nil { // List: WriteTar sums the file as it ships it
			break
		}
		sum, n, err := sumFile(p, e, buf)
		if err != nil {
			return Entry{}, err
		}
		e.Sum, e.Size = sum, n
	default:
		return Entry{}, &PathError{Path: rel, Err: ErrSpecial}
	}
	return e, nil
}

// LinkInside reports whether a link at rel pointing at target resolves,
// lexically, strictly inside the project.
func LinkInside(rel, target string) bool {
	if target == "" || strings.HasPrefix(target, "/") || strings.ContainsRune(target, 0) {
		return false
	}
	resolved := path.Join(path.Dir(rel), target)
	return resolved != "." && resolved != ".." && !strings.HasPrefix(resolved, "../")
}

func sumFile(p string, e Entry, buf []byte) (string, int64, error) {
	f, err := openChecked(p, e.dev, e.ino)
	if errors.Is(err, ErrChanged) {
		return "", 0, &PathError{Path: e.Path, Err: ErrChanged}
	}
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.CopyBuffer(h, struct{ io.Reader }{f}, buf) // not os.File's WriteTo, which allocates its own
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// Find returns the entry at p.
func (m *Manifest) Find(p string) (Entry, bool) {
	i, ok := slices.BinarySearchFunc(m.Entries, p, func(e Entry, p string) int { return comparePaths(e.Path, p) })
	if !ok {
		return Entry{}, false
	}
	return m.Entries[i], true
}

// comparePaths orders paths element by element, so that a directory comes
// right before what it holds (the order of filepath.WalkDir).
func comparePaths(a, b string) int {
	return slices.Compare(strings.Split(a, "/"), strings.Split(b, "/"))
}

// Describe is an entry's value in the plan: its kind, mode and sum, so
// that a plan names each changed path.
func (e Entry) Describe() string {
	switch e.Kind {
	case Dir:
		return fmt.Sprintf("dir %04o", e.Mode&fs.ModePerm)
	case Symlink:
		return "symlink -> " + e.Target
	}
	return fmt.Sprintf("%04o sha256:%s", e.Mode&fs.ModePerm, e.Sum)
}

// Files maps each file and symlink to its Describe; directories are left
// out unless empty.
func (m *Manifest) Files() map[string]string {
	out := make(map[string]string, len(m.Entries))
	for i, e := range m.Entries {
		if e.Kind == Dir && i+1 < len(m.Entries) && strings.HasPrefix(m.Entries[i+1].Path, e.Path+"/") {
			continue
		}
		out[e.Path] = e.Describe()
	}
	return out
}

// Hash is the SHA-256 of the manifest: every path, kind, mode and sum.
func (m *Manifest) Hash() string {
	h := sha256.New()
	for _, e := range m.Entries {
		fmt.Fprintf(h, "%q %d %o %s %q\n", e.Path, e.Kind, e.Mode, e.Sum, e.Target)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Size is the total length of the project's files.
func (m *Manifest) Size() int64 {
	var n int64
	for _, e := range m.Entries {
		n += e.Size
	}
	return n
}

// ValidatePath checks a path that names an entry of a project: relative,
// slash-separated, clean and inside.
func ValidatePath(p string) error {
	if p == "" || p == "." || strings.HasPrefix(p, "/") || path.Clean(p) != p || p == ".." ||
		strings.HasPrefix(p, "../") || strings.ContainsAny(p, "\x00\\") {
		return &PathError{Path: p, Err: ErrBadProjectPath}
	}
	return nil
}

// WriteTar writes the project under prefix (which ends in "/"), streaming
// each file from disk and checking it against the manifest: a file that
// changed since Scan ends the stream with ErrChanged. A file List left
// without a sum gets the sum of what was shipped, checked for length only.
func (m *Manifest) WriteTar(tw *tar.Writer, prefix string) error {
	return m.writeTar(tw, prefix, func(e Entry) (io.ReadCloser, error) {
		f, err := openChecked(filepath.Join(m.Root, filepath.FromSlash(e.Path)), e.dev, e.ino)
		if errors.Is(err, ErrChanged) {
			return nil, &PathError{Path: e.Path, Err: ErrChanged}
		}
		return f, err
	})
}

// WriteShape writes what WriteTar writes, with zeros for content: the same
// length, without reading the files.
func (m *Manifest) WriteShape(tw *tar.Writer, prefix string) error {
	return m.writeTar(tw, prefix, func(e Entry) (io.ReadCloser, error) {
		return io.NopCloser(io.LimitReader(zeros{}, e.Size)), nil
	})
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func (m *Manifest) writeTar(tw *tar.Writer, prefix string, open func(Entry) (io.ReadCloser, error)) error {
	buf := make([]byte, 64<<10)
	for i := range m.Entries {
		e := &m.Entries[i]
		hdr := &tar.Header{Name: prefix + e.Path, Mode: int64(e.Mode.Perm()), ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if e.Mode&fs.ModeSetuid != 0 {
			hdr.Mode |= 0o4000
		}
		if e.Mode&fs.ModeSetgid != 0 {
			hdr.Mode |= 0o2000
		}
		if e.Mode&fs.ModeSticky != 0 {
			hdr.Mode |= 0o1000
		}
		switch e.Kind {
		case Dir:
			hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
		case Symlink:
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, e.Target
		default:
			hdr.Typeflag, hdr.Size = tar.TypeReg, e.Size
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if e.Kind == File {
			sum, err := copyChecked(tw, *e, open, buf)
			if err != nil {
				return err
			}
			if e.Sum == "" && sum != "" {
				e.Sum = sum
			}
		}
	}
	return nil
}

// copyChecked copies e's content, checking its length and, for files read
// from disk, its sum (when e has one): a file that changed since Scan is an
// ErrChanged. It returns the sum of what it copied from disk.
func copyChecked(w io.Writer, e Entry, open func(Entry) (io.ReadCloser, error), buf []byte) (string, error) {
	r, err := open(e)
	if err != nil {
		return "", err
	}
	defer r.Close()
	f, fromDisk := r.(*os.File)
	h := sha256.New()
	if fromDisk {
		w = io.MultiWriter(w, h)
	}
	n, err := io.CopyBuffer(w, io.LimitReader(r, e.Size), buf)
	if err != nil {
		return "", err
	}
	if n != e.Size {
		return "", &PathError{Path: e.Path, Err: ErrChanged}
	}
	if !fromDisk {
		return "", nil
	}
	sum := hex.EncodeToString(h.Sum(nil))
	// More bytes than scanned, or a different sum: changed.
	if k, _ := f.Read(make([]byte, 1)); k > 0 || (e.Sum != "" && sum != e.Sum) {
		return "", &PathError{Path: e.Path, Err: ErrChanged}
	}
	return sum, nil
}
