// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package capacity

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/waitfor"
)

func TestQuota(t *testing.T) {
	runs, ram := int64(3), int64(2048)
	q, err := Quota("g", "runs", Limits{MaxConcurrentRuns: &runs, MaxCores: "1500m", MaxRAM: &ram,
		MaxResources: map[string]string{"requests.nvidia.com/gpu": "2", "count/configmaps": "5"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[corev1.ResourceName]string{"pods": "3", "requests.cpu": "1500m", "requests.memory": "2Gi",
		"requests.nvidia.com/gpu": "2", "count/configmaps": "5"}
	if len(q.Spec.Hard) != len(want) {
		t.Errorf("hard = %v", q.Spec.Hard)
	}
	for k, v := range want {
		if got := q.Spec.Hard[k]; got.String() != v {
			t.Errorf("hard[%s] = %s, want %s", k, got.String(), v)
		}
	}
	if q.Name != "kubeplay-g" || q.Namespace != "runs" || q.Labels[managed.LabelContainerGroup] != "g" {
		t.Errorf("meta = %+v", q.ObjectMeta)
	}
	if _, err := Quota("g", "runs", Limits{MaxCores: "lots"}); err == nil {
		t.Error("a malformed max_cores was accepted")
	}
	if !(Limits{}).Empty() || (Limits{MaxRAM: &ram}).Empty() {
		t.Error("Empty is wrong")
	}
}

func accConfig(t *testing.T) *rest.Config {
	t.Helper()
	cfg, _ := acctest.Clients(t)
	acctest.Parallel(t)
	return cfg
}

// ownClient returns a client with its own connections: a custom dialer keeps
// client-go from sharing the transport, as separate processes would not.
func ownClient(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	c := rest.CopyConfig(cfg)
	c.Dial = (&net.Dialer{}).DialContext
	kube, err := kubernetes.NewForConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	return kube
}

func testNamespace(t *testing.T, kube kubernetes.Interface) string {
	t.Helper()
	name := fmt.Sprintf("kp-forks-%06x", rand.IntN(1<<24))
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := waitfor.Delete(context.Background(), kube.CoreV1().Namespaces(), name, metav1.DeleteOptions{}, &corev1.Namespace{}); err != nil {
			t.Errorf("deleting namespace %s: %v", name, err)
		}
	})
	return name
}

// TestLedgerContentionAcc: workers with their own clients, as separate
// processes would have, acquire random forks against max_forks = 10 at once;
// the forks held at any moment, counted between each grant and its release,
// never exceed 10.
func TestLedgerContentionAcc(t *testing.T) {
	cfg := accConfig(t)
	c := contend(t, cfg, func() int64 { return 1 + rand.Int64N(6) }, func() kubernetes.Interface { return ownClient(t, cfg) })
	t.Logf("%d grants by %d workers with their own clients in %s: peak %d of max_forks %d, %d grants waited, %d lost writes (409) retried",
		c.grants, c.workers, c.took, c.peak, c.maxForks, c.waits, c.conflicts)
}

// TestLedgerSharedClientAcc: the runs of one process share a client, and
// those asking for as many forks (2 here) take turns at the ledger, so freed
// forks are not fought over by every waiting run. The same contention with
// a client per worker (no turns), run right after under the same load, is
// the baseline: alone, each grant lost about two writes without the turns
// (107 over 48) and fewer than one with them (4-27); under the parallel
// suite's load both rise, so the test compares the two, not a fixed count.
func TestLedgerSharedClientAcc(t *testing.T) {
	cfg := accConfig(t)
	// The provider's client limits: the test's own would throttle 8 workers.
	pc := rest.CopyConfig(cfg)
	kubeclient.Tune(pc, "")
	shared := ownClient(t, pc)
	c := contend(t, cfg, func() int64 { return 2 }, func() kubernetes.Interface { return shared })
	t.Logf("%d grants by %d workers sharing a client in %s: peak %d of max_forks %d, %d grants waited, %d lost writes (409) retried",
		c.grants, c.workers, c.took, c.peak, c.maxForks, c.waits, c.conflicts)
	base := contend(t, cfg, func() int64 { return 2 }, func() kubernetes.Interface { return ownClient(t, pc) })
	t.Logf("baseline, a client per worker: %d grants in %s, %d lost writes (409) retried", base.grants, base.took, base.conflicts)
	// Only releases, which do not take turns, can still win over a claim.
	if c.conflicts*base.grants >= base.conflicts*c.grants {
		t.Errorf("%d lost writes for %d grants sharing a client, %d for %d without turns: runs sharing a client fight over the ledger",
			c.conflicts, c.grants, base.conflicts, base.grants)
	}
}

type contention struct {
	workers, maxForks              int64
	grants, waits, conflicts, peak int64
	took                           time.Duration
}

// contend has 8 workers, each with the client client() gives, acquire
// size() forks and release them, 6 times each, against max_forks = 10, and
// checks the peak, that they contended, and that no claim is left.
func contend(t *testing.T, cfg *rest.Config, size func() int64, client func() kubernetes.Interface) contention {
	t.Helper()
	admin := ownClient(t, cfg)
	ns := testNamespace(t, admin)
	const maxForks, workers, rounds = 10, 8, 6
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := (Ledger{Kube: admin, Namespace: ns, Group: "g"}).Ensure(ctx, maxForks); err != nil {
		t.Fatal(err)
	}
	var held, peak, waits, conflicts, grants atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		led := Ledger{Kube: client(), Namespace: ns, Group: "g"}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				run := fmt.Sprintf("run-%d-%d", w, r)
				forks := size()
				g, err := led.Acquire(ctx, run, forks, time.Minute)
				if err != nil {
					errs <- err
					return
				}
				now := held.Add(forks)
				for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
				}
				grants.Add(1)
				conflicts.Add(int64(g.Conflicts))
				if g.Waited {
					waits.Add(1)
				}
				// The run's work: it holds its forks until the ledger is about full,
				// or a second passed, so that the others contend however slow the
				// API server is (under load, turns make the grants one by one).
				time.Sleep(time.Duration(10+rand.IntN(40)) * time.Millisecond)
				for until := time.Now().Add(time.Second); held.Load() < maxForks-1 && time.Now().Before(until); {
					time.Sleep(5 * time.Millisecond)
				}
				held.Add(-forks)
				if err := led.Release(ctx, run); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	c := contention{workers: workers, maxForks: maxForks, grants: grants.Load(), waits: waits.Load(),
		conflicts: conflicts.Load(), peak: peak.Load(), took: time.Since(start).Round(time.Millisecond)}
	if c.grants != workers*rounds {
		t.Errorf("grants = %d, want %d", c.grants, workers*rounds)
	}
	if c.peak > maxForks {
		t.Errorf("peak forks held = %d > max_forks %d", c.peak, maxForks)
	}
	if c.waits == 0 {
		t.Error("no acquisition ever waited: the test did not contend")
	}
	cm, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, LedgerName("g"), metav1.GetOptions{})
	if err != nil || len(cm.Data) != 0 {
		t.Errorf("claims left after every release: %v, %v", cm.Data, err)
	}
	return c
}

// TestLedgerReapAndWakeAcc: a claim whose run died is reaped at its
// deadline; a waiting run wakes on a release (through the watch, well before
// any deadline); a run asking for more than max_forks fails at once.
func TestLedgerReapAndWakeAcc(t *testing.T) {
	cfg := accConfig(t)
	kube := ownClient(t, cfg)
	ns := testNamespace(t, kube)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	led := Ledger{Kube: kube, Namespace: ns, Group: "g"}
	if _, err := led.Acquire(ctx, "a", 1, time.Minute); err == nil {
		t.Fatal("acquired from a group without a ledger")
	}
	if err := led.Ensure(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := led.Acquire(ctx, "greedy", 3, time.Minute); err == nil {
		t.Fatal("acquired 3 forks of max_forks 2")
	}

	// "dead" never releases; its claim expires after 2s.
	if _, err := led.Acquire(ctx, "dead", 2, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	g, err := led.Acquire(ctx, "live", 1, time.Minute)
	waited := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if !g.Waited || !slices.Contains(g.Reaped, "dead") || waited < time.Second {
		t.Errorf("grant %+v after %s: want a wait until the dead claim was reaped", g, waited)
	}
	t.Logf("expired claim reaped, waiter granted after %s", waited.Round(time.Millisecond))

	if _, err := led.Acquire(ctx, "b", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	other := Ledger{Kube: ownClient(t, cfg), Namespace: ns, Group: "g"}
	done := make(chan time.Duration, 1)
	go func() {
		s := time.Now()
		if _, err := other.Acquire(ctx, "c", 1, time.Minute); err != nil {
			t.Error(err)
		}
		done <- time.Since(s)
	}()
	select {
	case <-done:
		t.Fatal("c was granted while the group was full")
	case <-time.After(time.Second):
	}
	released := time.Now()
	if err := led.Release(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	<-done
	wake := time.Since(released)
	t.Logf("waiter woke %s after the release", wake.Round(time.Millisecond))
	if wake > 10*time.Second {
		t.Errorf("waiter woke %s after the release, want it woken by the watch", wake)
	}
	cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, LedgerName("g"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, held := cm.Data["b"]; held {
		t.Error("the released claim of b is still in the ledger")
	}
	if _, held := cm.Data["c"]; !held {
		t.Error("the granted claim of c is not in the ledger")
	}
}

// TestNamespaceUsersAcc: pods of other workloads and foreign quotas are
// reported; the group's own runs and quota are not.
func TestNamespaceUsersAcc(t *testing.T) {
	kube := ownClient(t, accConfig(t))
	ns := testNamespace(t, kube)
	ctx := context.Background()
	users, err := NamespaceUsers(ctx, kube, ns, "g")
	if err != nil || len(users) != 0 {
		t.Fatalf("empty namespace: %v, %v", users, err)
	}
	pod := func(name string, labels map[string]string) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{Name: "c", Image: acctest.TestImage(), ImagePullPolicy: corev1.PullIfNotPresent,
				Resources: acctest.HelperResources()}},
		}}
		if _, err := kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod("run-1", map[string]string{managed.LabelContainerGroup: "g"})
	runs := int64(5)
	if err := ApplyQuota(ctx, kube, "g", ns, Limits{MaxConcurrentRuns: &runs}, managed.Owner{}, false); err != nil {
		t.Fatal(err)
	}
	if users, err := NamespaceUsers(ctx, kube, ns, "g"); err != nil || len(users) != 0 {
		t.Fatalf("only the group's own objects: %v, %v", users, err)
	}
	pod("web", nil)
	if err := ApplyQuota(ctx, kube, "other", ns, Limits{MaxConcurrentRuns: &runs}, managed.Owner{}, false); err != nil {
		t.Fatal(err)
	}
	users, err = NamespaceUsers(ctx, kube, ns, "g")
	if err != nil || len(users) != 2 || !strings.Contains(users[0], "1 pods that are not this group's runs (web)") ||
		users[1] != `ResourceQuota "kubeplay-other"` {
		t.Fatalf("users = %q, %v", users, err)
	}
	if err := DeleteQuota(ctx, kube, "other", ns, managed.Owner{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ResourceQuotas(ns).Get(ctx, QuotaName("other"), metav1.GetOptions{}); err == nil {
		t.Error("DeleteQuota returned before the quota was gone")
	}
}

// envLedgerWorker makes the test binary a ledger worker process.
const envLedgerWorker = "KUBEPLAY_LEDGER_WORKER"

type hold struct {
	From, To time.Time
	Forks    int64
}

// TestLedgerProcessesAcc: separate OS processes (this test binary, started
// again as workers) share max_forks = 6 through the ledger. Each records when
// it held how many forks; replaying all records, the forks held at once
// never exceed 6.
func TestLedgerProcessesAcc(t *testing.T) {
	if spec := os.Getenv(envLedgerWorker); spec != "" {
		ledgerWorker(t, spec)
		return
	}
	cfg := accConfig(t)
	kube := ownClient(t, cfg)
	ns := testNamespace(t, kube)
	const maxForks, procs, rounds = 6, 3, 8
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := (Ledger{Kube: kube, Namespace: ns, Group: "g"}).Ensure(ctx, maxForks); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var cmds []*exec.Cmd
	for p := range procs {
		out := filepath.Join(dir, fmt.Sprintf("worker-%d.json", p))
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestLedgerProcessesAcc$", "-test.count=1")
		cmd.Env = append(os.Environ(), acctest.EnvKubeconfig+"="+acctest.Kubeconfig(t),
			fmt.Sprintf("%s=%s,%d,%d,%s", envLedgerWorker, ns, p, rounds, out))
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("worker process: %v", err)
		}
	}
	type edge struct {
		at    time.Time
		delta int64
	}
	var edges []edge
	for p := range procs {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("worker-%d.json", p)))
		if err != nil {
			t.Fatal(err)
		}
		var holds []hold
		if err := json.Unmarshal(b, &holds); err != nil {
			t.Fatal(err)
		}
		if len(holds) != rounds {
			t.Fatalf("worker %d recorded %d holds, want %d", p, len(holds), rounds)
		}
		for _, h := range holds {
			edges = append(edges, edge{h.From, h.Forks}, edge{h.To, -h.Forks})
		}
	}
	// Releases sort before grants at the same instant.
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return int(a.delta - b.delta)
	})
	var now, peak int64
	for _, e := range edges {
		now += e.delta
		peak = max(peak, now)
	}
	t.Logf("%d processes, %d holds: peak %d forks held at once of max_forks %d", procs, procs*rounds, peak, maxForks)
	if peak > maxForks {
		t.Errorf("peak forks held at once = %d > max_forks %d", peak, maxForks)
	}
}

// ledgerWorker acquires and releases forks and writes what it held.
func ledgerWorker(t *testing.T, spec string) {
	var ns, out string
	parts := strings.Split(spec, ",")
	if len(parts) != 4 {
		t.Fatalf("bad %s %q", envLedgerWorker, spec)
	}
	ns, out = parts[0], parts[3]
	id, err1 := strconv.Atoi(parts[1])
	rounds, err2 := strconv.Atoi(parts[2])
	if err1 != nil || err2 != nil {
		t.Fatalf("bad %s %q", envLedgerWorker, spec)
	}
	led := Ledger{Kube: ownClient(t, acctest.RESTConfig(t)), Namespace: ns, Group: "g"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var holds []hold
	for r := range rounds {
		run := fmt.Sprintf("proc-%d-%d", id, r)
		forks := 1 + rand.Int64N(4)
		if _, err := led.Acquire(ctx, run, forks, time.Minute); err != nil {
			t.Fatal(err)
		}
		h := hold{From: time.Now(), Forks: forks}
		time.Sleep(time.Duration(20+rand.IntN(60)) * time.Millisecond) // the run's work
		h.To = time.Now()
		if err := led.Release(ctx, run); err != nil {
			t.Fatal(err)
		}
		holds = append(holds, h)
	}
	b, err := json.Marshal(holds)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
