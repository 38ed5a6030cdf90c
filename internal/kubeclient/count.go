package kubeclient

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/hashicorp/terraform-plugin-log/tflog"
)

// EnvRequestLog names a file to which every API request the provider makes
// is appended, one line each ("pid VERB resource namespace"): the request-count
// benchmarks read it, as the provider runs in a process of the terraform CLI.
// Tests only; the same lines are logged at TRACE.
const EnvRequestLog = "KUBEPLAY_TEST_REQUEST_LOG"

// Request is one API request as counted: its verb (GET, LIST, WATCH, POST,
// PUT, PATCH, DELETE, DELETECOLLECTION), resource (with subresource, as
// "pods/exec"; "discovery" for the API's discovery paths) and namespace.
// Nothing from the body or the query is kept: no name, selector or value
// that could be secret.
type Request struct {
	Verb, Resource, Namespace string
}

func (r Request) String() string {
	s := r.Verb + " " + r.Resource
	if r.Namespace != "" {
		s += " " + r.Namespace
	}
	return s
}

// ParseRequest classifies an API request by its method, path and whether
// it asks for a watch, as the API server's metrics do. Each field is one
// token of letters, digits and ".-_/", or "?": a line of the request log is
// always one request.
func ParseRequest(method, path string, watch bool) Request {
	r := parseRequest(method, path, watch)
	r.Verb, r.Resource = token(r.Verb), token(r.Resource)
	if r.Namespace != "" {
		r.Namespace = token(r.Namespace)
	}
	return r
}

func parseRequest(method, path string, watch bool) Request {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	// /api/v1/... or /apis/group/version/...
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return Request{Verb: method, Resource: "discovery"}
	}
	var r Request
	// namespaces/ns/resource[/name[/sub]]; "namespaces/ns" alone is the
	// namespace itself, and "namespaces/ns/status" or "/finalize" its
	// subresource.
	namespaceSub := len(parts) == 3 && (parts[2] == "status" || parts[2] == "finalize")
	if len(parts) >= 3 && parts[0] == "namespaces" && !namespaceSub {
		r.Namespace = parts[1]
		parts = parts[2:]
	}
	if len(parts) == 0 || parts[0] == "" {
		return Request{Verb: method, Resource: "discovery"}
	}
	r.Resource = parts[0]
	named := len(parts) >= 2
	if len(parts) >= 3 {
		r.Resource += "/" + parts[2]
	}
	switch {
	case watch:
		r.Verb = "WATCH"
	case method == http.MethodGet && !named:
		r.Verb = "LIST"
	case method == http.MethodDelete && !named:
		r.Verb = "DELETECOLLECTION"
	default:
		r.Verb = method
	}
	return r
}

const tokenChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_/"

// token is s when it is one token of the request log, else "?".
func token(s string) string {
	if s == "" {
		return "?"
	}
	if strings.IndexFunc(s, func(c rune) bool {
		return !strings.ContainsRune(tokenChars, c)
	}) >= 0 {
		return "?"
	}
	return s
}

// counting logs each request that goes through it.
type counting struct{ next http.RoundTripper }

func (c counting) RoundTrip(req *http.Request) (*http.Response, error) {
	r := ParseRequest(req.Method, req.URL.Path, req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1")
	logRequest(req.Context(), r)
	return c.next.RoundTrip(req)
}

// wrapCounting installs counting once however often a configuration is
// tuned: a config copied from a tuned one keeps its wrapper.
func wrapCounting(rt http.RoundTripper) http.RoundTripper {
	if _, ok := rt.(counting); ok {
		return rt
	}
	return counting{next: rt}
}

var requestLog struct {
	mu   sync.Mutex
	path string
	f    *os.File
}

func logRequest(ctx context.Context, r Request) {
	tflog.Trace(ctx, "kubernetes API request", map[string]any{"verb": r.Verb, "resource": r.Resource, "namespace": r.Namespace})
	p := os.Getenv(EnvRequestLog)
	if p == "" {
		return
	}
	requestLog.mu.Lock()
	defer requestLog.mu.Unlock()
	if p != requestLog.path {
		if requestLog.f != nil {
			_ = requestLog.f.Close()
		}
		requestLog.path = p
		requestLog.f, _ = os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	}
	if requestLog.f != nil {
		// O_APPEND and one write per line: the processes of one command
		// (plan, apply) write the same file without interleaving a line.
		_, _ = fmt.Fprintf(requestLog.f, "%d %s\n", os.Getpid(), r)
	}
}
