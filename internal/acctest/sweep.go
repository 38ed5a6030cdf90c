package acctest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// sweepSkipped are the cluster-scoped resources a sweep never deletes: the
// node and the kubelet's records of it, and what the API server and the
// controllers keep for themselves (the APIService the aggregator registers
// for each CRD, API priority and fairness, service IP ranges).
var sweepSkipped = map[string]bool{
	"nodes":                       true,
	"apiservices":                 true,
	"csinodes":                    true,
	"flowschemas":                 true,
	"prioritylevelconfigurations": true,
	"certificatesigningrequests":  true,
	"runtimeclasses":              true,
	"volumeattachments":           true,
	"storageversionmigrations":    true,
	"ipaddresses":                 true,
	"servicecidrs":                true,
}

// bootstrapLabel marks the roles and bindings the API server makes when it
// first starts: a cluster born after the time given (the second cluster,
// started by its first test) has them, and they are not a test's.
const bootstrapLabel = "kubernetes.io/bootstrapping"

// sweepKept are namespaces the API server and the controllers make, and
// the quickstart's catalog namespace, which outlive any test run.
var sweepKept = map[string]bool{"default": true, "kube-system": true, "kube-public": true, "kube-node-lease": true, "kubeplay-system": true}

// Sweep deletes from the cluster of cfg what tests made there at or after
// since and did not remove: every namespace (and so everything in it) and
// every other cluster-scoped object (CRDs, ClusterRoles and their bindings,
// webhook configurations) created since then, but for sweepSkipped's,
// sweepKept's, the API server's bootstrap objects (bootstrapLabel, names
// that begin with "system:" or "system-"). A test removes what it
// made in t.Cleanup; a test process stopped by a signal or killed at its
// timeout runs none, and make test-all calls this when it is interrupted.
// It must only be pointed at a cluster that the test harness owns: it does
// not know which objects were a test's, only when they were made. A
// non-empty selector narrows it to objects with those labels (its own
// test's, beside other tests). It returns what it deleted, as
// "resource/name".
func Sweep(ctx context.Context, cfg *rest.Config, since time.Time, selector string) ([]string, error) {
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	// A group whose discovery fails (an aggregated API whose server a test
	// removed) leaves the others listed: partial results come with the error.
	lists, derr := disco.ServerPreferredResources()
	if len(lists) == 0 && derr != nil {
		return nil, derr
	}
	since = since.Truncate(time.Second) // creationTimestamp has whole seconds
	var deleted []string
	var errs []error
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range list.APIResources {
			if r.Namespaced || strings.Contains(r.Name, "/") || sweepSkipped[r.Name] || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "delete") {
				continue
			}
			res := dyn.Resource(gv.WithResource(r.Name))
			objs, err := res.List(ctx, metav1.ListOptions{LabelSelector: selector})
			if err != nil {
				errs = append(errs, fmt.Errorf("listing %s: %w", r.Name, err))
				continue
			}
			for _, o := range objs.Items {
				name := o.GetName()
				_, bootstrap := o.GetLabels()[bootstrapLabel]
				if o.GetCreationTimestamp().Time.Before(since) || bootstrap || strings.HasPrefix(name, "system:") ||
					strings.HasPrefix(name, "system-") || (r.Name == "namespaces" && sweepKept[name]) || o.GetDeletionTimestamp() != nil {
					continue
				}
				bg := metav1.DeletePropagationBackground
				err := res.Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg})
				switch {
				case err == nil:
					deleted = append(deleted, r.Name+"/"+name)
				case !apierrors.IsNotFound(err):
					errs = append(errs, fmt.Errorf("deleting %s/%s: %w", r.Name, name, err))
				}
			}
		}
	}
	slices.Sort(deleted)
	return deleted, errors.Join(errs...)
}
