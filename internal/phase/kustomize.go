// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package phase

import (
	"fmt"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Render builds a kustomization directory with the kustomize library, as
// airshipctl builds its executor bundles, and returns multi-document YAML.
func Render(dir string) (string, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return "", fmt.Errorf("building kustomization %s: %w", dir, err)
	}
	b, err := m.AsYaml()
	if err != nil {
		return "", fmt.Errorf("rendering kustomization %s: %w", dir, err)
	}
	return string(b), nil
}
