package runner_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/podspec"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/projectdir"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
)

const twoTasks = `- hosts: all
  gather_facts: false
  tasks:
    - command: "true"
    - debug: {msg: done}
`

type env struct {
	t    *testing.T
	r    *runner.Runner
	kube kubernetes.Interface
	ns   string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	cfg, kube := acctest.Clients(t)
	acctest.Parallel(t)
	return &env{t: t, r: &runner.Runner{Config: cfg, Kube: kube}, kube: kube, ns: acctest.Namespace(t, kube, "kp-runner")}
}

// newSecondDisruptiveEnv is newEnv on the local second cluster, for a test
// that disturbs it as a whole: its other tests (acctest.ClusterAPILock's)
// wait, the first cluster's do not. why says how.
func newSecondDisruptiveEnv(t *testing.T, why string) *env {
	t.Helper()
	if os.Getenv("TF_ACC") == "" {
		t.Skip("acceptance test against the local second cluster: set TF_ACC=1")
	}
	acctest.Disruptive(t, why)
	acctest.Exclusive(t, acctest.ClusterAPILock)
	cfg := acctest.RESTConfigOf(t, acctest.LocalSecondKubeconfig(t))
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, r: &runner.Runner{Config: cfg, Kube: kube}, kube: kube, ns: acctest.Namespace(t, kube, "kp-runner")}
}

func (e *env) pod(image string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "run-", Namespace: e.ns,
			Labels: map[string]string{managed.LabelManagedBy: managed.ManagedByValue}},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			AutomountServiceAccountToken:  ptr.To(false),
			Containers: []corev1.Container{{
				Name: "worker", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
				Args: podspec.WorkerArgs,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi"),
				}},
			}},
		},
	}
}

func (e *env) spec(b bundle.Bundle) runner.Spec {
	b.Marker = "\x1ekubeplay-runner-test "
	// The product's default pending timeout: under the parallel suite the
	// node is often full, and a run's pod waits for room as a user's would.
	return runner.Spec{Pod: e.pod(acctest.TestImage()), Container: "worker", Bundle: b, OutputLimit: 64 << 10, PendingTimeout: 5 * time.Minute}
}

// gone fails the test unless the run's pod no longer exists, and no
// kubeplay pod or Secret is left in the namespace (acctest.Leaks).
func (e *env) gone(res runner.Result) {
	e.t.Helper()
	defer acctest.CheckNoLeaks(e.t, e.kube, acctest.LeakScope{Namespaces: []string{e.ns}})
	if res.PodName == "" {
		return
	}
	_, err := e.kube.CoreV1().Pods(e.ns).Get(context.Background(), res.PodName, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		e.t.Fatalf("pod %s still exists after the run (err=%v)", res.PodName, err)
	}
}

func TestAccRunSuccessfulAndFailed(t *testing.T) {
	e := newEnv(t)
	var lines []string
	s := e.spec(bundle.Bundle{Playbook: twoTasks})
	s.OnLine = func(l string) { lines = append(lines, l) }
	res := e.r.Run(context.Background(), s)
	if res.Status != runner.StatusSuccessful || res.ExitCode != 0 || res.Hosts["localhost"].OK != 2 ||
		res.HostCounts != (bundle.HostCounts{Changed: 1}) || len(res.FailedHosts) != 0 { // command reports a change
		t.Fatalf("result %+v", res)
	}
	if res.NodeName == "" || !res.FinishedAt.After(res.StartedAt) || !strings.Contains(res.Output, "PLAY RECAP") {
		t.Fatalf("record incomplete: node %q, %s..%s, output %q", res.NodeName, res.StartedAt, res.FinishedAt, res.Output)
	}
	if len(lines) == 0 || !strings.Contains(strings.Join(lines, "\n"), "PLAY RECAP") {
		t.Fatalf("output lines were not streamed: %q", lines)
	}
	e.gone(res)

	res = e.r.Run(context.Background(), e.spec(bundle.Bundle{Playbook: "- hosts: all\n  gather_facts: false\n  tasks:\n    - fail: {msg: boom}\n"}))
	if res.Status != runner.StatusFailed || res.ExitCode != 2 || res.Hosts["localhost"].Failed != 1 || !strings.Contains(res.Output, "boom") ||
		res.HostCounts != (bundle.HostCounts{Failed: 1}) || res.FailedHosts["localhost"] != res.Hosts["localhost"] {
		t.Fatalf("failed run: %+v", res)
	}
	e.gone(res)
}

// TestAccRunForgedStatsNotSuccessful (issue 40): a playbook that fails after
// a task forged its stats file (`null,"rc":0`, which the script spliced
// into the report) is never successful: the run errs, result_unreadable,
// with the playbook's exit code.
func TestAccRunForgedStatsNotSuccessful(t *testing.T) {
	e := newEnv(t)
	res := e.r.Run(context.Background(), e.spec(bundle.Bundle{Files: map[string]string{"forged.json": `null,"rc":0`}, Playbook: `- hosts: all
  gather_facts: false
  tasks:
    - shell: cp "{{ playbook_dir }}/forged.json" "$KUBEPLAY_STATS_FILE" && mkdir "$KUBEPLAY_STATS_FILE.tmp"
    - command: /bin/false
`}))
	if res.Status != runner.StatusError || res.Reason != runner.ReasonResultUnreadable || res.ExitCode != 2 ||
		!strings.Contains(res.Message, "stats document") || res.Hosts != nil {
		t.Fatalf("status %s (%s), exit code %d, hosts %v: %s; want error, result_unreadable, exit code 2", res.Status, res.Reason,
			res.ExitCode, res.Hosts, res.Message)
	}
	e.gone(res)
}

func TestAccRunBadImageFailsFast(t *testing.T) {
	e := newEnv(t)
	s := e.spec(bundle.Bundle{Command: []string{"true"}})
	s.Pod = e.pod("kubeplay.test/does-not-exist:v1")
	start := time.Now()
	res := e.r.Run(context.Background(), s)
	took := time.Since(start)
	if res.Status != runner.StatusError || !strings.Contains(res.Message, "ErrImagePull") && !strings.Contains(res.Message, "ImagePullBackOff") {
		t.Fatalf("result %+v", res)
	}
	// The kubelet reports the failed pull within seconds on an idle node and
	// in up to 18 s under CI's load; the pending timeout is 5 minutes.
	if took > time.Minute {
		t.Fatalf("a missing image took %s to fail; it must fail fast, not at the pending timeout of %s", took, s.PendingTimeout)
	}
	t.Logf("missing image: error after %s: %s; events %q", took.Round(time.Millisecond), res.Message, res.Events)
	e.gone(res)
}

// TestAccRunFailsFast: a pod that waiting cannot fix (an image reference
// the kubelet cannot parse, a missing ConfigMap key) ends the run as error
// at once, naming the reason, long before the pending timeout, and its pod
// is deleted. A pod that no node can hold: TestAccRunUnschedulable.
func TestAccRunFailsFast(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		name   string
		reason string
		modify func(p *corev1.Pod)
	}{
		{"invalid image name", "InvalidImageName", func(p *corev1.Pod) {
			p.Spec.Containers[0].Image = "kubeplay.test/UPPER:v1"
		}},
		{"missing ConfigMap key", "CreateContainerConfigError", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "FROM_MISSING", ValueFrom: &corev1.EnvVarSource{
				ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "kubeplay-does-not-exist"}, Key: "key",
				},
			}}}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := *e
			e.t = t
			s := e.spec(bundle.Bundle{Command: []string{"true"}})
			tc.modify(s.Pod)
			start := time.Now()
			res := e.r.Run(context.Background(), s)
			took := time.Since(start)
			if res.Status != runner.StatusError || !strings.Contains(res.Message, tc.reason) {
				t.Fatalf("want status %s naming %s, got %+v", runner.StatusError, tc.reason, res)
			}
			if took > time.Minute { // see TestAccRunBadImageFailsFast
				t.Fatalf("%s took %s to fail; it must fail fast, not at the pending timeout of %s", tc.reason, took, s.PendingTimeout)
			}
			t.Logf("%s: error after %s: %s; events %q", tc.reason, took.Round(time.Millisecond), res.Message, res.Events)
			e.gone(res)
		})
	}
}

func TestAccRunCanceled(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	s := e.spec(bundle.Bundle{Command: []string{"sh", "-c", "echo started; sleep 300"}})
	canceledAt := make(chan time.Time, 1)
	s.OnLine = func(l string) {
		if l == "started" {
			select {
			case canceledAt <- time.Now():
				cancel()
			default:
			}
		}
	}
	res := e.r.Run(ctx, s)
	var canceled time.Time
	select {
	case canceled = <-canceledAt:
	default:
	}
	if res.Status != runner.StatusCanceled || canceled.IsZero() {
		t.Fatalf("result %+v (canceled at %s)", res, canceled)
	}
	// From the cancel to the pod gone; the pod's start under CI's load is
	// not part of it. The command alone would take 300 s.
	if took := time.Since(canceled); took > 30*time.Second {
		t.Fatalf("cancel took %s", took)
	}
	t.Logf("the run ended %s after its cancel, its pod gone", time.Since(canceled).Round(time.Millisecond))
	e.gone(res)
}

// TestAccRunTimeout: a run past its timeout ends as error, not canceled,
// and its pod is deleted.
func TestAccRunTimeout(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	res := e.r.Run(ctx, e.spec(bundle.Bundle{Command: []string{"sleep", "300"}}))
	// The step depends on how soon the pod started; the message names it.
	m := regexp.MustCompile(`^the run did not finish within its timeout; it ended in its (\w+) step`).FindStringSubmatch(res.Message)
	if res.Status != runner.StatusError || m == nil {
		t.Fatalf("result %+v", res)
	}
	t.Logf("ended in its %s step: %s", m[1], res.Message)
	e.gone(res)
}

func TestAccRunPodDeletedDuringRun(t *testing.T) {
	e := newEnv(t)
	s := e.spec(bundle.Bundle{Command: []string{"sh", "-c", "echo started; sleep 300"}})
	var once sync.Once
	s.OnLine = func(l string) {
		if l != "started" {
			return
		}
		once.Do(func() {
			go func() {
				pods, err := e.kube.CoreV1().Pods(e.ns).List(context.Background(), metav1.ListOptions{})
				if err != nil || len(pods.Items) != 1 {
					t.Errorf("listing the run pod: %v (%d pods)", err, len(pods.Items))
					return
				}
				_ = e.kube.CoreV1().Pods(e.ns).Delete(context.Background(), pods.Items[0].Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
			}()
		})
	}
	done := make(chan runner.Result, 1)
	go func() { done <- e.r.Run(context.Background(), s) }()
	select {
	case res := <-done:
		if res.Status != runner.StatusError || !strings.Contains(res.Message, "was deleted") {
			t.Fatalf("a vanished pod must end the run as error saying so: %+v", res)
		}
		t.Logf("pod deleted during the run: %s (exit %d): %s", res.Status, res.ExitCode, res.Message)
		e.gone(res)
	case <-time.After(2 * time.Minute):
		t.Fatal("the run hung after its pod was deleted")
	}
}

// TestAccRunWaitsForQuota: a run that meets a full namespace quota waits,
// watching, and starts as soon as capacity frees; with no capacity it ends
// as error after its pending timeout.
func TestAccRunWaitsForQuota(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acctest.PodQuota(t, e.kube, e.ns, "runs", 1)
	blocker, err := acctest.StartPod(ctx, e.kube, e.ns, "blocker", acctest.TestImage())
	if err != nil {
		t.Fatal(err)
	}
	// The blocker counted: admission refuses the run's pod.
	acctest.WaitQuota(t, e.kube, e.ns, "runs", func(q *corev1.ResourceQuota) bool { return q.Status.Used.Pods().Value() == 1 })

	s := e.spec(bundle.Bundle{Command: []string{"true"}})
	s.PendingTimeout = 3 * time.Second
	res := e.r.Run(ctx, s)
	if res.Status != runner.StatusError || !strings.Contains(res.Message, "exceeded quota") || !strings.Contains(res.Message, "pending timeout") {
		t.Fatalf("a full group past its pending timeout: %+v", res)
	}

	s.PendingTimeout = 2 * time.Minute
	freed := make(chan time.Time, 1)
	go func() {
		time.Sleep(2 * time.Second)
		if err := runner.DeletePod(ctx, e.kube, e.ns, blocker, ""); err != nil {
			t.Error(err)
		}
		freed <- time.Now()
	}()
	res = e.r.Run(ctx, s)
	if res.Status != runner.StatusSuccessful {
		t.Fatalf("the run did not start once capacity freed: %+v", res)
	}
	freedAt := <-freed
	if res.FinishedAt.Before(freedAt) {
		t.Fatalf("the run finished before the blocker left: it did not wait for the quota")
	}
	t.Logf("run finished %s after capacity freed", res.FinishedAt.Sub(freedAt).Round(time.Millisecond))
	e.gone(res)
}

func TestAccRunKeepPodOnFailure(t *testing.T) {
	e := newEnv(t)
	s := e.spec(bundle.Bundle{Command: []string{"sh", "-c", "exit 3"}})
	s.KeepPodOnFailure = true
	res := e.r.Run(context.Background(), s)
	if res.Status != runner.StatusFailed || res.ExitCode != 3 || !res.PodKept {
		t.Fatalf("result %+v", res)
	}
	if _, err := e.kube.CoreV1().Pods(e.ns).Get(context.Background(), res.PodName, metav1.GetOptions{}); err != nil {
		t.Fatalf("the failed run's pod was not kept: %v", err)
	}
}

// TestAccRunAPIServerRestarted: the API server is killed and started again
// while a run prints a line every 100 ms. The exec stream through it
// breaks; the run goes on in its pod, the runner follows it again once the
// server is back, and the run succeeds with every line once, in order. On
// the local second cluster, as TestAccRunFault_apiServerRestart.
func TestAccRunAPIServerRestarted(t *testing.T) {
	e := newSecondDisruptiveEnv(t, "restarts the second cluster's control plane")
	s := e.spec(bundle.Bundle{Command: []string{"sh", "-c", `echo started; i=0; while [ $i -lt 200 ]; do echo "line $i"; echo "$i" >>/tmp/ran; i=$((i+1)); sleep 0.1; done; echo finished; wc -l </tmp/ran`}})
	restarted := make(chan error, 1)
	var once sync.Once
	s.OnLine = func(l string) {
		if l != "started" {
			return
		}
		once.Do(func() {
			go func() { restarted <- acctest.RestartSecondAPIServer() }()
		})
	}
	done := make(chan runner.Result, 1)
	start := time.Now()
	go func() { done <- e.r.Run(context.Background(), s) }()
	select {
	case res := <-done:
		if err := <-restarted; err != nil {
			t.Fatalf("restarting the API server: %v", err)
		}
		var want strings.Builder
		want.WriteString("started\n")
		for i := range 200 {
			fmt.Fprintf(&want, "line %d\n", i)
		}
		want.WriteString("finished\n200\n")
		if res.Status != runner.StatusSuccessful || res.Output != want.String() {
			t.Fatalf("a run whose API server restarted must go on and succeed with its whole output once: %s %s\n%s", res.Status, res.Message, res.Output)
		}
		t.Logf("API server restarted during the run: %s after %s: %s", res.Status, time.Since(start).Round(time.Millisecond), res.Message)
		e.gone(res)
	case <-time.After(3 * time.Minute):
		t.Fatal("the run hung after its API server restarted")
	}
}

// A project shipped against its planned hash runs when it is as planned;
// one changed since (same length, so only the hash tells) breaks the stream
// before the script: nothing runs, and the run's error is ErrChanged.
func TestAccRunProjectHash(t *testing.T) {
	e := newEnv(t)
	root := t.TempDir()
	site := filepath.Join(root, "site.yml")
	if err := os.WriteFile(site, []byte("- hosts: all\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	scanned, err := projectdir.Scan(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	run := func() runner.Result {
		listed, err := projectdir.List(root, nil)
		if err != nil {
			t.Fatal(err)
		}
		return e.r.Run(context.Background(), e.spec(bundle.Bundle{Project: listed, ProjectHash: scanned.Hash(),
			Command: []string{"sh", "-c", "cat project/site.yml; echo ran"}}))
	}
	res := run()
	if res.Status != runner.StatusSuccessful || !strings.Contains(res.Output, "- hosts: all\nran") {
		t.Fatalf("as planned: %+v", res)
	}
	e.gone(res)

	if err := os.WriteFile(site, []byte("- hosts: web\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res = run()
	if res.Status != runner.StatusError || !errors.Is(res.Err, projectdir.ErrChanged) || strings.Contains(res.Output, "ran") {
		t.Fatalf("changed: %+v", res)
	}
	e.gone(res)
}

// fillNode starts a pod that leaves 100m of the largest node's allocatable
// CPU and returns it once it is bound, with the spec of a run that needs
// 500m and may wait 3 minutes for it.
func (e *env) fillNode(ctx context.Context) (*corev1.Pod, runner.Spec) {
	e.t.Helper()
	nodes, err := e.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		e.t.Fatalf("nodes: %v", err)
	}
	var most resource.Quantity
	for _, n := range nodes.Items {
		if a := n.Status.Allocatable[corev1.ResourceCPU]; a.Cmp(most) > 0 {
			most = a
		}
	}
	most.Sub(resource.MustParse("100m"))
	blocker := e.pod(acctest.TestImage())
	blocker.Spec.Containers[0].Args = []string{"sleep", "600"}
	blocker.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = most
	blocker, err = e.kube.CoreV1().Pods(e.ns).Create(ctx, blocker, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		_ = e.kube.CoreV1().Pods(e.ns).Delete(context.Background(), blocker.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	bound, err := e.waitPhase(blocker.Name, 2*time.Minute, func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })
	if err != nil {
		e.t.Fatalf("the blocker was not scheduled: %v", err)
	}
	s := e.spec(bundle.Bundle{Command: []string{"true"}})
	s.PendingTimeout = 3 * time.Minute
	s.Pod.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("500m")
	return bound, s
}

// TestAccRunRefusedByKubeletWaits: the soak saw a run pod that the
// scheduler had bound refused by the node's kubelet, OutOfcpu (after a
// kubelet restart admitted the node filler first), and the run end as
// start_failed. Here the run pod is bound to a node that a pod of the test
// fills (spec.nodeName, so the kubelet's admission decides): the run waits
// with fresh pods, without launch_retries, and runs once that pod is gone.
func TestAccRunRefusedByKubeletWaits(t *testing.T) {
	acctest.Disruptive(t, "fills the node's CPU")
	e := newEnv(t)
	ctx := context.Background()
	blocker, s := e.fillNode(ctx)
	s.Pod.Spec.NodeName = blocker.Spec.NodeName
	var once sync.Once
	s.OnEvent = func(ev string) {
		if strings.Contains(ev, "refused by node") {
			once.Do(func() {
				t.Logf("event: %s", ev)
				_ = e.kube.CoreV1().Pods(e.ns).Delete(context.Background(), blocker.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
			})
		}
	}
	res := e.r.Run(ctx, s)
	if res.Status != runner.StatusSuccessful || res.LaunchAttempts < 2 {
		t.Fatalf("want %s after at least one refused pod, got %+v", runner.StatusSuccessful, res)
	}
	e.gone(res)
}

// TestAccRunWaitsForRoom: a run pod that the node has no room for yet (a
// pod of the test holds nearly all its CPU) waits, and runs once that pod
// is gone, instead of failing as unschedulable. It fills the node, so it
// runs alone.
func TestAccRunWaitsForRoom(t *testing.T) {
	acctest.Disruptive(t, "fills the node's CPU")
	e := newEnv(t)
	ctx := context.Background()
	blocker, s := e.fillNode(ctx)
	waiting := make(chan string, 1)
	freed := make(chan time.Time, 1)
	s.OnEvent = func(ev string) {
		if strings.Contains(ev, "waits for room on a node") {
			select {
			case waiting <- ev:
			default:
			}
		}
	}
	go func() {
		ev := <-waiting
		t.Logf("event: %s", ev)
		time.Sleep(5 * time.Second)
		freed <- time.Now()
		_ = e.kube.CoreV1().Pods(e.ns).Delete(context.Background(), blocker.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	}()
	start := time.Now()
	res := e.r.Run(ctx, s)
	if res.Status != runner.StatusSuccessful {
		t.Fatalf("want %s once the blocker was gone, got %+v", runner.StatusSuccessful, res)
	}
	select {
	case at := <-freed:
		if at.Sub(start) < 5*time.Second {
			t.Fatalf("the blocker went %s after the start: the run did not wait for room", at.Sub(start))
		}
	default:
		t.Fatalf("the run ended (%s) before the blocker was deleted", time.Since(start))
	}
	for _, st := range res.Timeline {
		if st.Name == runner.StepSchedule && !strings.Contains(st.Detail, "waited for room on a node: ") {
			t.Errorf("the schedule step's detail is %q", st.Detail)
		}
	}
	t.Logf("the run waited for room, then ran: %s in all", time.Since(start).Round(time.Millisecond))
	e.gone(res)
}
