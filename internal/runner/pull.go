package runner

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/waitfor"
)

// PullCheckAfter is how long a pod may take from its binding until its
// container runs before the run asks for the kubelet's Pulled event to
// tell the image's pull apart: the pod's status shows the sandbox, the pull
// and the start only together, once all are done. A quicker start costs
// no request, and its image step is 0 s, not measured.
const PullCheckAfter = 2 * time.Second

// PulledWait bounds how long the end of such a run waits, watching, for a
// Pulled event that its first read did not find: the kubelet records its
// events after the fact, and a busy node's reached the API server seconds
// after the pod had started (and the run ended).
const PulledWait = 5 * time.Second

// pulledIn reads the kubelet's Pulled event: how long the pull took, and
// whether the image was there already. ok is false for other messages.
//
//	Successfully pulled image "x" in 6.16s (6.16s including waiting). Image size: 1 bytes.
//	Container image "x" already present on machine
func pulledIn(msg string) (took time.Duration, present, ok bool) {
	if strings.HasPrefix(msg, "Container image ") && strings.Contains(msg, " already present on machine") {
		return 0, true, true
	}
	m := pulledRE.FindStringSubmatch(msg)
	if m == nil {
		return 0, false, false
	}
	d, err := time.ParseDuration(strings.TrimSuffix(m[1], "."))
	if err != nil || d < 0 {
		return 0, false, false
	}
	return d, false, true
}

var pulledRE = regexp.MustCompile(`^Successfully pulled image "[^"]*" in (\S+)`)

// splitImage parts the sandbox step of a pod that took PullCheckAfter or
// more to start into the sandbox and the image's pull, from the kubelet's
// Pulled event of pod (one list of its events); a quicker pod gets an
// image step of 0 s that says it was not measured.
func (r *Runner) splitImage(ctx context.Context, tl *Timeline, pod *corev1.Pod) {
	span, ok := tl.Duration(StepSandbox)
	if !ok {
		return
	}
	if span < PullCheckAfter {
		tl.Split(StepSandbox, StepImage, 0, "not measured: the pod started within "+PullCheckAfter.String())
		return
	}
	took, detail := time.Duration(0), "not measured: the kubelet's Pulled event was not found"
	found := func(e *corev1.Event) bool {
		if e.InvolvedObject.Name != pod.Name || pod.UID != "" && e.InvolvedObject.UID != pod.UID {
			return false
		}
		d, present, ok := pulledIn(e.Message)
		if ok {
			took, detail = d, "pulled in "+d.Round(time.Millisecond).String()
			if present {
				detail = "present on the node"
			}
		}
		return ok
	}
	pulled := fields.OneTermEqualSelector("reason", "Pulled")
	list, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	events, err := podEvents(list, r.Kube, pod, pulled)
	if err == nil && !slices.ContainsFunc(events, func(e corev1.Event) bool { return found(&e) }) {
		// Not recorded yet: watch for it, a while (a list and a watch; when
		// the read above finds it, that read is the only request).
		wait, cancel := context.WithTimeout(ctx, PulledWait)
		defer cancel()
		_, _ = waitfor.Until(wait, waitfor.Selected(r.Kube.CoreV1().Events(pod.Namespace), podEventSelector(pod, pulled)),
			&corev1.Event{}, func(ev watch.Event) (bool, error) {
				e, ok := ev.Object.(*corev1.Event)
				return ok && ev.Type != watch.Deleted && found(e), nil
			})
	}
	tl.Split(StepSandbox, StepImage, took, detail)
}
