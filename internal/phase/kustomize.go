// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package phase

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/strictyaml"
)

// RenderOptions say what a kustomization may reach beyond its directory.
type RenderOptions struct {
	// AllowRemote lets resources, bases, components and other paths be
	// URLs: HTTP(S) files are fetched within Fetch's bounds, git
	// repositories are cloned by kustomize with its own per-command timeout.
	AllowRemote bool
	// Fetch bounds HTTP(S) downloads when AllowRemote is set.
	Fetch FetchLimits
}

// RemoteError is a remote reference in a kustomization that rendering was
// not allowed to fetch. File is the kustomization file, Field the field
// (with its index) that holds URL.
type RemoteError struct {
	URL, File, Field string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("%s: %s refers to remote %q, which is not fetched unless remote kustomizations are allowed",
		e.File, e.Field, e.URL)
}

// Render builds a kustomization directory with the kustomize library, as
// airshipctl builds its executor bundles, and returns multi-document YAML.
// Every kustomization the build reads locally is checked first: without
// AllowRemote, a remote reference is a *RemoteError (all of them, joined)
// and nothing is fetched or cloned.
func Render(dir string, opts RenderOptions) (string, error) {
	refs, err := RemoteRefs(dir)
	if err != nil {
		return "", err
	}
	fsys := filesys.MakeFsOnDisk()
	if len(refs) > 0 {
		if !opts.AllowRemote {
			errs := make([]error, len(refs))
			for i := range refs {
				errs[i] = &refs[i]
			}
			return "", errors.Join(errs...)
		}
		if fsys, err = prefetch(fsys, refs, opts.Fetch); err != nil {
			return "", err
		}
	}
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(fsys, dir)
	if err != nil {
		return "", fmt.Errorf("building kustomization %s: %w", dir, err)
	}
	b, err := m.AsYaml()
	if err != nil {
		return "", fmt.Errorf("rendering kustomization %s: %w", dir, err)
	}
	return string(b), nil
}

// pathFields are the kustomization fields whose entries kustomize may load
// as a file, a directory or a repository, each either a list of strings or
// a list of objects with a "path" key; "dirs" are those followed into
// local directories.
var (
	listFields  = []string{"resources", "bases", "components", "generators", "transformers", "validators", "crds", "configurations", "patchesStrategicMerge"}
	pathFields  = []string{"patches", "patchesJson6902", "replacements"}
	dirFields   = map[string]bool{"resources": true, "bases": true, "components": true, "generators": true, "transformers": true, "validators": true}
	genFields   = []string{"configMapGenerator", "secretGenerator"}
	hostPrefix  = regexp.MustCompile(`^[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+(:[0-9]+)?/`)
	schemeOfURL = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)
)

// isRemote reports whether kustomize would fetch s rather than read it
// from dir: a URL of any scheme, a go-getter "git::" form, an scp-like
// "git@host:" form, or a host-first form such as github.com/org/repo that
// does not name an existing local path.
func isRemote(dir, s string) bool {
	switch {
	case strings.ContainsAny(s, "\n"):
		return false // an inline document or patch
	case schemeOfURL.MatchString(s), strings.HasPrefix(s, "git::"), strings.HasPrefix(s, "git@"):
		return true
	case hostPrefix.MatchString(s):
		_, err := os.Lstat(filepath.Join(dir, s))
		return err != nil
	}
	return false
}

// RemoteRefs lists the remote references of the kustomization in dir and
// of every local kustomization it reaches, in a stable order, without
// fetching anything. A kustomization file that is not strict YAML is an
// error, since its references cannot be checked.
func RemoteRefs(dir string) ([]RemoteError, error) {
	var out []RemoteError
	seen := map[string]bool{}
	queue := []string{dir}
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		abs, err := filepath.Abs(d)
		if err != nil {
			continue
		}
		if resolved, err := filepath.EvalSymlinks(abs); err == nil {
			abs = resolved // kustomize reads through symlinks too
		}
		if seen[abs] {
			continue
		}
		seen[abs] = true
		file, k, err := readKustomization(abs)
		if err != nil {
			// Fail closed: references in a file not read are not checked.
			return nil, err
		}
		if file == "" {
			continue // a file or a plain directory, which kustomize judges
		}
		refs, local := scanKustomization(abs, file, k)
		out = append(out, refs...)
		queue = append(queue, local...)
	}
	return out, nil
}

// readKustomization reads the kustomization file of dir; file is "" when
// dir has none (or is a file, or missing).
func readKustomization(dir string) (string, map[string]any, error) {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist), err == nil && !fi.IsDir():
		return "", nil, nil // kustomize reports a missing path itself
	case err != nil:
		return "", nil, err
	}
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		p := filepath.Join(dir, name)
		b, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", nil, err
		}
		j, err := strictyaml.ToJSON(b)
		if err != nil {
			return "", nil, fmt.Errorf("reading %s: %w", p, err)
		}
		var k map[string]any
		if err := json.Unmarshal(j, &k); err != nil {
			return "", nil, fmt.Errorf("reading %s: the file is not a YAML mapping", p)
		}
		return p, k, nil
	}
	return "", nil, nil
}

// scanKustomization returns the remote references of one kustomization
// and the local directories to scan next.
func scanKustomization(dir, file string, k map[string]any) (refs []RemoteError, local []string) {
	check := func(field string, s string, follow bool) {
		switch {
		case s == "":
		case isRemote(dir, s):
			refs = append(refs, RemoteError{URL: s, File: file, Field: field})
		case follow && !filepath.IsAbs(s):
			local = append(local, filepath.Join(dir, s))
		}
	}
	for _, f := range listFields {
		l, _ := k[f].([]any)
		for i, e := range l {
			if s, ok := e.(string); ok {
				check(fmt.Sprintf("%s[%d]", f, i), s, dirFields[f])
			}
		}
	}
	for _, f := range pathFields {
		l, _ := k[f].([]any)
		for i, e := range l {
			if m, ok := e.(map[string]any); ok {
				s, _ := m["path"].(string)
				check(fmt.Sprintf("%s[%d].path", f, i), s, false)
			}
		}
	}
	if m, ok := k["openapi"].(map[string]any); ok {
		s, _ := m["path"].(string)
		check("openapi.path", s, false)
	}
	for _, f := range genFields {
		l, _ := k[f].([]any)
		for i, e := range l {
			g, _ := e.(map[string]any)
			for _, sub := range []string{"files", "envs"} {
				fl, _ := g[sub].([]any)
				for j, x := range fl {
					s, _ := x.(string)
					if _, p, ok := strings.Cut(s, "="); ok && !isRemote(dir, s) {
						s = p // key=path
					}
					check(fmt.Sprintf("%s[%d].%s[%d]", f, i, sub, j), s, false)
				}
			}
			if s, ok := g["env"].(string); ok {
				check(fmt.Sprintf("%s[%d].env", f, i), s, false)
			}
		}
	}
	return refs, local
}
