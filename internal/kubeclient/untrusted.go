package kubeclient

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ErrHostAccess: a kubeconfig that kubeplay read from cluster data asks
// client-go to run a program or read a file on the host kubeplay runs on.
// Whoever can write that data would otherwise run code there.
var ErrHostAccess = errors.New("kubeconfigs read from cluster data may not run programs or read files on this host")

// HostAccessError names the kubeconfig entry and field that were refused.
type HostAccessError struct {
	// Entry is the kubeconfig entry, such as `user "admin"` or `cluster "c"`.
	Entry string
	// Field is the kubeconfig field as written in YAML, such as "exec" or
	// "tokenFile".
	Field string
	// Value is the command or path, for the message.
	Value string
}

func (e *HostAccessError) Error() string {
	what := "reads file " + e.Value
	switch e.Field {
	case "exec":
		what = "runs command " + e.Value
	case "auth-provider":
		what = "uses auth provider " + e.Value
	}
	return fmt.Sprintf("%s sets %s, which %s on this host", e.Entry, e.Field, what)
}

func (e *HostAccessError) Unwrap() error { return ErrHostAccess }

// CheckUntrusted refuses, before client-go sees it, a kubeconfig that would
// run a program or read a file on this host: exec plugins (unless allowExec),
// auth providers (some run commands, all persist tokens back to files) and
// every file path. Inline data (token, *-data fields) is what it allows.
// Every entry is checked, not only the current context's: a context can be
// chosen after the check.
func CheckUntrusted(cfg *clientcmdapi.Config, allowExec bool) error {
	for _, name := range slices.Sorted(maps.Keys(cfg.AuthInfos)) {
		u := cfg.AuthInfos[name]
		if u == nil {
			continue
		}
		entry := fmt.Sprintf("user %q", name)
		switch {
		case u.Exec != nil && !allowExec:
			return &HostAccessError{Entry: entry, Field: "exec", Value: u.Exec.Command}
		case u.AuthProvider != nil:
			return &HostAccessError{Entry: entry, Field: "auth-provider", Value: u.AuthProvider.Name}
		case u.TokenFile != "":
			return &HostAccessError{Entry: entry, Field: "tokenFile", Value: u.TokenFile}
		case u.ClientCertificate != "":
			return &HostAccessError{Entry: entry, Field: "client-certificate", Value: u.ClientCertificate}
		case u.ClientKey != "":
			return &HostAccessError{Entry: entry, Field: "client-key", Value: u.ClientKey}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Clusters)) {
		if c := cfg.Clusters[name]; c != nil && c.CertificateAuthority != "" {
			return &HostAccessError{Entry: fmt.Sprintf("cluster %q", name), Field: "certificate-authority", Value: c.CertificateAuthority}
		}
	}
	return nil
}

// execStanza is one user's exec block in the canonical form ExecSHA256
// digests: every field that decides what runs and with what, in a fixed
// order, empty lists as [].
type execStanza struct {
	User               string          `json:"user"`
	APIVersion         string          `json:"apiVersion"`
	Command            string          `json:"command"`
	Args               []string        `json:"args"`
	Env                []execStanzaEnv `json:"env"`
	ProvideClusterInfo bool            `json:"provideClusterInfo"`
	InteractiveMode    string          `json:"interactiveMode"`
	InstallHint        string          `json:"installHint"`
}

type execStanzaEnv struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// ExecSHA256 is the hex SHA-256 of the canonical JSON of a kubeconfig's exec
// blocks: a list of {user, apiVersion, command, args, env,
// provideClusterInfo, interactiveMode, installHint}, one per user that sets
// exec, sorted by user name. "" when no user sets exec. It is what a
// workspace pins to let an exec plugin run: a changed command, argument or
// environment variable changes it.
func ExecSHA256(cfg *clientcmdapi.Config) string {
	var stanzas []execStanza
	for _, name := range slices.Sorted(maps.Keys(cfg.AuthInfos)) {
		u := cfg.AuthInfos[name]
		if u == nil || u.Exec == nil {
			continue
		}
		s := execStanza{User: name, APIVersion: u.Exec.APIVersion, Command: u.Exec.Command, Args: []string{},
			Env: []execStanzaEnv{}, ProvideClusterInfo: u.Exec.ProvideClusterInfo,
			InteractiveMode: string(u.Exec.InteractiveMode), InstallHint: u.Exec.InstallHint}
		s.Args = append(s.Args, u.Exec.Args...)
		for _, e := range u.Exec.Env {
			s.Env = append(s.Env, execStanzaEnv{Name: e.Name, Value: e.Value})
		}
		stanzas = append(stanzas, s)
	}
	if len(stanzas) == 0 {
		return ""
	}
	b, _ := json.Marshal(stanzas) // strings and bools only: cannot fail
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// InsecureClusters lists the clusters of a kubeconfig that skip TLS
// verification of their API server (insecure-skip-tls-verify), sorted.
func InsecureClusters(cfg *clientcmdapi.Config) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(cfg.Clusters)) {
		if c := cfg.Clusters[name]; c != nil && c.InsecureSkipTLSVerify {
			out = append(out, name)
		}
	}
	return out
}

// HostReach says how a client configuration would reach the host it runs
// on: an exec plugin, an auth provider, or a file client-go would read; ""
// when none. It is CheckUntrusted's check on what clientcmd built, so that
// a kubeconfig field the check missed cannot slip through.
func HostReach(cfg *rest.Config) string {
	switch {
	case cfg.ExecProvider != nil:
		return "exec plugin " + cfg.ExecProvider.Command
	case cfg.AuthProvider != nil:
		return "auth provider " + cfg.AuthProvider.Name
	case cfg.AuthConfigPersister != nil:
		return "an auth config persister"
	case cfg.BearerTokenFile != "":
		return "token file " + cfg.BearerTokenFile
	case cfg.CAFile != "":
		return "CA file " + cfg.CAFile
	case cfg.CertFile != "":
		return "certificate file " + cfg.CertFile
	case cfg.KeyFile != "":
		return "key file " + cfg.KeyFile
	}
	return ""
}
