// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package main

import (
	"context"
	"flag"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/clusterctl"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/parentwatch"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/provider"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runengine"
)

// orphanGrace bounds how long a provider whose Terraform died waits for
// its runs' clean-up (their pods' deletion and claims' release) to end.
const orphanGrace = 3 * time.Minute

// version is set by goreleaser (or -ldflags "-X main.version=...") at build time.
var version = "dev"

//go:generate go run github.com/hashicorp/terraform-plugin-docs/cmd/tfplugindocs generate -provider-name kubeplay

func main() {
	var debug bool
	flag.BoolVar(&debug, "debug", false, "set to true to run the provider with support for debuggers like delve")
	flag.Parse()

	if !debug {
		go exitWithParent()
		if logsDiscarded(os.Environ()) {
			quietLogs()
		}
	}
	opts := providerserver.ServeOpts{
		Address: "registry.terraform.io/kubeplay/kubeplay",
		Debug:   debug,
	}
	err := providerserver.Serve(context.Background(), provider.New(version), opts)
	// Terraform has stopped the provider, and kills it 2 s later: warm pod
	// refills still in flight get most of that to end cleanly.
	runengine.StopBackground(stopGrace)
	if err != nil {
		log.Fatal(err.Error())
	}
}

// stopGrace bounds the wait for background work once Terraform has asked
// the provider to stop (go-plugin kills it after 2 s).
const stopGrace = 1500 * time.Millisecond

// logsDiscarded reports an environment in which Terraform drops whatever
// the provider logs: Terraform logs a provider only when TF_LOG or
// TF_LOG_PROVIDER is set, and the provider inherits its environment.
func logsDiscarded(environ []string) bool {
	for _, kv := range environ {
		if name, value, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "TF_LOG") && value != "" {
			return false
		}
	}
	return true
}

// quietLogs turns off the SDK's and the provider's loggers, whose levels
// terraform-plugin-go reads from these variables of the provider's own
// environment. Left at their default (TRACE), they format every log line
// as JSON for Terraform to parse and drop: 2 to 3% of the machine's CPU in
// an apply of 100 runs on 2 cores (BenchmarkRun100Warm).
func quietLogs() {
	for _, name := range []string{"TF_LOG_SDK", "TF_LOG_PROVIDER_KUBEPLAY"} {
		_ = os.Setenv(name, "OFF")
	}
}

// exitWithParent ends the process once Terraform is gone (kill -9 of
// terraform leaves providers running otherwise) and its runs and clusterctl
// operations, canceled by the closed connection, have cleaned up.
func exitWithParent() {
	gone := parentwatch.Exited()
	if gone == nil {
		return
	}
	// Logging to a dead terraform's pipes must not kill the process in the
	// middle of a run's clean-up: this function ends it afterwards.
	signal.Ignore(syscall.SIGPIPE)
	<-gone
	grace := time.After(orphanGrace)
	for _, idle := range []<-chan struct{}{runengine.Idle(), clusterctl.Idle()} {
		select {
		case <-idle:
		case <-grace:
		}
	}
	os.Exit(1)
}
