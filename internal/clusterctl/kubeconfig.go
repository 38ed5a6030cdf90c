// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package clusterctl

import (
	"errors"
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const kubeconfigContext = "kubeplay"

// kubeconfigFor turns the connection the provider uses into the kubeconfig
// clusterctl reads: clusterctl takes a file, not a rest.Config.
func kubeconfigFor(cfg *rest.Config) (*clientcmdapi.Config, error) {
	if cfg.Host == "" {
		return nil, errors.New("the connection has no server address")
	}
	if cfg.WrapTransport != nil || cfg.Transport != nil || cfg.Dial != nil || cfg.Proxy != nil {
		// A proxy_url ends up as a function here, which no kubeconfig can carry.
		return nil, errors.New("the connection goes through a proxy (proxy_url) or a custom transport, which kubeplay " +
			"cannot hand to clusterctl; use a credential that reaches the API server directly")
	}
	cluster := clientcmdapi.NewCluster()
	cluster.Server = cfg.Host
	if cfg.APIPath != "" && cfg.APIPath != "/api" {
		return nil, errors.New("the connection uses an API path other than /api")
	}
	cluster.CertificateAuthority = cfg.CAFile
	cluster.CertificateAuthorityData = cfg.CAData
	cluster.InsecureSkipTLSVerify = cfg.Insecure
	cluster.TLSServerName = cfg.ServerName

	user := clientcmdapi.NewAuthInfo()
	user.Token = cfg.BearerToken
	user.TokenFile = cfg.BearerTokenFile
	user.ClientCertificate = cfg.CertFile
	user.ClientCertificateData = cfg.CertData
	user.ClientKey = cfg.KeyFile
	user.ClientKeyData = cfg.KeyData
	user.Username = cfg.Username
	user.Password = cfg.Password
	user.Impersonate = cfg.Impersonate.UserName
	user.ImpersonateUID = cfg.Impersonate.UID
	user.ImpersonateGroups = cfg.Impersonate.Groups
	user.ImpersonateUserExtra = cfg.Impersonate.Extra
	user.Exec = cfg.ExecProvider
	user.AuthProvider = cfg.AuthProvider

	kc := clientcmdapi.NewConfig()
	kc.Clusters[kubeconfigContext] = cluster
	kc.AuthInfos[kubeconfigContext] = user
	ctx := clientcmdapi.NewContext()
	ctx.Cluster, ctx.AuthInfo = kubeconfigContext, kubeconfigContext
	kc.Contexts[kubeconfigContext] = ctx
	kc.CurrentContext = kubeconfigContext
	return kc, nil
}

// writeKubeconfig writes cfg's kubeconfig to path, readable by the owner
// only: it may hold a token or a client key.
func writeKubeconfig(path string, cfg *rest.Config) error {
	kc, err := kubeconfigFor(cfg)
	if err != nil {
		return err
	}
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("writing the kubeconfig clusterctl reads: %w; the credential's server, server name, token "+
			"or user may hold no control character", err)
	}
	return nil
}
