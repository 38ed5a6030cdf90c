package acctest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/waitfor"
)

// SSHUser is the account SSH targets accept keys for; its home is /home/SSHUser.
const SSHUser = "kubeplay"

// SSHTarget is an OpenSSH server (Debian's sshd, in a pod of the test
// image) that runs reach by pod IP over the harness' bridge.
type SSHTarget struct {
	Pod, IP string
	// KnownHosts is the target's known_hosts line: its IP and host key.
	KnownHosts string
}

// SSHKey returns a fresh ed25519 key: its private key in OpenSSH PEM form
// and its public key.
func SSHKey(t testing.TB) (string, ssh.PublicKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(block)), sp
}

// sshdScript sets up the host key, the user with the authorized key, and
// runs sshd in the foreground. PAM is off: pam_loginuid fails in containers.
const sshdScript = `set -eu
umask 077
printf '%s\n' "$HOST_KEY" > /etc/ssh/ssh_host_ed25519_key
useradd -m -s /bin/sh ` + SSHUser + ` && usermod -p '*' ` + SSHUser + `
install -d -m 700 -o ` + SSHUser + ` -g ` + SSHUser + ` /home/` + SSHUser + `/.ssh
printf '%s\n' "$AUTHORIZED_KEY" > /home/` + SSHUser + `/.ssh/authorized_keys
chown ` + SSHUser + `: /home/` + SSHUser + `/.ssh/authorized_keys
install -d -m 755 /run/sshd
exec /usr/sbin/sshd -D -e -o LogLevel=VERBOSE -o MaxStartups=100:30:200 -o UsePAM=no -o HostKey=/etc/ssh/ssh_host_ed25519_key -o PasswordAuthentication=no
`

// SSHTargets starts n SSH targets in namespace, each with a host key of its
// own, accepting authorized for SSHUser; waits with a watch until each
// accepts connections (a TCP startup probe on port 22) and deletes them
// when the test ends.
func SSHTargets(t testing.TB, kube kubernetes.Interface, namespace string, n int, authorized ssh.PublicKey) []SSHTarget {
	t.Helper()
	// 5 minutes: on a slower machine under make test-all's load one target's
	// pod sandbox took 124 s to start (containerd's RunPodSandbox; the median
	// was 2.5 s), and sshd was not yet listening at 3 minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pods := kube.CoreV1().Pods(namespace)
	targets := make([]SSHTarget, n)
	for i := range targets {
		hostPriv, hostPub := SSHKey(t)
		created, err := pods.Create(ctx, sshdPod(hostPriv, string(ssh.MarshalAuthorizedKey(authorized))), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating SSH target %d: %v", i, err)
		}
		name := created.Name
		t.Cleanup(func() {
			_ = pods.Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		})
		// Runs first (cleanups are LIFO): sshd logs each connection (-e), which
		// is what tells a slow server from a refused or penalised client.
		t.Cleanup(func() {
			if !t.Failed() {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			// The kubelet's startup probe connects from the node's address:
			// its lines are left out.
			probe := "\x00"
			if p, err := pods.Get(ctx, name, metav1.GetOptions{}); err == nil && p.Status.HostIP != "" {
				probe = "from " + p.Status.HostIP + " port"
			}
			logs, err := pods.GetLogs(name, &corev1.PodLogOptions{TailLines: ptr.To[int64](5000)}).DoRaw(ctx)
			var kept []string
			for l := range strings.SplitSeq(string(logs), "\n") {
				if !strings.Contains(l, probe) && !strings.Contains(l, "by "+strings.TrimPrefix(probe, "from ")) &&
					!strings.Contains(l, "kex_exchange_identification: Connection closed by remote host") {
					kept = append(kept, l)
				}
			}
			t.Logf("SSH target %s, sshd's log without the kubelet's probes, last 40 lines (%v):\n%s",
				name, err, strings.Join(kept[max(0, len(kept)-40):], "\n"))
		})
		targets[i] = SSHTarget{Pod: name, KnownHosts: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(hostPub)))}
	}
	for i := range targets {
		p, err := waitfor.Until(ctx, waitfor.Named(pods, targets[i].Pod), &corev1.Pod{}, func(ev watch.Event) (bool, error) {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				return false, nil
			}
			if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
				return false, fmt.Errorf("SSH target %s ended (%s)", p.Name, p.Status.Phase)
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.Status.PodIP != "" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("waiting for SSH target %s to accept connections: %v%s", targets[i].Pod, err, describeNamed(kube, namespace, targets[i].Pod))
		}
		pod, ok := p.Object.(*corev1.Pod)
		if !ok {
			t.Fatalf("waiting for SSH target %s: got a %T", targets[i].Pod, p.Object)
		}
		targets[i].IP = pod.Status.PodIP
		targets[i].KnownHosts = pod.Status.PodIP + " " + targets[i].KnownHosts
	}
	return targets
}

func sshdPod(hostKey, authorized string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "ssh-target-", Labels: map[string]string{"app.kubernetes.io/name": "ssh-target"}},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			AutomountServiceAccountToken:  ptr.To(false),
			Containers: []corev1.Container{{
				Name:            "sshd",
				Image:           TestImage(),
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"sh", "-c", sshdScript},
				Env:             []corev1.EnvVar{{Name: "HOST_KEY", Value: hostKey}, {Name: "AUTHORIZED_KEY", Value: authorized}},
				Resources:       HelperResources(),
				// A startup probe, not a readiness probe: Ready still waits for
				// sshd to accept, but the kubelet stops connecting once it has,
				// where a readiness probe made sshd start a session process every
				// second of the target's life, CPU the whole suite paid for.
				StartupProbe: &corev1.Probe{
					ProbeHandler:     corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(22)}},
					PeriodSeconds:    1,
					FailureThreshold: 180,
				},
			}},
		},
	}
}
