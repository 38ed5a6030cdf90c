package kubeclient

import (
	"errors"
	"reflect"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// kubeconfigWith is a kubeconfig whose user "u" and cluster "c" carry the
// given YAML fields.
func kubeconfigWith(user, cluster string) string {
	return `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:6443
` + cluster + `
users:
- name: u
  user:
` + user + `
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`
}

func TestCheckUntrusted(t *testing.T) {
	const execUser = `    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: /bin/touch
      args: [/tmp/pwned]`
	cases := []struct {
		name, user, cluster string
		allowExec           bool
		// entry and field refused; empty when allowed.
		entry, field, value string
	}{
		{name: "exec", user: execUser, entry: `user "u"`, field: "exec", value: "/bin/touch"},
		{name: "exec allowed", user: execUser, allowExec: true},
		{name: "auth-provider", user: "    auth-provider: {name: oidc, config: {idp-issuer-url: https://idp}}", allowExec: true,
			entry: `user "u"`, field: "auth-provider", value: "oidc"},
		{name: "gcp auth-provider", user: "    auth-provider: {name: gcp, config: {cmd-path: /bin/sh}}",
			entry: `user "u"`, field: "auth-provider", value: "gcp"},
		{name: "tokenFile", user: "    tokenFile: /etc/shadow", entry: `user "u"`, field: "tokenFile", value: "/etc/shadow"},
		{name: "client-certificate", user: "    client-certificate: /home/me/.ssh/id_rsa\n    client-key-data: a2V5",
			entry: `user "u"`, field: "client-certificate", value: "/home/me/.ssh/id_rsa"},
		{name: "client-key", user: "    client-certificate-data: Y2VydA==\n    client-key: /root/key.pem",
			entry: `user "u"`, field: "client-key", value: "/root/key.pem"},
		{name: "certificate-authority", user: "    token: abc", cluster: "    certificate-authority: /var/run/ca.crt",
			entry: `cluster "c"`, field: "certificate-authority", value: "/var/run/ca.crt"},
		{name: "relative path", user: "    tokenFile: ../token", entry: `user "u"`, field: "tokenFile", value: "../token"},
		{name: "inline token", user: "    token: abc", cluster: "    certificate-authority-data: Y2E="},
		{name: "inline client certificate", user: "    client-certificate-data: Y2VydA==\n    client-key-data: a2V5"},
		{name: "basic auth and impersonation", user: "    username: a\n    password: b\n    as: someone"},
		{name: "insecure is a warning, not a refusal", user: "    token: abc", cluster: "    insecure-skip-tls-verify: true"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			raw, err := clientcmd.Load([]byte(kubeconfigWith(c.user, c.cluster)))
			if err != nil {
				t.Fatal(err)
			}
			err = CheckUntrusted(raw, c.allowExec)
			if c.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var he *HostAccessError
			if !errors.As(err, &he) || !errors.Is(err, ErrHostAccess) {
				t.Fatalf("err = %v, want a *HostAccessError wrapping ErrHostAccess", err)
			}
			if he.Entry != c.entry || he.Field != c.field || he.Value != c.value {
				t.Errorf("refused %s %s %q, want %s %s %q", he.Entry, he.Field, he.Value, c.entry, c.field, c.value)
			}
		})
	}
}

// An entry no context uses is checked too: a context can be chosen later.
func TestCheckUntrustedEveryEntry(t *testing.T) {
	raw, err := clientcmd.Load([]byte(kubeconfigWith("    token: abc", "")))
	if err != nil {
		t.Fatal(err)
	}
	raw.AuthInfos["unused"] = raw.AuthInfos["u"].DeepCopy()
	raw.AuthInfos["unused"].TokenFile = "/etc/passwd"
	err = CheckUntrusted(raw, true)
	if !errors.Is(err, ErrHostAccess) || err.Error() != `user "unused" sets tokenFile, which reads file /etc/passwd on this host` {
		t.Errorf("an unused user with a tokenFile: %v, want ErrHostAccess naming it", err)
	}
}

func TestHostAccessErrorMessages(t *testing.T) {
	for _, c := range []struct {
		e    HostAccessError
		want string
	}{
		{HostAccessError{Entry: `user "u"`, Field: "exec", Value: "aws"}, `user "u" sets exec, which runs command aws on this host`},
		{HostAccessError{Entry: `user "u"`, Field: "auth-provider", Value: "gcp"}, `user "u" sets auth-provider, which uses auth provider gcp on this host`},
		{HostAccessError{Entry: `cluster "c"`, Field: "certificate-authority", Value: "/ca"}, `cluster "c" sets certificate-authority, which reads file /ca on this host`},
	} {
		if got := c.e.Error(); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
}

func TestInsecureClusters(t *testing.T) {
	raw, err := clientcmd.Load([]byte(kubeconfigWith("    token: abc", "    insecure-skip-tls-verify: true")))
	if err != nil {
		t.Fatal(err)
	}
	raw.Clusters["b"] = raw.Clusters["c"].DeepCopy()
	raw.Clusters["verified"] = raw.Clusters["c"].DeepCopy()
	raw.Clusters["verified"].InsecureSkipTLSVerify = false
	if got := InsecureClusters(raw); !reflect.DeepEqual(got, []string{"b", "c"}) {
		t.Errorf("insecure clusters %v, want [b c]", got)
	}
}

// ExecSHA256 changes with every field of an exec block that decides what
// runs, not with the rest of the kubeconfig or the order of its fields.
func TestExecSHA256(t *testing.T) {
	digest := func(user string) string {
		t.Helper()
		raw, err := clientcmd.Load([]byte(kubeconfigWith(user, "")))
		if err != nil {
			t.Fatal(err)
		}
		return ExecSHA256(raw)
	}
	const base = "    exec: {apiVersion: client.authentication.k8s.io/v1, command: aws, args: [eks, get-token], env: [{name: A, value: b}]}"
	want := digest(base)
	if len(want) != 64 || digest("    token: abc") != "" {
		t.Fatalf("digest %q, or a user without exec has one", want)
	}
	reordered := "    exec: {env: [{value: b, name: A}], args: [eks, get-token], command: aws, apiVersion: client.authentication.k8s.io/v1}"
	if got := digest(reordered); got != want {
		t.Errorf("the same block in another order: %s, want %s", got, want)
	}
	for _, changed := range []string{
		"    exec: {apiVersion: client.authentication.k8s.io/v1, command: /tmp/aws, args: [eks, get-token], env: [{name: A, value: b}]}",
		"    exec: {apiVersion: client.authentication.k8s.io/v1, command: aws, args: [eks, get-token, -x], env: [{name: A, value: b}]}",
		"    exec: {apiVersion: client.authentication.k8s.io/v1, command: aws, args: [eks, get-token], env: [{name: A, value: c}]}",
		"    exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: aws, args: [eks, get-token], env: [{name: A, value: b}]}",
		"    exec: {apiVersion: client.authentication.k8s.io/v1, command: aws, args: [eks, get-token], env: [{name: A, value: b}], provideClusterInfo: true}",
	} {
		if digest(changed) == want {
			t.Errorf("%s: same digest as %s", changed, base)
		}
	}
}
