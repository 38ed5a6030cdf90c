// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package runner_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
)

// cutFirstCreate carries out the first pod create, then, before its answer
// arrives, lets impostor copy the pod and breaks the connection.
type cutFirstCreate struct {
	next     http.RoundTripper
	once     sync.Once
	impostor func(made *corev1.Pod)
}

func (c *cutFirstCreate) RoundTrip(req *http.Request) (*http.Response, error) {
	cut := false
	if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/pods") {
		c.once.Do(func() { cut = true })
	}
	resp, err := c.next.RoundTrip(req)
	if !cut || err != nil {
		return resp, err
	}
	defer resp.Body.Close()
	// The answer is JSON or protobuf, as the client asked.
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil); err == nil {
		if made, ok := obj.(*corev1.Pod); ok {
			c.impostor(made)
		}
	}
	return nil, io.ErrUnexpectedEOF
}

// TestAccCreateRetryRefusesImpostor (the security model's "Pod creators"):
// the run pod's create is carried out but its connection breaks, and in
// that window a pod creator who read the pod makes another with the same
// labels and the same kubeplay.io/create mark, named to be listed first.
// The retry still runs the playbook in the pod kubeplay made, never in the
// impostor, and leaves the impostor alone.
func TestAccCreateRetryRefusesImpostor(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var made, impostor *corev1.Pod
	cfg := rest.CopyConfig(e.r.Config)
	cut := &cutFirstCreate{impostor: func(p *corev1.Pod) {
		made = p
		fake := e.pod(acctest.TestImage())
		fake.GenerateName, fake.Name = "", "a-impostor"
		fake.Labels, fake.Annotations = p.Labels, p.Annotations
		fake.Spec.Containers[0].Command, fake.Spec.Containers[0].Args = []string{"sleep", "300"}, nil
		var err error
		if impostor, err = e.kube.CoreV1().Pods(e.ns).Create(ctx, fake, metav1.CreateOptions{}); err != nil {
			t.Errorf("creating the impostor: %v", err)
		}
	}}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { cut.next = rt; return cut })
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &runner.Runner{Config: e.r.Config, Kube: kube}
	// 10 minutes: on a slower 2-core machine under make test-all's load the
	// two tasks passed 5.
	rctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	res := r.Run(rctx, e.spec(bundle.Bundle{Playbook: twoTasks}))
	if made == nil || impostor == nil {
		t.Fatalf("the create was not cut, or no impostor made; the run: %+v", res)
	}
	defer func() { _ = runner.DeletePod(context.Background(), e.kube, e.ns, impostor.Name, impostor.UID) }()
	if res.Status != runner.StatusSuccessful || res.PodName != made.Name {
		t.Fatalf("the run ran in pod %q (%s, %s), want kubeplay's own %q, never the impostor %q",
			res.PodName, res.Status, res.Message, made.Name, impostor.Name)
	}
	left, err := e.kube.CoreV1().Pods(e.ns).Get(ctx, impostor.Name, metav1.GetOptions{})
	if err != nil || left.UID != impostor.UID || left.DeletionTimestamp != nil {
		t.Errorf("the impostor was touched: %v", err)
	}
	if err := runner.DeletePod(ctx, e.kube, e.ns, impostor.Name, impostor.UID); err != nil {
		t.Fatal(err)
	}
	e.gone(res)
}
