package runner

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/projectdir"
)

// TestLifelineCloseIsEOF: after Close, the exec's stdin copy reads EOF,
// not a closed-pipe error (which client-go logs), even part way through
// the bundle, and the writer ends.
func TestLifelineCloseIsEOF(t *testing.T) {
	b := bundle.Bundle{Playbook: "- hosts: all\n", Marker: "\x1ekubeplay-test"}
	stdin, size, err := lifeline(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	if _, err := io.ReadFull(stdin, buf); err != nil || size <= 100 {
		t.Fatalf("reading the start of a %d-byte bundle: %v", size, err)
	}
	if err := stdin.Close(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := stdin.Read(buf); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, io.EOF) {
			t.Fatalf("a read after Close returned %v, want EOF", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a read after Close blocks")
	}
}

// A bundle that cannot be written in full breaks the stream, and Err says
// why.
func TestLifelineWriteError(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "site.yml"), []byte("- hosts: all\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := projectdir.List(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, _, err := lifeline(bundle.Bundle{Project: m, ProjectHash: "not the hash", Command: []string{"true"}, Marker: "m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, l); !errors.Is(err, projectdir.ErrChanged) {
		t.Errorf("read: %v", err)
	}
	if err := l.Err(); !errors.Is(err, projectdir.ErrChanged) {
		t.Errorf("Err: %v", err)
	}
}
