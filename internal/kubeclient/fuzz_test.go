// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package kubeclient

import (
	"maps"
	"slices"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// FuzzSettingsRESTConfig: the provider's connection attributes from HCL,
// and the KUBE_* variables that stand in for them, become a configuration
// without panicking; with no kubeconfig file named it reads no file on this
// host and runs a program only when the configuration has an exec block.
func FuzzSettingsRESTConfig(f *testing.F) {
	f.Add("https://10.0.0.1:6443", "tok", "", "", "", "", "", "", "", false, "", false)
	f.Add("https://h", "", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", "c", "k", "api", "http://proxy:3128", "ctx", "true", true, "aws", true)
	f.Add("", "", "", "", "", "", "", "", "", false, "", false)
	f.Add("http://[::1]:80/p", "t\x00k", "", "", "", "", "socks5://x", "", "maybe", false, "/bin/sh", true)
	f.Add("h:1", "", "", "", "", "", "", "", "", true, "", true)
	f.Fuzz(func(t *testing.T, host, token, ca, cert, key, serverName, proxyURL, context, envInsecure string, insecure bool, command string, exec bool) {
		s := Settings{Host: host, Token: token, ClusterCACertificate: ca, ClientCertificate: cert, ClientKey: key,
			TLSServerName: serverName, ProxyURL: proxyURL, ConfigContext: context}
		if insecure {
			s.Insecure = &insecure
		}
		if exec {
			s.Exec = &ExecSettings{APIVersion: "client.authentication.k8s.io/v1", Command: command, Env: map[string]string{"A": token}}
		}
		// The environment may fill what HCL left unset, but names no file.
		env := map[string]string{EnvVars.Insecure: envInsecure, EnvVars.Host: host, EnvVars.Token: token}
		getenv := func(k string) string { return env[k] }
		if err := s.ApplyEnv(getenv); err != nil {
			return
		}
		if len(s.ConfigPaths) > 0 || !s.HasExplicit() {
			t.Skip() // a kubeconfig file or the in-cluster account: files the operator chose
		}
		cfg, _, err := s.RESTConfig(getenv)
		if err != nil {
			return
		}
		if exec && cfg.ExecProvider != nil && cfg.ExecProvider.Command == command {
			cfg.ExecProvider = nil // the configuration's own plugin
		}
		if reach := HostReach(cfg); reach != "" {
			t.Fatalf("settings %+v: the configuration uses %s", s, reach)
		}
	})
}

// FuzzCheckUntrusted: a kubeconfig read from cluster data either is
// refused or, whichever of its contexts is chosen, becomes a configuration
// that runs no program and reads no file on this host; exec plugins pass
// only when allowed. Nothing panics.
func FuzzCheckUntrusted(f *testing.F) {
	for _, u := range []string{
		"{token: abc}",
		"{exec: {apiVersion: client.authentication.k8s.io/v1, command: id}}",
		"{exec: {apiVersion: client.authentication.k8s.io/v1, command: ''}, tokenFile: /x}",
		"{auth-provider: {name: gcp}}",
		"{tokenFile: /etc/shadow}",
		"{client-certificate: /c, client-key-data: a2V5}",
		"{client-certificate-data: Y2VydA==, client-key: ~/.ssh/id}",
		"null",
	} {
		f.Add([]byte("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://h:6443'}\n"+
			"- name: d\n  cluster: {server: 'https://d', certificate-authority: /etc/ca}\n"+
			"users:\n- name: u\n  user: "+u+"\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n"+
			"- name: y\n  context: {cluster: d, user: u}\ncurrent-context: x\n"), false)
	}
	f.Add([]byte("users: ["), true)
	f.Fuzz(func(t *testing.T, kubeconfig []byte, allowExec bool) {
		raw, err := clientcmd.Load(kubeconfig)
		if err != nil || CheckUntrusted(raw, allowExec) != nil {
			return
		}
		for _, name := range append([]string{""}, slices.Sorted(maps.Keys(raw.Contexts))...) {
			cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, name, &clientcmd.ConfigOverrides{CurrentContext: name}, nil).ClientConfig()
			if err != nil {
				continue
			}
			if allowExec {
				cfg.ExecProvider = nil
			}
			if reach := HostReach(cfg); reach != "" {
				t.Fatalf("context %q: the configuration uses %s\n%s", name, reach, kubeconfig)
			}
		}
	})
}
