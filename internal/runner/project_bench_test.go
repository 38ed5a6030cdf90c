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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/outputtail"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podexec"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/projectdir"
)

// BenchmarkProjectShip50MB ships a 50 MB project of 5,000 files into one
// running pod, alternately through kubeplay's bundle path as a create ships
// it (list the project, then stream the bundle from disk into
// bundle.DeliverCommand over exec (the runner's follower), summing each file as it goes and checking the
// planned hash before the script, which runs a no-op command) and as the
// same tar streamed from a file into a bare `tar -xf -` over exec. Each
// side unpacks into a fresh directory under /tmp right after the same
// clean-up and a sync, and the side that goes first alternates. It reports
// the medians of both times, the median of the per-iteration ratios and
// the bytes kubeplay allocated per op.
//
//	TF_ACC=1 go test ./internal/runner -run '^$' -bench ProjectShip50MB -benchtime 5x -timeout 30m
func BenchmarkProjectShip50MB(b *testing.B) {
	cfg, kube := acctest.Clients(b)
	ns := acctest.Namespace(b, kube, "kp-bench-project")
	ctx := context.Background()
	pod, err := acctest.StartPod(ctx, kube, ns, "ship", acctest.TestImage())
	if err != nil {
		b.Fatal(err)
	}
	podObj, err := kube.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	root := makeProject(b, 5000, 10<<10)
	exec := func(cmd []string, stdin io.Reader) {
		var stderr bytes.Buffer
		var errOut io.Writer = &stderr
		code, err := podexec.Run(ctx, cfg, kube, ns, pod, "worker", cmd, stdin, io.Discard, errOut)
		if err != nil || code != 0 {
			b.Fatalf("%v: exit %d, %v: %s", cmd, code, err, stderr.String())
		}
	}
	// The plan's scan gives the hash; the same tar for the bare exec: the
	// bundle's own bytes, from a file.
	m, err := projectdir.Scan(root, nil)
	if err != nil {
		b.Fatal(err)
	}
	planned := m.Hash()
	tarFile := filepath.Join(b.TempDir(), "project.tar")
	f, err := os.Create(tarFile)
	if err != nil {
		b.Fatal(err)
	}
	sb := shipBundle(m)
	if err := sb.Write(f); err != nil || f.Close() != nil {
		b.Fatal(err)
	}
	var ms runtime.MemStats
	var alloc uint64
	shipKubeplay := func() time.Duration {
		runtime.ReadMemStats(&ms)
		before := ms.TotalAlloc
		start := time.Now()
		m, err := projectdir.List(root, nil)
		if err != nil {
			b.Fatal(err)
		}
		sb := shipBundle(m)
		sb.ProjectHash = planned
		r := &Runner{Config: cfg, Kube: kube}
		f, err := newFollower(r, Spec{Bundle: sb, Container: "worker", Timeline: NewTimeline(StepDeliver, start)}, podObj, io.Discard,
			outputtail.New(outputtail.Options{Limit: 4 << 10}))
		if err != nil {
			b.Fatal(err)
		}
		if res, err := f.follow(ctx); err != nil || res.ExitCode != 0 {
			b.Fatalf("shipping the project: %+v, %v", res, err)
		}
		d := time.Since(start)
		runtime.ReadMemStats(&ms)
		alloc += ms.TotalAlloc - before
		return d
	}
	shipBare := func() time.Duration {
		in, err := os.Open(tarFile)
		if err != nil {
			b.Fatal(err)
		}
		defer in.Close()
		start := time.Now()
		exec([]string{"sh", "-c", `d=$(mktemp -d /tmp/bare.XXXXXX) && tar -xf - -C "$d"`}, in)
		return time.Since(start)
	}
	var kubeplay, bare, ratio []float64
	for i := 0; i < b.N; i++ {
		sides := []func() time.Duration{shipKubeplay, shipBare}
		if i%2 == 1 {
			sides[0], sides[1] = sides[1], sides[0]
		}
		var took [2]time.Duration
		for k, side := range sides {
			// Each side starts right after the same clean-up with the node's
			// page cache written back, so that neither pays for the other's
			// writes or deletes: whichever side came first after a shared
			// clean-up took up to three times as long.
			exec([]string{"sh", "-c", "rm -rf /tmp/bare.* " + bundle.RunDirPrefix + "* && sync"}, nil)
			took[k] = side()
		}
		if i%2 == 1 {
			took[0], took[1] = took[1], took[0]
		}
		kubeplay, bare = append(kubeplay, took[0].Seconds()), append(bare, took[1].Seconds())
		ratio = append(ratio, took[0].Seconds()/took[1].Seconds())
		b.Logf("kubeplay %s, bare exec %s, ratio %.2f", took[0], took[1], ratio[i])
	}
	b.ReportMetric(acctest.Median(kubeplay), "kubeplay-s/op")
	b.ReportMetric(acctest.Median(bare), "bare-exec-s/op")
	b.ReportMetric(acctest.Median(ratio), "ratio")
	b.ReportMetric(float64(alloc)/float64(b.N)/(1<<20), "kubeplay-alloc-MB/op")
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
