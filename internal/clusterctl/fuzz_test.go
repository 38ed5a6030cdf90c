// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package clusterctl

import (
	"testing"
)

// FuzzProviderValidate: whatever a user pastes as components, metadata and
// version, validation returns an error or nil, never panics, and accepts
// only a version whose series the metadata lists.
func FuzzProviderValidate(f *testing.F) {
	f.Add(testComponents, testMetadata, "v1.14.2")
	f.Add("kind: [", "releaseSeries: 3", "v1")
	f.Add("---\n---\n", "apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3\nkind: Metadata\n", "v0.0.0-rc.1+x")
	f.Fuzz(func(t *testing.T, components, metadata, version string) {
		p := Provider{Name: "p", Type: "CoreProvider", Version: version, Components: components, Metadata: metadata}
		if err := p.Validate(); err == nil && (version == "" || version[0] != 'v') {
			t.Fatalf("accepted version %q", version)
		}
	})
}
