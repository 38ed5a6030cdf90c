package acctest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/managed"
)

// LeakScope is where a fault test looks for what a run left behind.
type LeakScope struct {
	// Namespaces are the group's namespaces: its pods and Secrets live there.
	Namespaces []string
	// Group, when set, narrows pods to the group's runs and selects the
	// group's run namespaces (cluster-wide); unset, every pod with
	// kubeplay's managed-by label counts.
	Group string
	// Ledgers are ConfigMaps in Namespaces[0] whose entries are claims (the
	// group's runs and forks ledgers); a missing ledger holds none.
	Ledgers []string
}

// Leaks lists what runs left in scope: kubeplay's run pods (terminating
// ones too: the engine waits until its pods are gone), its Secrets, run
// namespaces not being deleted, and ledger claims. Nil means none.
func Leaks(ctx context.Context, kube kubernetes.Interface, scope LeakScope) error {
	var errs []error
	podSel := managed.Selector()
	if scope.Group != "" {
		podSel = managed.Selector(managed.LabelContainerGroup, scope.Group, managed.LabelRun, "")
	}
	for _, ns := range scope.Namespaces {
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: podSel})
		if err != nil {
			errs = append(errs, err)
		} else {
			for _, p := range pods.Items {
				errs = append(errs, fmt.Errorf("pod %s/%s (%s) is left", ns, p.Name, p.Status.Phase))
			}
		}
		secrets, err := kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: managed.Selector()})
		if err != nil {
			errs = append(errs, err)
		} else {
			for _, s := range secrets.Items {
				errs = append(errs, fmt.Errorf("secret %s/%s is left", ns, s.Name))
			}
		}
	}
	if scope.Group != "" {
		nss, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{
			LabelSelector: managed.LabelContainerGroup + "=" + scope.Group + "," + managed.LabelRun})
		if err != nil {
			errs = append(errs, err)
		} else {
			for _, n := range nss.Items {
				if n.DeletionTimestamp == nil {
					errs = append(errs, fmt.Errorf("run namespace %s is left", n.Name))
				}
			}
		}
	}
	for _, name := range scope.Ledgers {
		if len(scope.Namespaces) == 0 {
			break
		}
		cm, err := kube.CoreV1().ConfigMaps(scope.Namespaces[0]).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			errs = append(errs, err)
		default:
			errs = append(errs, claims(cm)...)
		}
	}
	return errors.Join(errs...)
}

func claims(cm *corev1.ConfigMap) []error {
	var errs []error
	for _, k := range managed.SortedKeys(cm.Data) {
		errs = append(errs, fmt.Errorf("ledger %s/%s holds claim %s: %s", cm.Namespace, cm.Name, k, cm.Data[k]))
	}
	return errs
}

// CheckNoLeaks fails the test with everything Leaks finds.
func CheckNoLeaks(t testing.TB, kube kubernetes.Interface, scope LeakScope) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := Leaks(ctx, kube, scope); err != nil {
		t.Errorf("left behind:\n%v", err)
	}
}
