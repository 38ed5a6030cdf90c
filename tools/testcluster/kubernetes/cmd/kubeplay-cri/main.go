// Command kubeplay-cri is the test cluster's minimal CRI client (crictl is not
// obtainable here). cluster-down uses it to stop and remove every pod sandbox,
// which kills the containers and runs CNI DEL for their network namespaces.
//
//	kubeplay-cri -r SOCKET pods|ps|rmp-all
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	rt "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func main() {
	sock := flag.String("r", "", "path of the containerd socket")
	flag.Parse()
	if *sock == "" || flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: kubeplay-cri -r SOCKET pods|ps|rmp-all")
		os.Exit(2)
	}
	if err := run(*sock, flag.Arg(0)); err != nil {
		fmt.Fprintln(os.Stderr, "kubeplay-cri:", err)
		os.Exit(1)
	}
}

func run(sock, verb string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	c := rt.NewRuntimeServiceClient(conn)
	switch verb {
	case "pods", "rmp-all":
		r, err := c.ListPodSandbox(ctx, &rt.ListPodSandboxRequest{})
		if err != nil {
			return err
		}
		var failed int
		for _, p := range r.Items {
			fmt.Printf("%s %s/%s %s\n", p.Id[:13], p.Metadata.Namespace, p.Metadata.Name, p.State)
			if verb != "rmp-all" {
				continue
			}
			if _, err := c.StopPodSandbox(ctx, &rt.StopPodSandboxRequest{PodSandboxId: p.Id}); err != nil {
				fmt.Fprintln(os.Stderr, "stop:", err)
				failed++
			}
			if _, err := c.RemovePodSandbox(ctx, &rt.RemovePodSandboxRequest{PodSandboxId: p.Id}); err != nil {
				fmt.Fprintln(os.Stderr, "remove:", err)
				failed++
			}
		}
		if failed > 0 {
			return fmt.Errorf("%d sandbox operations failed", failed)
		}
	case "ps":
		r, err := c.ListContainers(ctx, &rt.ListContainersRequest{})
		if err != nil {
			return err
		}
		for _, x := range r.Containers {
			fmt.Printf("%s %s pod=%s %s %s\n", x.Id[:13], x.Metadata.Name, x.PodSandboxId[:13], x.State, x.Image.Image)
		}
	default:
		return fmt.Errorf("unknown verb %q (want pods, ps or rmp-all)", verb)
	}
	return nil
}
