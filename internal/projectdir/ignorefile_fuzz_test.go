//go:build unix

package projectdir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// FuzzIgnoreFile reads a project whose ignore file is, by kind, a regular
// file holding content, a link to a file outside holding it, a FIFO, a link
// to an endless device, or a directory. Reading never waits or runs on, a
// file that is not regular is refused without a word of what it names, a
// regular one is read whole up to the cap (larger is ErrIgnoreFileSize),
// and a pattern error quotes a line of the project's own file only.
func FuzzIgnoreFile(f *testing.F) {
	f.Add(uint8(0), "*.bak\n/build/\n# c\n", uint16(0))
	f.Add(uint8(0), "[bad\n", uint16(0))
	f.Add(uint8(0), "a\r\nb\r\n", uint16(MaxIgnoreFileSize>>4))
	f.Add(uint8(1), "[s3cr3t-from-outside\n", uint16(0))
	f.Add(uint8(2), "", uint16(0))
	f.Add(uint8(3), "", uint16(0))
	f.Add(uint8(4), "x", uint16(0))
	f.Fuzz(func(t *testing.T, kind uint8, content string, pad uint16) {
		root, outside := t.TempDir(), t.TempDir()
		// pad*16 bytes of comment lines can reach past the cap.
		body := content + strings.Repeat("#23456789abcdef\n", int(pad))
		p := filepath.Join(root, IgnoreFile)
		var err error
		switch kind % 5 {
		case 0:
			err = os.WriteFile(p, []byte(body), 0o644)
		case 1:
			target := filepath.Join(outside, "f")
			if err = os.WriteFile(target, []byte("[kp-outside-marker\n"+body), 0o644); err == nil {
				err = os.Symlink(target, p)
			}
		case 2:
			err = syscall.Mkfifo(p, 0o600)
		case 3:
			err = os.Symlink("/dev/zero", p)
		case 4:
			err = os.Mkdir(p, 0o755)
		}
		if err != nil {
			t.Skip(err)
		}
		done := make(chan struct{})
		var lines []string
		go func() {
			defer close(done)
			lines, err = readIgnoreFile(root)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("kind %d: reading the ignore file did not return", kind%5)
		}
		if kind%5 != 0 {
			if !errors.Is(err, ErrIgnoreFileKind) {
				t.Fatalf("kind %d: %v", kind%5, err)
			}
			if strings.Contains(err.Error(), "kp-outside-marker") {
				t.Fatalf("the error quotes what the link names: %v", err)
			}
			return
		}
		if len(body) > MaxIgnoreFileSize {
			if !errors.Is(err, ErrIgnoreFileSize) {
				t.Fatalf("%d bytes: %v", len(body), err)
			}
			return
		}
		if err != nil {
			t.Fatalf("%d bytes: %v", len(body), err)
		}
		if got := strings.Join(lines, "\n"); got != body {
			t.Fatalf("read %d bytes of %d", len(got), len(body))
		}
		if _, err := NewIgnore(lines); err != nil {
			var pe *PathError
			if !errors.As(err, &pe) || !strings.Contains("\n"+body+"\n", "\n"+pe.Path+"\n") {
				t.Fatalf("pattern error quotes what is not a line of the file: %v", err)
			}
		}
	})
}
