// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
)

// sliceBench is a working directory with a group of 4 runs at a time, run
// pods small enough that 4 fit this 2-core node, and one run.
type sliceBench struct {
	b                       *testing.B
	e                       *testEnv
	ns, dir                 string
	terraformBin, cliConfig string
}

func newSliceBench(b *testing.B) *sliceBench {
	e := benchTestEnv(b)
	s := &sliceBench{b: b, e: e, ns: acctest.Namespace(b, e.kube, "kp-slicebench"), dir: b.TempDir()}
	var err error
	if s.terraformBin, s.cliConfig, err = providerCLI(b); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := terraformCLI(s.terraformBin, s.cliConfig, s.dir, "destroy", "-auto-approve", "-input=false", "-no-color"); err != nil {
			b.Error(err)
		}
	})
	return s
}

// apply applies a run of playbook over inventory in slices, with trigger,
// and returns how long the apply took and the provider's peak RSS.
func (s *sliceBench) apply(inventory, playbook string, slices int, trigger string) (time.Duration, int64) {
	cfg := cliHeader(s.e.kubeconfig, s.e.catalog) + fmt.Sprintf(`resource "kubeplay_container_group" "g" {
  name                = "slicebench"
  namespace           = %q
  image               = %q
  max_concurrent_runs = 4
  pod_pending_timeout = "10m"
  pod_spec_override   = yamlencode({ spec = { containers = [{ name = "worker", resources = { requests = { cpu = "10m", memory = "16Mi" } } }] } })
}

resource "kubeplay_run" "r" {
  container_group = kubeplay_container_group.g.name
  slices          = %d
  forks           = 5
  inventory       = %q
  playbook        = %q
  triggers        = { t = %q }
  timeouts {
    create = "40m"
  }
}
`, s.ns, acctest.TestImage(), slices, inventory, playbook, trigger)
	if err := os.WriteFile(filepath.Join(s.dir, "main.tf"), []byte(cfg), 0o600); err != nil {
		s.b.Fatal(err)
	}
	// The group first, so that the timed apply is the run's alone.
	if err := terraformCLI(s.terraformBin, s.cliConfig, s.dir, "apply", "-auto-approve", "-input=false", "-no-color",
		"-target=kubeplay_container_group.g"); err != nil {
		s.b.Fatal(err)
	}
	cmd := terraformCommand(s.terraformBin, s.cliConfig, s.dir, nil, "apply", "-auto-approve", "-input=false", "-no-color")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		s.b.Fatal(err)
	}
	var (
		peak int64
		wg   sync.WaitGroup
		done = make(chan struct{})
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if rss := providerRSS(cmd.Process.Pid); rss > peak {
				peak = rss
			}
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	err := cmd.Wait()
	took := time.Since(start)
	close(done)
	wg.Wait()
	if err != nil {
		s.b.Fatalf("terraform apply: %v\n%s", err, out.String())
	}
	s.logTimelines()
	return took, peak
}

// logTimelines logs where each slice's time went, from the state.
func (s *sliceBench) logTimelines() {
	show := terraformCommand(s.terraformBin, s.cliConfig, s.dir, nil, "show", "-json")
	raw, err := show.Output()
	if err != nil {
		s.b.Fatalf("terraform show: %v", err)
	}
	var st struct {
		Values struct {
			RootModule struct {
				Resources []struct {
					Type   string         `json:"type"`
					Values map[string]any `json:"values"`
				} `json:"resources"`
			} `json:"root_module"`
		} `json:"values"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		s.b.Fatal(err)
	}
	for _, r := range st.Values.RootModule.Resources {
		if r.Type != "kubeplay_run" {
			continue
		}
		line := func(tl any) string {
			var b strings.Builder
			steps, _ := tl.([]any)
			for _, x := range steps {
				m, _ := x.(map[string]any)
				fmt.Fprintf(&b, "%v %.1fs, ", m["step"], m["seconds"])
			}
			return strings.TrimSuffix(b.String(), ", ")
		}
		slices, _ := r.Values["slice_results"].([]any)
		if len(slices) == 0 {
			s.b.Logf("run: %s", line(r.Values["timeline"]))
		}
		for _, x := range slices {
			m, _ := x.(map[string]any)
			s.b.Logf("slice %v (%v hosts): %s", m["slice"], m["host_count"], line(m["timeline"]))
		}
	}
}

// providerRSS is the peak resident set (VmHWM, in bytes) of the provider
// process that terraformPID started; 0 when there is none.
func providerRSS(terraformPID int) int64 {
	pid := findProviderPID(terraformPID)
	if pid == 0 {
		return 0
	}
	status, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	for _, l := range strings.Split(string(status), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// rangeInventory is n hosts host-00000... on the pod itself, as a range,
// so that the configuration does not grow with them.
func rangeInventory(n int) string {
	return fmt.Sprintf("[all]\nhost-[00000:%05d].example.com\n[all:vars]\nansible_connection=local\n"+
		"ansible_python_interpreter=/usr/bin/python3\n", n-1)
}

// BenchmarkSlicesLatencyBound: 200 hosts whose one task waits 0.5 s on each
// (raw: sleep 0.5, no module to start), forks = 5: the run in 4 slices
// against the same run unsliced, each a cold apply of its own.
//
//	TF_ACC=1 go test ./internal/provider -run '^$' -bench SlicesLatencyBound -benchtime 1x -timeout 30m
func BenchmarkSlicesLatencyBound(b *testing.B) {
	s := newSliceBench(b)
	const play = "- hosts: all\n  gather_facts: false\n  tasks:\n    - raw: sleep 0.5\n"
	n := 0
	for b.Loop() {
		n++
		one, _ := s.apply(rangeInventory(200), play, 1, fmt.Sprint("one-", n))
		four, _ := s.apply(rangeInventory(200), play, 4, fmt.Sprint("four-", n))
		b.ReportMetric(one.Seconds(), "s/unsliced")
		b.ReportMetric(four.Seconds(), "s/4-slices")
		b.ReportMetric(one.Seconds()/four.Seconds(), "speedup")
	}
}

// BenchmarkSlicesOverhead: what a slice costs, as 4 slices of an empty
// play over 8 hosts against one run of it: the difference per extra slice.
//
//	TF_ACC=1 go test ./internal/provider -run '^$' -bench SlicesOverhead -benchtime 3x -timeout 30m
func BenchmarkSlicesOverhead(b *testing.B) {
	s := newSliceBench(b)
	const play = "- hosts: all\n  gather_facts: false\n  tasks: []\n"
	var one, four time.Duration
	n := 0
	for b.Loop() {
		n++
		d1, _ := s.apply(rangeInventory(8), play, 1, fmt.Sprint("one-", n))
		d4, _ := s.apply(rangeInventory(8), play, 4, fmt.Sprint("four-", n))
		one, four = one+d1, four+d4
	}
	b.ReportMetric(one.Seconds()/float64(n), "s/unsliced")
	b.ReportMetric(four.Seconds()/float64(n), "s/4-slices")
	b.ReportMetric((four-one).Seconds()/float64(n)/3, "s/extra-slice")
}

// BenchmarkSlices5000: one debug task on 5,000 hosts in 4 slices: the
// apply's wall time, the provider's peak RSS and the state file's size.
// KUBEPLAY_BENCH_HOSTS sets another host count.
//
//	TF_ACC=1 go test ./internal/provider -run '^$' -bench Slices5000 -benchtime 1x -timeout 60m
func BenchmarkSlices5000(b *testing.B) {
	s := newSliceBench(b)
	hosts := 5000
	if v := os.Getenv("KUBEPLAY_BENCH_HOSTS"); v != "" {
		hosts, _ = strconv.Atoi(v)
	}
	const play = "- hosts: all\n  gather_facts: false\n  tasks:\n    - debug: {msg: hi}\n"
	n := 0
	for b.Loop() {
		n++
		took, rss := s.apply(rangeInventory(hosts), play, 4, fmt.Sprint(n))
		st, err := os.Stat(filepath.Join(s.dir, "terraform.tfstate"))
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(took.Seconds(), "s/apply")
		b.ReportMetric(float64(rss)/(1<<20), "MiB-provider-peak-rss")
		b.ReportMetric(float64(st.Size())/1024, "KB-state")
		if st.Size() > 100<<10 {
			b.Errorf("the state file is %d bytes, over 100 KB", st.Size())
		}
	}
}
