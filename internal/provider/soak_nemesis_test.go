// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

// soakNemesis injects the faults.
type soakNemesis struct {
	t       *testing.T
	e       *testEnv
	log     *soakLog
	proxy   *cutProxy
	wss     []*soakWorkspace
	rng     *rand.Rand   // the sequence and the pauses: the seed replays them
	target  *rand.Rand   // which pod or workspace: depends on timing too
	runPods *soakRunPods // the cold and warm groups' run pods, which pod_delete deletes
	fillNS  string
	// The second cluster's: see TestAccSoak.
	restartAPIServer, restartKubelet func() error
}

// plan is count faults, every kind count/6 times or more, in an order the
// seed decides.
func (n *soakNemesis) plan(count int) []soakFaultKind {
	kinds := make([]soakFaultKind, count)
	for i := range kinds {
		kinds[i] = soakFaultKinds[i%len(soakFaultKinds)]
	}
	n.rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	return kinds
}

// run injects kinds in order, each after a pause of lo to hi.
func (n *soakNemesis) run(kinds []soakFaultKind, lo, hi time.Duration) {
	for _, k := range kinds {
		time.Sleep(soakPause(n.rng, lo, hi))
		hold := time.Duration(5000+n.rng.IntN(10000)) * time.Millisecond
		n.inject(k, hold)
	}
}

// soakPause draws a pause of lo to hi in milliseconds, as the pause was drawn
// before it could be set, so that a seed of the 3s-8s default replays the
// sequence it always did.
func soakPause(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	if ms := int((hi - lo) / time.Millisecond); ms > 0 {
		return lo + time.Duration(rng.IntN(ms))*time.Millisecond
	}
	return lo
}

func (n *soakNemesis) inject(k soakFaultKind, hold time.Duration) {
	t := n.t
	switch k {
	case soakAPIServer:
		at := time.Now()
		n.log.add(soakFault{Kind: k, Detail: "cluster2.sh restart kube-apiserver"})
		if err := n.restartAPIServer(); err != nil {
			t.Errorf("SOAK: %v", err)
		}
		t.Logf("SOAK the API server was ready again %.1f s after the kill began", time.Since(at).Seconds())
	case soakKubelet:
		at := time.Now()
		n.log.add(soakFault{Kind: k, Detail: "cluster2.sh kubelet stop; start"})
		if err := n.restartKubelet(); err != nil {
			t.Errorf("SOAK: %v", err)
		}
		t.Logf("SOAK the kubelet was stopped and Ready again in %.1f s", time.Since(at).Seconds())
	case soakCut:
		// Cut when something streams: a cut of nothing tests nothing.
		var cut int
		for deadline := time.Now().Add(time.Minute); cut == 0 && time.Now().Before(deadline); {
			if cut = n.proxy.cut(); cut == 0 {
				time.Sleep(500 * time.Millisecond)
			}
		}
		n.log.add(soakFault{Kind: k, Detail: fmt.Sprintf("cut %d connections", cut)})
	case soakPodDelete:
		n.deletePod()
	case soakSIGKILL:
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
			ws := n.wss[n.target.IntN(len(n.wss))]
			if detail, ok := ws.kill(3 * time.Second); ok {
				n.log.add(soakFault{Kind: k, Detail: detail})
				return
			}
		}
		t.Errorf("SOAK: no apply to kill within 2 minutes")
	case soakNodeFull:
		n.fillNode(hold)
	}
}

// deletePod deletes a running run pod of the cold or warm group, waiting
// up to soakVictimWait for one. The workspaces go on applying rounds
// meanwhile, but a cold, warm or project run's pod runs for seconds of a
// round that waits for its slowest run (a quota or SSH one): twice in nine
// soaks none ran for 2 minutes. A wait that gives up says what ran.
func (n *soakNemesis) deletePod() {
	ctx := context.Background()
	tell, give := time.NewTimer(time.Minute), time.NewTimer(soakVictimWait)
	defer tell.Stop()
	defer give.Stop()
	for {
		if running := n.runPods.running(); len(running) > 0 {
			p := running[n.target.IntN(len(running))]
			n.log.add(soakFault{Kind: soakPodDelete, Pod: p.Name, Detail: fmt.Sprintf("pod %s/%s (run %s)", p.Namespace, p.Name, p.Labels[managed.LabelRun])})
			err := n.e.kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
			if err != nil {
				n.t.Logf("SOAK deleting pod %s: %v", p.Name, err)
			}
			return
		}
		select {
		case <-n.runPods.changed:
		case <-tell.C:
			n.t.Logf("SOAK pod_delete has waited a minute for a running run pod; the workspaces' applies:\n%s", n.doing(ctx))
		case <-give.C:
			n.t.Errorf("SOAK: no running run pod to delete within %s; the workspaces' applies:\n%s", soakVictimWait, n.doing(ctx))
			return
		}
	}
}

// soakRunPods follows the run pods of some namespaces through informers
// (a watch each, which re-lists after an API server restart), so that
// pod_delete waits for a running one without listing them again and again.
type soakRunPods struct {
	stores  []cache.Store
	changed chan struct{} // a pod was added, changed or deleted since the last receive
}

// watchRunPods starts following the run pods of namespaces until ctx ends.
func watchRunPods(ctx context.Context, t *testing.T, kube kubernetes.Interface, namespaces []string) *soakRunPods {
	w := &soakRunPods{changed: make(chan struct{}, 1)}
	notify := func() {
		select {
		case w.changed <- struct{}{}:
		default:
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify() },
		UpdateFunc: func(any, any) { notify() },
		DeleteFunc: func(any) { notify() },
	}
	for _, ns := range namespaces {
		f := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(ns),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = managed.LabelRun }))
		inf := f.Core().V1().Pods().Informer()
		if _, err := inf.AddEventHandler(handler); err != nil {
			t.Fatal(err)
		}
		f.Start(ctx.Done())
		w.stores = append(w.stores, inf.GetStore())
	}
	return w
}

// running returns the run pods that run and are not being deleted.
func (w *soakRunPods) running() []*corev1.Pod {
	var pods []*corev1.Pod
	for _, s := range w.stores {
		for _, o := range s.List() {
			if p, ok := o.(*corev1.Pod); ok && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				pods = append(pods, p)
			}
		}
	}
	// Store order is a map's: sorted, so that the seeded pick depends on the pods alone.
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name) })
	return pods
}

// soakVictimWait bounds deletePod's wait for a running run pod.
const soakVictimWait = 5 * time.Minute

// doing describes each workspace's apply in progress and the run pods of
// the soak's namespaces, for a fault that found nothing to act on.
func (n *soakNemesis) doing(ctx context.Context) string {
	var b strings.Builder
	for _, ws := range n.wss {
		ws.mu.Lock()
		var runs []string
		for _, r := range ws.current {
			runs = append(runs, r.key+" ("+r.kind+")")
		}
		if ws.cmd != nil {
			fmt.Fprintf(&b, "  workspace %d: applying %s for %.0f s\n", ws.i, strings.Join(runs, ", "), time.Since(ws.started).Seconds())
		} else {
			fmt.Fprintf(&b, "  workspace %d: between applies\n", ws.i)
		}
		ws.mu.Unlock()
	}
	for _, g := range n.wss[0].setup.groups {
		pods, err := n.e.kube.CoreV1().Pods(g.ns).List(ctx, metav1.ListOptions{LabelSelector: managed.LabelRun})
		if err != nil {
			fmt.Fprintf(&b, "  namespace %s: %v\n", g.ns, err)
			continue
		}
		for _, p := range pods.Items {
			fmt.Fprintf(&b, "  pod %s/%s: %s\n", p.Namespace, p.Name, p.Status.Phase)
		}
	}
	return b.String()
}

// fillNode starts a pod requesting the node's free CPU but 20m (less than
// a run pod's 50m) and deletes it after hold.
func (n *soakNemesis) fillNode(hold time.Duration) {
	ctx := context.Background()
	kube := n.e.kube
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) != 1 {
		n.t.Errorf("SOAK node_full: want the one node of the local cluster: %v", err)
		return
	}
	node := nodes.Items[0]
	free := node.Status.Allocatable.Cpu().DeepCopy()
	pods, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node.Name})
	if err != nil {
		n.t.Errorf("SOAK node_full: %v", err)
		return
	}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, c := range p.Spec.Containers {
			free.Sub(*c.Resources.Requests.Cpu())
		}
	}
	free.Sub(k8sresource.MustParse("20m"))
	if free.Sign() <= 0 {
		n.log.add(soakFault{Kind: soakNodeFull, Detail: fmt.Sprintf("the node was full already (%s free): held %.0f s", free.String(), hold.Seconds())})
		time.Sleep(hold)
		return
	}
	blocker := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "soak-blocker-"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: ptr.To[int64](0),
			AutomountServiceAccountToken: ptr.To(false), NodeName: node.Name,
			Containers: []corev1.Container{{Name: "blocker", Image: acctest.TestImage(), ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"sleep", "600"}, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: free}}}},
		},
	}
	created, err := kube.CoreV1().Pods(n.fillNS).Create(ctx, blocker, metav1.CreateOptions{})
	if err != nil {
		n.t.Errorf("SOAK node_full: %v", err)
		return
	}
	n.log.add(soakFault{Kind: soakNodeFull, Detail: fmt.Sprintf("pod %s requests %s of CPU for %.0f s", created.Name, free.String(), hold.Seconds())})
	time.Sleep(hold)
	if err := kube.CoreV1().Pods(n.fillNS).Delete(ctx, created.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		n.t.Errorf("SOAK node_full: deleting %s: %v", created.Name, err)
	}
}

// soakRSS is a provider process' memory, in bytes.
type soakRSS struct{ hwm, rss int64 }

// soakMemory samples the VmHWM and VmRSS of the workspaces' providers.
type soakMemory struct {
	mu   sync.Mutex
	peak map[int]soakRSS // by pid
}

func (m *soakMemory) sample(ctx context.Context, wss []*soakWorkspace) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for _, ws := range wss {
				ws.mu.Lock()
				cmd := ws.cmd
				ws.mu.Unlock()
				if cmd == nil {
					continue
				}
				pid := findProviderPID(cmd.Process.Pid)
				if pid == 0 {
					continue
				}
				if r, ok := procRSS(pid); ok {
					m.mu.Lock()
					p := m.peak[pid]
					m.peak[pid] = soakRSS{hwm: max(p.hwm, r.hwm), rss: max(p.rss, r.rss)}
					m.mu.Unlock()
				}
			}
		}
	}()
	return done
}

// procRSS reads VmHWM and VmRSS from /proc/pid/status.
func procRSS(pid int) (soakRSS, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return soakRSS{}, false
	}
	var r soakRSS
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmHWM:":
			r.hwm = kb << 10
		case "VmRSS:":
			r.rss = kb << 10
		}
	}
	return r, r.hwm > 0
}

// check fails when a provider's VmHWM passed bound, or none was sampled;
// it returns the largest.
func (m *soakMemory) check(t *testing.T, bound int64) soakRSS {
	m.mu.Lock()
	defer m.mu.Unlock()
	var peak soakRSS
	for _, r := range m.peak {
		peak = soakRSS{hwm: max(peak.hwm, r.hwm), rss: max(peak.rss, r.rss)}
	}
	if len(m.peak) == 0 {
		t.Error("SOAK: no provider process was sampled: the memory check saw nothing")
	}
	if peak.hwm > bound {
		t.Errorf("SOAK: a provider's VmHWM reached %d MiB, over the bound of %d MiB", peak.hwm>>20, bound>>20)
	}
	return peak
}
