package runner

import (
	"context"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// PullCheckAfter is how long a pod may take from its binding until its
// container runs before the run asks for the kubelet's Pulled event to
// tell the image's pull apart: the pod's status shows the sandbox, the pull
// and the start only together, once all are done. A quicker start costs
// no request, and its image step is 0 s, not measured.
const PullCheckAfter = 2 * time.Second

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
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	events, err := podEvents(ctx, r.Kube, pod, fields.OneTermEqualSelector("reason", "Pulled"))
	detail := "not measured: the kubelet's Pulled event was not found"
	var took time.Duration
	if err == nil {
		for _, e := range events {
			if d, present, ok := pulledIn(e.Message); ok {
				took, detail = d, "pulled in "+d.Round(time.Millisecond).String()
				if present {
					detail = "present on the node"
				}
				break
			}
		}
	}
	tl.Split(StepSandbox, StepImage, took, detail)
}
