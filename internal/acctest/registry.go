package acctest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// RegistryImage is a copy of DefaultTestImage that an OCI registry serves
// over plain HTTP on 127.0.0.1, in the test's process, for the test's
// lifetime (ServeTestImage). The local test cluster's node pulls it like an
// image of any registry: its repository name is new for each call, and its
// top layer is new for each call too, so the node never has it before the
// test's first pull and has to fetch at least that layer.
type RegistryImage struct {
	// Ref is the image's reference, 127.0.0.1:<port>/<repository>/kubeplay-test:v1.
	Ref string
	// Repository is the image's repository, 127.0.0.1:<port>/<repository>/kubeplay-test.
	Repository string

	delay            time.Duration
	id               string      // the image's ID (its config's digest), a reference the CRI adds
	serving          atomic.Bool // the image is pushed: count requests from then on
	blobs, manifests atomic.Int64
}

// BlobGets is the number of blob downloads (GET .../blobs/<digest>) the
// registry served since the image was pushed: the node's pulls.
func (r *RegistryImage) BlobGets() int64 { return r.blobs.Load() }

// ManifestRequests is the number of manifest requests (GET or HEAD
// .../manifests/<ref>) the registry served since the image was pushed.
func (r *RegistryImage) ManifestRequests() int64 { return r.manifests.Load() }

// registryImageTag is the tag of every RegistryImage.
const registryImageTag = "v1"

// ServeTestImage starts an OCI registry (go-containerregistry's
// pkg/registry) on 127.0.0.1:<free port> that serves a copy of
// DefaultTestImage, made from the harness' tarball <cache>/testcluster/img/ee.tar,
// under a repository of its own, and stops it when the test ends. The copy
// has the tarball's layer and config, plus a small layer of its own (a file
// /etc/kubeplay-registry-test naming the repository): the node has the base
// layer already (it imported the tarball), so a pull fetches the manifest,
// the config and that layer, and unpacks the layer.
//
// Every blob download waits blobDelay first, to make a pull measurably long.
// The node pulls from the registry without configuration: with config_path
// set and no hosts.toml for the host, containerd's CRI speaks plain HTTP to
// a registry on a loopback address (its hosts config treats localhost and
// 127.0.0.1 so; seen on the harness' containerd 1.6.20).
//
// When the test ends, the registry stops and the image is removed from the
// node's containerd (best effort; the kubelet's image GC would remove it in
// time): its references in the test's own repository and its ID, which its
// own top layer makes unique; never the harness' images.
//
// It skips t unless the cluster is the local test cluster (only its node
// reaches this machine's 127.0.0.1).
func ServeTestImage(t testing.TB, blobDelay time.Duration) *RegistryImage {
	t.Helper()
	Kubeconfig(t) // starts the local cluster, which builds the tarball
	if os.Getenv(EnvKubeconfig) != "" && !localCluster() {
		t.Skipf("%s names a cluster of your own: its nodes cannot reach a registry on this machine's 127.0.0.1", EnvKubeconfig)
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(cacheDir(root), "testcluster", "img", "ee.tar")

	var id [6]byte
	_, _ = rand.Read(id[:])
	repo := "acctest-" + hex.EncodeToString(id[:])

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("registry: %v", err)
	}
	host := ln.Addr().String()
	r := &RegistryImage{
		Repository: host + "/" + repo + "/kubeplay-test",
		delay:      blobDelay,
	}
	r.Ref = r.Repository + ":" + registryImageTag

	img, base, err := registryTestImage(archive, repo)
	if err == nil {
		var cfg v1.Hash
		cfg, err = img.ConfigName()
		r.id = cfg.String()
	}
	if err != nil {
		ln.Close()
		t.Fatalf("registry: the image from %s: %v", archive, err)
	}
	mem, ok := registry.NewInMemoryBlobHandler().(blobHandler)
	if !ok {
		ln.Close()
		t.Fatal("registry: the in-memory blob handler cannot stat or put blobs")
	}
	reg := registry.New(
		registry.Logger(log.New(io.Discard, "", 0)),
		registry.WithBlobHandler(&blobStore{mem: mem, base: base}),
	)
	srv := &http.Server{Handler: r.wrap(reg), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		// Close, not Shutdown: a pull still under way (a failed test) ends now.
		srv.Close()
		removeNodeImages(t, r.Repository, r.id)
	})

	ref, err := name.ParseReference(r.Ref)
	if err != nil {
		t.Fatal(err)
	}
	// A transport of our own: never through a proxy of the environment.
	tr := &http.Transport{Proxy: nil, DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	if err := remote.Write(ref, img, remote.WithTransport(tr), remote.WithContext(ctx)); err != nil {
		t.Fatalf("registry: pushing %s: %v", r.Ref, err)
	}
	r.serving.Store(true)
	t.Logf("registry: serving %s (pushed in %s; blob downloads wait %s)", r.Ref, time.Since(start).Round(time.Millisecond), blobDelay)
	return r
}

// wrap counts the registry's manifest requests and blob downloads, and
// delays the downloads.
func (r *RegistryImage) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if r.serving.Load() {
			p := req.URL.Path
			switch {
			case strings.Contains(p, "/manifests/") && (req.Method == http.MethodGet || req.Method == http.MethodHead):
				r.manifests.Add(1)
			case strings.Contains(p, "/blobs/sha256:") && req.Method == http.MethodGet:
				r.blobs.Add(1)
				select {
				case <-time.After(r.delay):
				case <-req.Context().Done():
					return
				}
			}
		}
		h.ServeHTTP(w, req)
	})
}

// registryTestImage is the image of the docker-archive tarball at archive
// (one layer, as tools/testcluster/mkimage.sh writes it) with a layer of its
// own on top that names repo. The base layer stays uncompressed, as in the
// tarball (its digest is its diff ID: nothing is compressed or hashed here);
// it is returned to be served from the tarball.
func registryTestImage(archive, repo string) (v1.Image, archiveLayer, error) {
	opener := func() (io.ReadCloser, error) { return os.Open(archive) }
	m, err := tarball.LoadManifest(opener)
	if err != nil {
		return nil, archiveLayer{}, err
	}
	if len(m) != 1 || len(m[0].Layers) != 1 || len(m[0].RepoTags) != 1 || m[0].RepoTags[0] != DefaultTestImage {
		return nil, archiveLayer{}, fmt.Errorf("want one image, %s, of one layer; manifest.json has %+v", DefaultTestImage, m)
	}
	src, err := tarball.Image(opener, nil)
	if err != nil {
		return nil, archiveLayer{}, err
	}
	cf, err := src.ConfigFile() // reads the config only: no layer is hashed
	if err != nil {
		return nil, archiveLayer{}, err
	}
	if len(cf.RootFS.DiffIDs) != 1 {
		return nil, archiveLayer{}, fmt.Errorf("config has %d diff IDs, want 1", len(cf.RootFS.DiffIDs))
	}
	base := archiveLayer{archive: archive, member: m[0].Layers[0], diffID: cf.RootFS.DiffIDs[0]}
	if base.size, err = base.memberSize(); err != nil {
		return nil, archiveLayer{}, err
	}
	history := v1.History{CreatedBy: "tools/testcluster/mkimage.sh"}
	if len(cf.History) > 0 {
		history = cf.History[0]
	}
	cf = cf.DeepCopy()
	cf.RootFS.DiffIDs, cf.History = nil, nil
	img, err := mutate.ConfigFile(empty.Image, cf)
	if err != nil {
		return nil, archiveLayer{}, err
	}
	top, err := uniqueLayer(repo)
	if err != nil {
		return nil, archiveLayer{}, err
	}
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: history},
		mutate.Addendum{Layer: top, History: v1.History{CreatedBy: "acctest.ServeTestImage", Created: v1.Time{Time: time.Unix(0, 0).UTC()}}},
	)
	return img, base, err
}

// uniqueLayer is a gzip-compressed layer of one file,
// /etc/kubeplay-registry-test, that holds repo.
func uniqueLayer(repo string) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	content := []byte(repo + "\n")
	for _, h := range []*tar.Header{
		{Name: "etc/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "etc/kubeplay-registry-test", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(content))},
	} {
		h.ModTime = time.Unix(0, 0)
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
	}
	if _, err := tw.Write(content); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
}

// archiveLayer is the layer of a docker-archive tarball (member, e.g.
// <diff-id>/layer.tar), uncompressed: its digest is its diff ID.
type archiveLayer struct {
	archive, member string
	diffID          v1.Hash
	size            int64
}

var _ v1.Layer = archiveLayer{}

func (l archiveLayer) Digest() (v1.Hash, error)            { return l.diffID, nil }
func (l archiveLayer) DiffID() (v1.Hash, error)            { return l.diffID, nil }
func (l archiveLayer) Size() (int64, error)                { return l.size, nil }
func (l archiveLayer) MediaType() (types.MediaType, error) { return types.DockerUncompressedLayer, nil }
func (l archiveLayer) Compressed() (io.ReadCloser, error)  { return l.Uncompressed() }

func (l archiveLayer) Uncompressed() (io.ReadCloser, error) {
	f, tr, hdr, err := l.open()
	if err != nil {
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(tr, hdr.Size), f}, nil
}

func (l archiveLayer) memberSize() (int64, error) {
	f, _, hdr, err := l.open()
	if err != nil {
		return 0, err
	}
	f.Close()
	return hdr.Size, nil
}

// open finds the layer's member in the archive.
func (l archiveLayer) open() (*os.File, *tar.Reader, *tar.Header, error) {
	f, err := os.Open(l.archive)
	if err != nil {
		return nil, nil, nil, err
	}
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err != nil {
			f.Close()
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("%s has no %s", l.archive, l.member)
			}
			return nil, nil, nil, err
		}
		if filepath.Clean(hdr.Name) == filepath.Clean(l.member) {
			return f, tr, hdr, nil
		}
	}
}

// blobStore serves the base layer from the harness' tarball, never copied
// (the push finds it there and skips it), and keeps the other blobs (the
// config, the top layer: a few KiB) in memory.
type blobStore struct {
	mem  blobHandler // registry.NewInMemoryBlobHandler
	base archiveLayer
}

// blobHandler is a blob store that can also stat and put blobs.
type blobHandler interface {
	registry.BlobHandler
	registry.BlobStatHandler
	registry.BlobPutHandler
}

var _ blobHandler = (*blobStore)(nil)

func (s *blobStore) Get(ctx context.Context, repo string, h v1.Hash) (io.ReadCloser, error) {
	if h == s.base.diffID {
		return s.base.Uncompressed()
	}
	return s.mem.Get(ctx, repo, h)
}

func (s *blobStore) Stat(ctx context.Context, repo string, h v1.Hash) (int64, error) {
	if h == s.base.diffID {
		return s.base.size, nil
	}
	return s.mem.Stat(ctx, repo, h)
}

func (s *blobStore) Put(ctx context.Context, repo string, h v1.Hash, rc io.ReadCloser) error {
	return s.mem.Put(ctx, repo, h, rc)
}

// removeNodeImages removes from the local test cluster's containerd (CRI
// namespace k8s.io) the images whose names are in repository (repo:tag and
// repo@digest), and the one named id (sha256:<config digest>), with ctr.
// Best effort: a failure is logged.
func removeNodeImages(t testing.TB, repository, id string) {
	state := os.Getenv("KUBEPLAY_CLUSTER_DIR")
	if state == "" {
		state = "/var/lib/kubeplay-testcluster"
	}
	sock := filepath.Join(state, "run", "containerd", "containerd.sock")
	ctr, err := exec.LookPath("ctr")
	if err != nil {
		t.Logf("registry: not removing %s from the node: %v", repository, err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, ctr, "--address", sock, "-n", "k8s.io", "images", "ls", "-q").Output()
	if err != nil {
		t.Logf("registry: not removing %s from the node: ctr images ls: %v", repository, err)
		return
	}
	var refs []string
	for _, ref := range strings.Fields(string(out)) {
		if strings.HasPrefix(ref, repository+":") || strings.HasPrefix(ref, repository+"@") || ref == id {
			refs = append(refs, ref)
		}
	}
	if len(refs) == 0 {
		return
	}
	if out, err := exec.CommandContext(ctx, ctr, append([]string{"--address", sock, "-n", "k8s.io", "images", "rm"}, refs...)...).CombinedOutput(); err != nil {
		t.Logf("registry: removing %s from the node: %v: %s", strings.Join(refs, " "), err, out)
	}
}
