// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package phase

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/metadata"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

// The fakes stand in for the API server where its semantics are not the
// point: they store what is applied so that the engine's ordering, sets,
// inventory and waits can be checked without a cluster.

// listKinds are the list kinds of the fake's resources.
var listKinds = map[schema.GroupVersionResource]string{
	gvrConfigMap: "ConfigMapList", gvrNamespace: "NamespaceList", gvrDeployment: "DeploymentList",
	gvrJob: "JobList", gvrCRD: "CustomResourceDefinitionList", gvrWidget: "WidgetList",
}

var (
	gvrConfigMap  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	gvrNamespace  = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	gvrDeployment = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	gvrJob        = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
	gvrCRD        = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	gvrWidget     = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
)

// testMapper is a fixed REST mapper; Reset has nothing to forget.
type testMapper struct{ *meta.DefaultRESTMapper }

func (testMapper) Reset() {}

func newTestMapper(withWidgets bool) testMapper {
	// The group versions stand for discovery's preferred versions.
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Version: "v1"}, {Group: "apps", Version: "v1"}, {Group: "batch", Version: "v1"},
		{Group: "apiextensions.k8s.io", Version: "v1"}, {Group: "example.com", Version: "v1"}})
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, meta.RESTScopeRoot)
	m.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}, meta.RESTScopeRoot)
	if withWidgets {
		m.Add(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, meta.RESTScopeNamespace)
	}
	return testMapper{m}
}

// fakeCluster is a dynamic fake with server-side apply as create-or-replace,
// delete-collection by label, and an optional CRD controller.
type fakeCluster struct {
	t    *testing.T
	dyn  *dynamicfake.FakeDynamicClient
	kube *kubefake.Clientset

	mu sync.Mutex
	// applied lists "Kind name" of each apply, in order.
	applied []string
	// refuse, when set, may refuse an apply.
	refuse func(u *unstructured.Unstructured) error
	// establish marks each applied CRD Established, as the API server does.
	establish bool
}

func newFakeCluster(t *testing.T) *fakeCluster {
	t.Helper()
	f := &fakeCluster{t: t, dyn: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds), kube: kubefake.NewClientset()}
	f.dyn.PrependReactor("patch", "*", f.apply)
	f.dyn.PrependReactor("delete-collection", "*", f.deleteCollection)
	return f
}

func (f *fakeCluster) engine(phase string) *Engine {
	return newEngine(f.dyn, dynMeta{f.dyn}, newTestMapper(true), f.kube, phase, "kubeplay-system")
}

func (f *fakeCluster) apply(action k8stesting.Action) (bool, runtime.Object, error) {
	pa, ok := action.(k8stesting.PatchActionImpl)
	if !ok || pa.GetPatchType() != types.ApplyPatchType {
		return false, nil, nil
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(pa.GetPatch()); err != nil {
		return true, nil, err
	}
	u.SetNamespace(pa.GetNamespace())
	u.SetManagedFields([]metav1.ManagedFieldsEntry{{
		Manager: managed.FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: metav1.NewFieldsV1(string(pa.GetPatch())),
	}})
	f.mu.Lock()
	refuse := f.refuse
	f.mu.Unlock()
	if refuse != nil {
		if err := refuse(u); err != nil {
			return true, nil, err
		}
	}
	if len(pa.PatchOptions.DryRun) > 0 {
		return true, u, nil
	}
	if err := f.store(pa.GetResource(), u); err != nil {
		return true, nil, err
	}
	f.mu.Lock()
	f.applied = append(f.applied, u.GetKind()+" "+u.GetName())
	establish := f.establish
	f.mu.Unlock()
	if establish && u.GetKind() == "CustomResourceDefinition" {
		// As the API server would, a moment later.
		go f.setStatus(gvrCRD, "", u.GetName(), map[string]any{"conditions": []any{
			map[string]any{"type": "Established", "status": "True"}, map[string]any{"type": "NamesAccepted", "status": "True"},
		}})
	}
	return true, u, nil
}

// store creates u or replaces it, keeping its status.
func (f *fakeCluster) store(gvr schema.GroupVersionResource, u *unstructured.Unstructured) error {
	tr := f.dyn.Tracker()
	old, err := tr.Get(gvr, u.GetNamespace(), u.GetName())
	if apierrors.IsNotFound(err) {
		return tr.Create(gvr, u, u.GetNamespace())
	}
	if err != nil {
		return err
	}
	ou, ok := old.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("the tracker holds a %T, want *unstructured.Unstructured", old)
	}
	if st, ok := ou.Object["status"]; ok {
		u.Object["status"] = st
	}
	return tr.Update(gvr, u, u.GetNamespace())
}

// setStatus replaces the status of an object, as its controller would.
func (f *fakeCluster) setStatus(gvr schema.GroupVersionResource, ns, name string, status map[string]any) {
	tr := f.dyn.Tracker()
	o, err := tr.Get(gvr, ns, name)
	if err != nil {
		f.t.Errorf("setting the status of %s %s/%s: %v", gvr.Resource, ns, name, err)
		return
	}
	cur, ok := o.(*unstructured.Unstructured)
	if !ok {
		f.t.Errorf("setting the status of %s %s/%s: the tracker holds a %T", gvr.Resource, ns, name, o)
		return
	}
	u := cur.DeepCopy()
	u.Object["status"] = status
	if err := tr.Update(gvr, u, ns); err != nil {
		f.t.Errorf("setting the status of %s %s/%s: %v", gvr.Resource, ns, name, err)
	}
}

func (f *fakeCluster) deleteCollection(action k8stesting.Action) (bool, runtime.Object, error) {
	dc, ok := action.(k8stesting.DeleteCollectionActionImpl)
	if !ok {
		return true, nil, fmt.Errorf("delete-collection reactor got a %T", action)
	}
	sel, err := labels.Parse(dc.ListOptions.LabelSelector)
	if err != nil {
		return true, nil, err
	}
	l, err := f.list(dc.GetResource(), dc.GetNamespace())
	if err != nil {
		return true, nil, err
	}
	for _, o := range l {
		if sel.Matches(labels.Set(o.GetLabels())) {
			if err := f.dyn.Tracker().Delete(dc.GetResource(), dc.GetNamespace(), o.GetName()); err != nil {
				return true, nil, err
			}
		}
	}
	return true, nil, nil
}

// get and list read the tracker, as reactors must: the fake client's
// methods would wait for the lock the reactor runs under.
func (f *fakeCluster) get(gvr schema.GroupVersionResource, ns, name string) (*unstructured.Unstructured, error) {
	o, err := f.dyn.Tracker().Get(gvr, ns, name)
	if err != nil {
		return nil, err
	}
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("the tracker holds a %T, want *unstructured.Unstructured", o)
	}
	return u, nil
}

func (f *fakeCluster) list(gvr schema.GroupVersionResource, ns string) ([]*unstructured.Unstructured, error) {
	kind := strings.TrimSuffix(listKinds[gvr], "List")
	o, err := f.dyn.Tracker().List(gvr, gvr.GroupVersion().WithKind(kind), ns)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	err = meta.EachListItem(o, func(item runtime.Object) error {
		u, ok := item.(*unstructured.Unstructured)
		if !ok {
			return fmt.Errorf("list item %T", item)
		}
		out = append(out, u)
		return nil
	})
	return out, err
}

func (f *fakeCluster) appliedKinds() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.applied...)
}

// dynMeta serves the metadata calls the engine makes (Get, List) from the
// dynamic fake, so that both see the same objects.
type dynMeta struct {
	dyn *dynamicfake.FakeDynamicClient
}

func (d dynMeta) Resource(gvr schema.GroupVersionResource) metadata.Getter {
	return dynMetaResource{dyn: d.dyn, gvr: gvr}
}

type dynMetaResource struct {
	metadata.ResourceInterface // the engine calls no other method
	dyn                        *dynamicfake.FakeDynamicClient
	gvr                        schema.GroupVersionResource
	ns                         string
}

func (r dynMetaResource) Namespace(ns string) metadata.ResourceInterface {
	r.ns = ns
	return r
}

func partial(u *unstructured.Unstructured) metav1.PartialObjectMetadata {
	return metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: u.GetAPIVersion(), Kind: u.GetKind()},
		ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), Namespace: u.GetNamespace(), Labels: u.GetLabels(),
			ManagedFields: u.GetManagedFields()},
	}
}

func (r dynMetaResource) Get(ctx context.Context, name string, opts metav1.GetOptions, _ ...string) (*metav1.PartialObjectMetadata, error) {
	u, err := r.dyn.Resource(r.gvr).Namespace(r.ns).Get(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	p := partial(u)
	return &p, nil
}

func (r dynMetaResource) List(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	l, err := r.dyn.Resource(r.gvr).Namespace(r.ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	out := &metav1.PartialObjectMetadataList{}
	for i := range l.Items {
		out.Items = append(out.Items, partial(&l.Items[i]))
	}
	return out, nil
}

func cm(ns, name string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: %s}\ndata: {k: v}\n", name, ns)
}
