package runner

import (
	"testing"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
)

func TestExitReason(t *testing.T) {
	for _, c := range []struct {
		command bool
		counts  bundle.HostCounts
		want    Reason
	}{
		{true, bundle.HostCounts{Failed: 1}, ReasonCommandFailed},
		{false, bundle.HostCounts{Failed: 1, Unreachable: 3}, ReasonPlaybookFailed},
		{false, bundle.HostCounts{OK: 2, Unreachable: 3}, ReasonHostsUnreachable},
		// A non-zero exit with no failed host (a syntax error, a missing role).
		{false, bundle.HostCounts{}, ReasonPlaybookFailed},
	} {
		if got := exitReason(c.command, Result{HostCounts: c.counts}); got != c.want {
			t.Errorf("exitReason(%v, %+v) = %s, want %s", c.command, c.counts, got, c.want)
		}
	}
}

// TestReasonsDocumented: every reason is in Reasons once, with a meaning.
func TestReasonsDocumented(t *testing.T) {
	seen := map[Reason]bool{}
	for _, d := range Reasons {
		if seen[d.Reason] || d.Meaning == "" {
			t.Errorf("reason %q is listed twice or without a meaning", d.Reason)
		}
		seen[d.Reason] = true
	}
	for _, r := range []Reason{ReasonPlaybookFailed, ReasonHostsUnreachable, ReasonCommandFailed, ReasonQuotaExceeded,
		ReasonCapacityTimeout, ReasonUnschedulable, ReasonImagePull, ReasonPodRejected, ReasonAdmissionTimeout,
		ReasonNodeStartFailed, ReasonStartFailed, ReasonStartTimeout, ReasonEvicted, ReasonPodDeleted, ReasonNodeLost,
		ReasonOOMKilled, ReasonStreamLost, ReasonBundleFailed, ReasonResultUnreadable, ReasonCleanupFailed,
		ReasonTimeout, ReasonCanceled, ReasonClusterUnavailable, ReasonOther} {
		if !seen[r] {
			t.Errorf("reason %q is not documented", r)
		}
	}
}
