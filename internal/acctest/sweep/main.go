// Command sweep deletes what an interrupted test run left on the test
// harness' own clusters: the namespaces and other cluster-scoped objects
// made at or after -since (acctest.Sweep). tools/testacc.sh runs it when
// make test-all is stopped by a signal, whose test processes then run no
// clean-up of their own.
//
//	go run ./internal/acctest/sweep -since 2026-12-01T10:00:00Z KUBECONFIG...
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/acctest"
)

func main() {
	sinceFlag := flag.String("since", "", "RFC 3339 time: objects created at or after it are deleted (required)")
	flag.Parse()
	since, err := time.Parse(time.RFC3339, *sinceFlag)
	if err != nil || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: sweep -since RFC3339-TIME KUBECONFIG...")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	status := 0
	for _, path := range flag.Args() {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "sweep: %s: %v\n", path, err)
			status = 1
			continue
		}
		deleted, err := acctest.Sweep(ctx, cfg, since, "")
		for _, d := range deleted {
			fmt.Printf("sweep: %s: deleted %s\n", path, d)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "sweep: %s: %v\nWhat was not deleted is left: once the cluster answers (make cluster-up; tools/testcluster/cluster2.sh up for the second), run %s -since %s %s\n",
				path, err, os.Args[0], *sinceFlag, path)
			status = 1
		}
	}
	os.Exit(status)
}
