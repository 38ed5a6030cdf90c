package runner

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podexec"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/projectdir"
)

// BenchmarkProjectShip50MB ships a 50 MB project of 5,000 files into one
// running pod, alternately through kubeplay's bundle path (scan and sum the
// project, stream the bundle from disk into bundle.Command over exec, run
// the script with a no-op command) and as the same tar streamed from a file
// into a bare `tar -xf -` over exec. It reports both times, their ratio and
// the bytes kubeplay allocated per op.
//
//	TF_ACC=1 go test ./internal/runner -run '^$' -bench ProjectShip50MB -benchtime 5x -timeout 30m
func BenchmarkProjectShip50MB(b *testing.B) {
	if os.Getenv("TF_ACC") == "" {
		b.Skip("benchmark against the test cluster: set TF_ACC=1")
	}
	cfg := acctest.RESTConfig(b)
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ns := acctest.Namespace(b, kube, "kp-bench-project")
	ctx := context.Background()
	pod, err := acctest.StartPod(ctx, kube, ns, "ship", acctest.TestImage())
	if err != nil {
		b.Fatal(err)
	}
	root := makeProject(b, 5000, 10<<10)
	exec := func(cmd []string, stdin io.Reader) {
		var stderr bytes.Buffer
		code, err := podexec.Run(ctx, cfg, kube, ns, pod, "worker", cmd, stdin, io.Discard, &stderr)
		if err != nil || code != 0 {
			b.Fatalf("%v: exit %d, %v: %s", cmd, code, err, stderr.String())
		}
	}
	// The same tar for the bare exec: the bundle's own bytes, from a file.
	m, err := projectdir.Scan(root, nil)
	if err != nil {
		b.Fatal(err)
	}
	tarFile := filepath.Join(b.TempDir(), "project.tar")
	f, err := os.Create(tarFile)
	if err != nil {
		b.Fatal(err)
	}
	sb := shipBundle(m)
	if err := sb.Write(f); err != nil || f.Close() != nil {
		b.Fatal(err)
	}
	var kubeplay, bare time.Duration
	var alloc uint64
	var ms runtime.MemStats
	for i := 0; i < b.N; i++ {
		kubeplayBefore, bareBefore := kubeplay, bare
		// Each side starts with the node's page cache written back, so that
		// neither pays for the other's writes (or the last clean-up's).
		exec([]string{"sync"}, nil)
		runtime.ReadMemStats(&ms)
		before := ms.TotalAlloc
		start := time.Now()
		m, err := projectdir.Scan(root, nil)
		if err != nil {
			b.Fatal(err)
		}
		scanned := time.Since(start)
		stdin, size, err := lifeline(shipBundle(m))
		if err != nil {
			b.Fatal(err)
		}
		exec(bundle.Command(size), stdin)
		_ = stdin.Close()
		kubeplay += time.Since(start)
		runtime.ReadMemStats(&ms)
		alloc += ms.TotalAlloc - before

		in, err := os.Open(tarFile)
		if err != nil {
			b.Fatal(err)
		}
		exec([]string{"sync"}, nil)
		start = time.Now()
		exec([]string{"sh", "-c", `d=$(mktemp -d /tmp/bare.XXXXXX) && tar -xf - -C "$d"`}, in)
		bare += time.Since(start)
		_ = in.Close()
		b.Logf("kubeplay %s (scan %s), bare exec %s", kubeplay-kubeplayBefore, scanned, bare-bareBefore)
		exec([]string{"sh", "-c", "rm -rf /tmp/bare.* " + bundle.RunDirPrefix + "*"}, nil)
	}
	n := float64(b.N)
	b.ReportMetric(kubeplay.Seconds()/n, "kubeplay-s/op")
	b.ReportMetric(bare.Seconds()/n, "bare-exec-s/op")
	b.ReportMetric(kubeplay.Seconds()/bare.Seconds(), "ratio")
	b.ReportMetric(float64(alloc)/n/(1<<20), "kubeplay-alloc-MB/op")
	b.Logf("project: %d entries, %.1f MB; tar %s", len(m.Entries), float64(m.Size())/(1<<20), sizeOf(b, tarFile))
}

func shipBundle(m *projectdir.Manifest) bundle.Bundle {
	return bundle.Bundle{Project: m, Command: []string{"true"}, Marker: "\x1ekubeplay-bench "}
}

// makeProject writes files of random bytes, 50 to a directory.
func makeProject(b *testing.B, files, size int) string {
	root := b.TempDir()
	buf := make([]byte, size)
	for i := range files {
		dir := filepath.Join(root, fmt.Sprintf("roles/r%03d/files", i/50))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		_, _ = rand.Read(buf)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%04d.bin", i)), buf, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return root
}

func sizeOf(b *testing.B, p string) string {
	info, err := os.Stat(p)
	if err != nil {
		b.Fatal(err)
	}
	return strings.TrimSpace(fmt.Sprintf("%.1f MB", float64(info.Size())/(1<<20)))
}
