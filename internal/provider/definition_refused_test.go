// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
)

// Groups and labels changed outside kubeplay are refused with the summary
// and repair credentials have, at the attribute that names them; an error
// of another kind is left to the caller.
func TestAddDefinitionRefused(t *testing.T) {
	for _, c := range []struct {
		err          error
		summary, at  string
		typ          string
		refusedAtAll bool
	}{
		{err: tampered(t, catalog.KindGroup, "g"), summary: "Container Group Changed Outside Kubeplay", at: "container_group",
			typ: "kubeplay_container_group", refusedAtAll: true},
		{err: tampered(t, catalog.KindLabel, "l"), summary: "Node Label Changed Outside Kubeplay", at: "node_label",
			typ: "kubeplay_node_label", refusedAtAll: true},
		{err: errors.New("unreachable")},
	} {
		var d diag.Diagnostics
		got := addDefinitionRefused(&d, path.Root("container_group"), c.err)
		if got != c.refusedAtAll {
			t.Fatalf("%v: refused %v", c.err, got)
		}
		if !got {
			if d.HasError() {
				t.Errorf("%v: diagnostics %v", c.err, d)
			}
			continue
		}
		e := d.Errors()[0]
		ad, ok := e.(diag.DiagnosticWithPath)
		if e.Summary() != c.summary || !ok || !ad.Path().Equal(path.Root(c.at)) {
			t.Errorf("%v: %q at %v", c.err, e.Summary(), d)
		}
		if !strings.Contains(e.Detail(), "Nothing was started") || !strings.Contains(e.Detail(), "manages the "+c.typ) {
			t.Errorf("detail: %s", e.Detail())
		}
	}
}

// tampered reads a definition of kind k whose ConfigMap or PodTemplate
// carries no signature, through its Trusted getter.
func tampered(t *testing.T, k catalog.Kind, name string) error {
	t.Helper()
	kube := fake.NewClientset()
	s := catalog.New(kube, "kp", nil)
	ctx := context.Background()
	var err error
	switch k {
	case catalog.KindGroup:
		if _, err = s.PutGroup(ctx, catalog.Group{Name: name, Namespace: "runs", Image: "i"}, catalog.NewOnly); err == nil {
			cm, _ := kube.CoreV1().ConfigMaps("kp").Get(ctx, name, metav1.GetOptions{})
			cm.Data[catalog.GroupPodKey] = "edited"
			_, _ = kube.CoreV1().ConfigMaps("kp").Update(ctx, cm, metav1.UpdateOptions{})
			_, err = s.TrustedGroup(ctx, name)
		}
	case catalog.KindLabel:
		if _, err = s.PutLabel(ctx, podspec.Label{Name: name, Type: podspec.TypePod, Image: "i"}, catalog.NewOnly); err == nil {
			pt, _ := kube.CoreV1().PodTemplates("kp").Get(ctx, name, metav1.GetOptions{})
			pt.Template.Spec.Containers[0].Image = "edited"
			_, _ = kube.CoreV1().PodTemplates("kp").Update(ctx, pt, metav1.UpdateOptions{})
			_, err = s.TrustedLabel(ctx, name)
		}
	}
	if !errors.Is(err, catalog.ErrTampered) {
		t.Fatalf("%s %s: %v, want ErrTampered", k, name, err)
	}
	return err
}
