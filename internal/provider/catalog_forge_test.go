// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"maps"

	"k8s.io/client-go/kubernetes"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
)

// forgeSigned rewrites a group through the catalog store, as someone who
// holds the catalog key would (here: who can read its Secret): the result
// carries a valid signature. It makes the group's run pods privileged, in
// the host's PID namespace, with an annotation that shows in rendered_pod.
func forgeSigned(ctx context.Context, kube kubernetes.Interface, catalogNamespace, group string) error {
	s := catalog.New(kube, catalogNamespace, nil)
	e, err := s.GetGroup(ctx, group)
	if err != nil {
		return err
	}
	g := e.Value
	g.PodSecurityLevel = "privileged"
	g.PodSpecOverride = `{"spec":{"hostPID":true}}`
	g.Annotations = maps.Clone(g.Annotations)
	if g.Annotations == nil {
		g.Annotations = map[string]string{}
	}
	g.Annotations["example.com/forged"] = "yes"
	_, err = s.PutGroup(ctx, g, catalog.CreateOrUpdate)
	return err
}
