package acctest

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/podexec"
)

// BuildCollection builds the Ansible collection whose source (galaxy.yml
// at its root) is in src with `ansible-galaxy collection build`, in a
// throwaway pod of the test image in namespace: the host has no Ansible. The
// source streams in and the tarball out over exec. It writes the tarball
// into dest and returns its path.
func BuildCollection(t testing.TB, kube kubernetes.Interface, namespace, src, dest string) string {
	t.Helper()
	// 5 minutes, not 3: on a slower machine under make test-all's load the
	// pod's start and the build's exec passed 3 minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg := RESTConfig(t)
	pod, err := StartPod(ctx, kube, namespace, "collection-build", TestImage())
	if pod != "" {
		defer func() {
			_ = kube.CoreV1().Pods(namespace).Delete(context.Background(), pod, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		}()
	}
	if err != nil {
		t.Fatal(err)
	}
	var in bytes.Buffer
	if err := tarDir(&in, src); err != nil {
		t.Fatalf("packing the collection source %s: %v", src, err)
	}
	// The build's log goes to stderr; stdout carries only the tarball.
	script := `set -e; rm -rf /tmp/src /tmp/out; mkdir -p /tmp/src /tmp/out; tar -xf - -C /tmp/src
ansible-galaxy collection build --output-path /tmp/out /tmp/src >&2
cd /tmp/out; ls >&2; cat *.tar.gz`
	var out, stderr bytes.Buffer
	code, err := podexec.Run(ctx, cfg, kube, namespace, pod, "worker", []string{"sh", "-c", script}, &in, &out, &stderr)
	if err != nil || code != 0 {
		t.Fatalf("ansible-galaxy collection build in pod %s: exit %d, %v: %s", pod, code, err, stderr.String())
	}
	name := strings.TrimSpace(lastLine(stderr.String()))
	if !strings.HasSuffix(name, ".tar.gz") {
		t.Fatalf("the build in pod %s named no tarball: %s", pod, stderr.String())
	}
	if err := os.MkdirAll(dest, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dest, name)
	if err := os.WriteFile(p, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// tarDir writes the regular files and directories under root as a tar.
func tarDir(w io.Writer, root string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if d.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		content, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		_, err = tw.Write(content)
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: %w", root, err)
	}
	return tw.Close()
}
