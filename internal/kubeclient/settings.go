// Package kubeclient turns connection settings into client-go configuration
// and keeps one set of clients per cluster for the life of the provider.
package kubeclient

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ExecSettings configures a client-go credential plugin. client-go runs the
// plugin itself and runs it again when the token it returned expires or is
// rejected, so long operations never use a frozen token.
type ExecSettings struct {
	APIVersion string
	Command    string
	Args       []string
	Env        map[string]string
}

// Settings are the provider's connection settings, as in the hashicorp/kubernetes
// provider. Empty strings and nil pointers mean "not set".
type Settings struct {
	Host                  string
	Token                 string
	Insecure              *bool
	TLSServerName         string
	ClientCertificate     string
	ClientKey             string
	ClusterCACertificate  string
	ConfigPaths           []string
	ConfigContext         string
	ConfigContextAuthInfo string
	ConfigContextCluster  string
	ProxyURL              string
	Exec                  *ExecSettings

	// UserAgent is sent with every request.
	UserAgent string
}

// Source says where a configuration came from, for logs and error messages.
type Source string

// The sources a configuration may come from, in order of precedence.
const (
	SourceKubeconfig Source = "kubeconfig"
	SourceExplicit   Source = "provider attributes"
	SourceInCluster  Source = "in-cluster service account"
)

// EnvVars maps each setting to the environment variable that supplies it when
// the attribute is not set, following the hashicorp/kubernetes provider.
var EnvVars = struct {
	Host, Token, Insecure, TLSServerName, ClientCertificate, ClientKey, ClusterCACertificate,
	ConfigPath, ConfigPaths, ConfigContext, ConfigContextAuthInfo, ConfigContextCluster, ProxyURL string
}{
	Host:                  "KUBE_HOST",
	Token:                 "KUBE_TOKEN",
	Insecure:              "KUBE_INSECURE",
	TLSServerName:         "KUBE_TLS_SERVER_NAME",
	ClientCertificate:     "KUBE_CLIENT_CERT_DATA",
	ClientKey:             "KUBE_CLIENT_KEY_DATA",
	ClusterCACertificate:  "KUBE_CLUSTER_CA_CERT_DATA",
	ConfigPath:            "KUBE_CONFIG_PATH",
	ConfigPaths:           "KUBE_CONFIG_PATHS",
	ConfigContext:         "KUBE_CTX",
	ConfigContextAuthInfo: "KUBE_CTX_AUTH_INFO",
	ConfigContextCluster:  "KUBE_CTX_CLUSTER",
	ProxyURL:              "KUBE_PROXY_URL",
}

// EnvError is a malformed environment variable.
type EnvError struct {
	Name string
	Err  error
}

func (e *EnvError) Error() string { return fmt.Sprintf("environment variable %s: %v", e.Name, e.Err) }

// ApplyEnv fills every setting that is not set from its environment variable.
// KUBECONFIG is not read here: it is the ambient default that RESTConfig uses
// only when nothing else is configured.
func (s *Settings) ApplyEnv(getenv func(string) string) error {
	fill := func(dst *string, name string) {
		if *dst == "" {
			*dst = getenv(name)
		}
	}
	fill(&s.Host, EnvVars.Host)
	fill(&s.Token, EnvVars.Token)
	fill(&s.TLSServerName, EnvVars.TLSServerName)
	fill(&s.ClientCertificate, EnvVars.ClientCertificate)
	fill(&s.ClientKey, EnvVars.ClientKey)
	fill(&s.ClusterCACertificate, EnvVars.ClusterCACertificate)
	fill(&s.ConfigContext, EnvVars.ConfigContext)
	fill(&s.ConfigContextAuthInfo, EnvVars.ConfigContextAuthInfo)
	fill(&s.ConfigContextCluster, EnvVars.ConfigContextCluster)
	fill(&s.ProxyURL, EnvVars.ProxyURL)
	if s.Insecure == nil {
		if v := getenv(EnvVars.Insecure); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return &EnvError{Name: EnvVars.Insecure, Err: fmt.Errorf("%q is not a boolean (use true or false)", v)}
			}
			s.Insecure = &b
		}
	}
	if len(s.ConfigPaths) == 0 {
		if v := getenv(EnvVars.ConfigPath); v != "" {
			s.ConfigPaths = []string{v}
		} else if v := getenv(EnvVars.ConfigPaths); v != "" {
			s.ConfigPaths = filepath.SplitList(v)
		}
	}
	return nil
}

// HasExplicit reports whether any connection attribute other than kubeconfig
// selection is set.
func (s *Settings) HasExplicit() bool {
	return s.Host != "" || s.Token != "" || s.ClientCertificate != "" || s.ClientKey != "" ||
		s.ClusterCACertificate != "" || s.Exec != nil || s.Insecure != nil || s.TLSServerName != "" || s.ProxyURL != ""
}

// ErrNoConfiguration means that no setting, kubeconfig or in-cluster service
// account was found.
var ErrNoConfiguration = errors.New("no Kubernetes connection is configured: set config_path or host in the provider block, " +
	"the KUBE_CONFIG_PATH or KUBE_HOST environment variables, or KUBECONFIG; inside a pod the service account is used")

// RESTConfig builds the client-go configuration. Precedence: kubeconfig files
// (config_path(s), then KUBE_CONFIG_PATH(S)) with explicit attributes applied
// over them; explicit attributes alone; KUBECONFIG when nothing explicit is
// set; the in-cluster service account last.
func (s *Settings) RESTConfig(getenv func(string) string) (*rest.Config, Source, error) {
	paths := s.ConfigPaths
	if len(paths) == 0 && !s.HasExplicit() {
		if v := getenv("KUBECONFIG"); v != "" {
			paths = filepath.SplitList(v)
		}
	}
	var (
		cfg *rest.Config
		src Source
		err error
	)
	switch {
	case len(paths) > 0:
		cfg, err = s.fromKubeconfig(paths)
		src = SourceKubeconfig
	case s.HasExplicit():
		cfg, err = s.fromExplicit()
		src = SourceExplicit
	default:
		cfg, err = rest.InClusterConfig()
		if errors.Is(err, rest.ErrNotInCluster) {
			return nil, "", ErrNoConfiguration
		}
		src = SourceInCluster
	}
	if err != nil {
		return nil, src, err
	}
	Tune(cfg, s.UserAgent)
	return cfg, src, nil
}

// Tune sets the client-side limits every kubeplay client uses: client-go's
// defaults (5 QPS) throttle bulk applies and deletes for no benefit. It also
// counts the client's requests (count.go).
func Tune(cfg *rest.Config, userAgent string) {
	cfg.QPS = 300
	cfg.Burst = 600
	cfg.Wrap(wrapCounting)
	if userAgent != "" {
		cfg.UserAgent = userAgent
	}
}

func (s *Settings) fromKubeconfig(paths []string) (*rest.Config, error) {
	expanded := make([]string, 0, len(paths))
	for _, p := range paths {
		p, err := expandHome(p)
		if err != nil {
			return nil, err
		}
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("kubeconfig file %s: %w", p, err)
		}
		expanded = append(expanded, p)
	}
	rules := &clientcmd.ClientConfigLoadingRules{Precedence: expanded}
	overrides := &clientcmd.ConfigOverrides{
		CurrentContext: s.ConfigContext,
		Context: clientcmdapi.Context{
			AuthInfo: s.ConfigContextAuthInfo,
			Cluster:  s.ConfigContextCluster,
		},
	}
	s.applyOverrides(overrides)
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", strings.Join(expanded, string(filepath.ListSeparator)), err)
	}
	return cfg, nil
}

func (s *Settings) fromExplicit() (*rest.Config, error) {
	if s.Host == "" {
		return nil, errors.New("host is required when no kubeconfig is used")
	}
	overrides := &clientcmd.ConfigOverrides{}
	s.applyOverrides(overrides)
	cfg, err := clientcmd.NewDefaultClientConfig(*clientcmdapi.NewConfig(), overrides).ClientConfig()
	if err != nil {
		return nil, err
	}
	return cfg, nil
}

func (s *Settings) applyOverrides(o *clientcmd.ConfigOverrides) {
	if s.Host != "" {
		o.ClusterInfo.Server = s.Host
	}
	if s.ClusterCACertificate != "" {
		o.ClusterInfo.CertificateAuthorityData = []byte(s.ClusterCACertificate)
	}
	if s.Insecure != nil {
		o.ClusterInfo.InsecureSkipTLSVerify = *s.Insecure
	}
	if s.TLSServerName != "" {
		o.ClusterInfo.TLSServerName = s.TLSServerName
	}
	if s.ProxyURL != "" {
		o.ClusterDefaults.ProxyURL = s.ProxyURL
		o.ClusterInfo.ProxyURL = s.ProxyURL
	}
	if s.Token != "" {
		o.AuthInfo.Token = s.Token
	}
	if s.ClientCertificate != "" {
		o.AuthInfo.ClientCertificateData = []byte(s.ClientCertificate)
	}
	if s.ClientKey != "" {
		o.AuthInfo.ClientKeyData = []byte(s.ClientKey)
	}
	if s.Exec != nil {
		e := &clientcmdapi.ExecConfig{
			APIVersion:      s.Exec.APIVersion,
			Command:         s.Exec.Command,
			Args:            s.Exec.Args,
			InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
		}
		for _, k := range slices.Sorted(maps.Keys(s.Exec.Env)) {
			e.Env = append(e.Env, clientcmdapi.ExecEnvVar{Name: k, Value: s.Exec.Env[k]})
		}
		o.AuthInfo.Exec = e
	}
}

func expandHome(p string) (string, error) {
	if p == "~" || strings.HasPrefix(p, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("expanding %s: %w", p, err)
		}
		return filepath.Join(home, strings.TrimPrefix(p, "~")), nil
	}
	return p, nil
}
