// Package podexec runs commands in containers of running pods, the way
// `kubectl exec` does: through the apiserver's pods/exec subresource, over
// WebSocket (stream protocol v5) with a fallback to SPDY for servers or
// proxies that refuse the WebSocket upgrade.
package podexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"
)

// Run executes command (argv, no shell) in the given container of a running
// pod and waits for it to finish or for ctx to end.
//
// stdin, if not nil, is copied to the command's standard input, which is
// closed when stdin reaches EOF. stdout and stderr, if not nil, receive the
// command's output; a nil writer means the stream is not requested. No TTY
// is allocated, so stdout and stderr stay separate.
//
// A command that ran and exited non-zero is not an error: its exit code is
// returned with a nil error. Any other failure (pod or container not found,
// not running, permission denied, connection lost, ctx cancelled) is
// returned as an error naming the pod, with exitCode -1.
func Run(ctx context.Context, cfg *rest.Config, client kubernetes.Interface, namespace, pod, container string,
	command []string, stdin io.Reader, stdout, stderr io.Writer) (exitCode int, err error) {
	if len(command) == 0 {
		return -1, fmt.Errorf("exec in pod %s/%s: empty command", namespace, pod)
	}
	req := client.CoreV1().RESTClient().Post().
		Namespace(namespace).
		Resource("pods").
		Name(pod).
		SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: container,
			Command:   command,
			Stdin:     stdin != nil,
			Stdout:    stdout != nil,
			Stderr:    stderr != nil,
			TTY:       false,
		}, scheme.ParameterCodec)

	var refusal error // the server's status, when it refused the WebSocket upgrade with one
	executor, err := newExecutor(cfg, req, func(status error) { refusal = status })
	if err != nil {
		return -1, fmt.Errorf("exec in pod %s/%s: %w", namespace, pod, err)
	}
	err = executor.StreamWithContext(ctx, remotecommand.StreamOptions{
		Stdin:  stdin,
		Stdout: stdout,
		Stderr: stderr,
	})
	if err == nil {
		return 0, nil
	}
	if status := apierrors.APIStatus(nil); refusal != nil && !errors.As(err, &status) {
		// SPDY, tried after the refusal, keeps only the status's text:
		// keep the status itself, whose code tells a refusal for good
		// (forbidden, no such container) from one for now (Transient).
		err = refused{err, refusal}
	}
	// The command ran and exited non-zero: the stream protocol reports it as
	// a utilexec.CodeExitError.
	var exitErr utilexec.ExitError
	if errors.As(err, &exitErr) && exitErr.Exited() {
		return exitErr.ExitStatus(), nil
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		// The connection's deadline comes from ctx and may fire (an i/o
		// timeout) a moment before ctx says it is done: report ctx's error.
		<-ctx.Done()
	}
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		err = fmt.Errorf("%w (%w)", ctxErr, err)
	}
	return -1, fmt.Errorf("exec in pod %s/%s: %w", namespace, pod, err)
}

// newExecutor returns an executor that tries WebSocket first and falls back
// to SPDY when the upgrade is refused (older servers, proxies), as kubectl
// does. The error checks must come from k8s.io/streaming: client-go returns
// that module's UpgradeFailureError, which the deprecated copy in
// k8s.io/apimachinery/pkg/util/httpstream does not recognise.
func newExecutor(cfg *rest.Config, req *rest.Request, onRefusal func(status error)) (remotecommand.Executor, error) {
	// Note: the WebSocket executor takes GET, the SPDY one POST.
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
	if err != nil {
		return nil, fmt.Errorf("websocket executor: %w", err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
	if err != nil {
		return nil, fmt.Errorf("spdy executor: %w", err)
	}
	return remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		var upgrade *httpstream.UpgradeFailureError
		var status apierrors.APIStatus
		if errors.As(err, &upgrade) && errors.As(upgrade.Cause, &status) {
			onRefusal(upgrade.Cause)
		}
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
}

// refused is SPDY's error for an exec whose WebSocket upgrade the server
// refused with a status: its text, and the status for errors.As.
type refused struct{ err, status error }

func (r refused) Error() string   { return r.err.Error() }
func (r refused) Unwrap() []error { return []error{r.err, r.status} }

// Transient reports whether err, from Run, may pass if the exec is asked
// for again: a stream that broke, or an exec the API server or the kubelet
// refused for now (a restart, an overload, "container not found" from a
// kubelet that has not yet listed its containers again). An exec refused
// for good (forbidden, no such pod or container) is not.
func Transient(err error) bool {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		switch code := status.Status().Code; {
		case code >= 500, code == http.StatusTooManyRequests:
			return true
		case code == http.StatusBadRequest:
			return strings.Contains(err.Error(), "container not found")
		}
		return false
	}
	return err != nil
}
