// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package phase

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/strictyaml"
)

// FetchLimits bound the HTTP(S) download of one remote file. Kustomize
// v0.21 fetches with an http.Client of no timeout and reads the whole
// body, and offers no option to change that, so the phase fetches such
// files itself and hands kustomize local copies.
type FetchLimits struct {
	Timeout  time.Duration
	MaxBytes int64
}

// DefaultFetchLimits: 30 seconds and 8 MiB per file.
var DefaultFetchLimits = FetchLimits{Timeout: 30 * time.Second, MaxBytes: 8 << 20}

// FetchError is a remote file that could not be fetched within the limits.
type FetchError struct {
	URL string
	Err error
}

func (e *FetchError) Error() string { return fmt.Sprintf("fetching %s: %v", e.URL, e.Err) }

func (e *FetchError) Unwrap() error { return e.Err }

// isGitURL reports whether kustomize would clone s rather than download
// it: kustomize leaves those to git, run with its own timeout per command
// (27 s, or the URL's ?timeout=).
func isGitURL(s string) bool {
	if !strings.HasPrefix(s, "http://") && !strings.HasPrefix(s, "https://") {
		return true // git::, ssh://, git@host:, github.com/org/repo, file://
	}
	u, err := url.Parse(s)
	if err != nil {
		return true
	}
	q := u.Query()
	switch {
	case q.Has("ref"), q.Has("version"), q.Has("submodules"), q.Has("timeout"):
		return true
	case strings.Contains(u.Path, "//"), strings.Contains(u.Path, ".git"), strings.Contains(u.Path, "/_git/"):
		return true
	case u.Host == "github.com", u.Host == "gitlab.com", u.Host == "bitbucket.org":
		return true
	}
	return false
}

// prefetch downloads the HTTP(S) files refs name, within lim, and returns
// fsys overlaid with the copies and with kustomization files that name the
// copies instead of the URLs.
func prefetch(fsys filesys.FileSystem, refs []RemoteError, lim FetchLimits) (filesys.FileSystem, error) {
	o := &overlayFS{FileSystem: fsys, files: map[string][]byte{}}
	byFile := map[string]map[string]string{} // kustomization file -> URL -> local name
	for _, r := range refs {
		if isGitURL(r.URL) {
			continue
		}
		b, err := fetch(r.URL, lim)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256([]byte(r.URL))
		name := ".kubeplay-remote-" + hex.EncodeToString(sum[:8]) + path.Ext(strings.SplitN(r.URL, "?", 2)[0])
		o.files[filepath.Join(filepath.Dir(r.File), name)] = b
		if byFile[r.File] == nil {
			byFile[r.File] = map[string]string{}
		}
		byFile[r.File][r.URL] = name
	}
	for file, names := range byFile {
		b, err := fsys.ReadFile(file)
		if err != nil {
			return nil, err
		}
		j, err := strictyaml.ToJSON(b)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", file, err)
		}
		var k any
		if err := yaml.Unmarshal(j, &k); err != nil {
			return nil, fmt.Errorf("reading %s: %w", file, err)
		}
		if o.files[file], err = yaml.Marshal(replaceURLs(k, names)); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// replaceURLs replaces every string that is a URL of names, or key=URL,
// with its local name.
func replaceURLs(v any, names map[string]string) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = replaceURLs(e, names)
		}
	case []any:
		for i, e := range x {
			x[i] = replaceURLs(e, names)
		}
	case string:
		if n, ok := names[x]; ok {
			return n
		}
		if k, u, ok := strings.Cut(x, "="); ok {
			if n, ok := names[u]; ok {
				return k + "=" + n
			}
		}
	}
	return v
}

// fetch downloads one file within lim.
func fetch(u string, lim FetchLimits) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), lim.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, &FetchError{URL: u, Err: err}
	}
	resp, err := (&http.Client{Timeout: lim.Timeout}).Do(req)
	if err != nil {
		return nil, &FetchError{URL: u, Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, &FetchError{URL: u, Err: fmt.Errorf("status %s", resp.Status)}
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, lim.MaxBytes+1))
	if err != nil {
		return nil, &FetchError{URL: u, Err: err}
	}
	if int64(len(b)) > lim.MaxBytes {
		return nil, &FetchError{URL: u, Err: fmt.Errorf("larger than %d bytes", lim.MaxBytes)}
	}
	return b, nil
}

// overlayFS is the disk with some files replaced or added in memory; it
// serves kustomize's reads, which go through ReadFile, Exists, IsDir and
// CleanedAbs.
type overlayFS struct {
	filesys.FileSystem
	files map[string][]byte
}

func (o *overlayFS) get(p string) ([]byte, bool) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return nil, false
	}
	b, ok := o.files[abs]
	return b, ok
}

func (o *overlayFS) ReadFile(p string) ([]byte, error) {
	if b, ok := o.get(p); ok {
		return b, nil
	}
	return o.FileSystem.ReadFile(p)
}

func (o *overlayFS) Exists(p string) bool {
	_, ok := o.get(p)
	return ok || o.FileSystem.Exists(p)
}

func (o *overlayFS) IsDir(p string) bool {
	if _, ok := o.get(p); ok {
		return false
	}
	return o.FileSystem.IsDir(p)
}

func (o *overlayFS) CleanedAbs(p string) (filesys.ConfirmedDir, string, error) {
	if _, ok := o.get(p); ok {
		abs, _ := filepath.Abs(p)
		return filesys.ConfirmedDir(filepath.Dir(abs)), filepath.Base(abs), nil
	}
	return o.FileSystem.CleanedAbs(p)
}
