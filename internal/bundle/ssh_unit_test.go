package bundle

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

func testKey(t *testing.T, passphrase string) (string, ssh.PublicKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var block *pem.Block
	if passphrase == "" {
		block, err = ssh.MarshalPrivateKey(priv, "test")
	} else {
		block, err = ssh.MarshalPrivateKeyWithPassphrase(priv, "test", []byte(passphrase))
	}
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(block)), sp
}

func TestValidateSSHKey(t *testing.T) {
	good, _ := testKey(t, "")
	enc, _ := testKey(t, "pw")
	if err := ValidateSSHKey(good); err != nil {
		t.Errorf("a good key: %v", err)
	}
	for name, c := range map[string]struct{ key, want string }{
		"encrypted": {enc, "passphrase"},
		"not PEM":   {"ssh-ed25519 AAAA", "not a PEM block"},
		"two keys":  {good + good, "more than one PEM block"},
		"garbage":   {"-----BEGIN OPENSSH PRIVATE KEY-----\nQUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=\n-----END OPENSSH PRIVATE KEY-----\n", "not a private key"},
	} {
		err := ValidateSSHKey(c.key)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", name, err, c.want)
			continue
		}
		for _, l := range strings.Split(c.key, "\n") {
			if len(l) > 20 && strings.Contains(err.Error(), l) {
				t.Errorf("%s: the error quotes the key: %v", name, err)
			}
		}
	}
	b := Bundle{Command: []string{"true"}, Marker: testMarker, SSH: SSH{PrivateKeys: []string{good, enc}}}
	var ke *KeyError
	if err := b.validate(); !errors.As(err, &ke) || ke.Index != 1 || !errors.Is(ValidateSSHKey(enc), ErrKeyPassphrase) {
		t.Errorf("bundle with an encrypted second key: %v", err)
	}
}

func TestValidateKnownHostsAndVault(t *testing.T) {
	_, pub := testKey(t, "")
	line := "10.0.0.1 " + string(ssh.MarshalAuthorizedKey(pub))
	if err := ValidateKnownHosts("# comment\n\n" + line + "@cert-authority *.example " + string(ssh.MarshalAuthorizedKey(pub))); err != nil {
		t.Errorf("good known_hosts: %v", err)
	}
	if err := ValidateKnownHosts(line + "host ssh-ed25519 !!!\n"); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("bad known_hosts line 2: %v", err)
	}
	for _, id := range []string{"", "a@b", "x;y", strings.Repeat("a", 65), "a b"} {
		if ValidateVaultID(id) == nil {
			t.Errorf("vault id %q accepted", id)
		}
	}
	for _, id := range []string{"default", "prod-1", "ops_team.v2"} {
		if err := ValidateVaultID(id); err != nil {
			t.Errorf("vault id %q: %v", id, err)
		}
	}
	if err := ValidateVaultPassword(" \n"); err == nil {
		t.Error("a blank vault password was accepted")
	}
	b := Bundle{Command: []string{"true"}, Marker: testMarker, Vault: map[string]string{"ops": "  "}}
	if err := b.validate(); err == nil || strings.Contains(err.Error(), "  ") && !strings.Contains(err.Error(), "ops") {
		t.Errorf("bundle with a blank vault password: %v", err)
	}
}

// TestScriptSSHAndVault runs the script with a fake ansible-playbook that
// records what it finds: the keys are in an agent and no longer on disk, the
// known hosts and vault files are there, the arguments carry no password;
// afterwards the secret files and the agent are gone.
func TestScriptSSHAndVault(t *testing.T) {
	if _, err := exec.LookPath("ssh-agent"); err != nil {
		t.Skip("no ssh-agent on this host")
	}
	bin := t.TempDir()
	fake := `#!/bin/sh
for a in "$@"; do printf '%s\n' "$a"; done > args.out
ssh-add -l > agent.out 2>&1
ls .kubeplay/ssh > ssh.out
cat .kubeplay/vault/default .kubeplay/vault/ops > vault.out
stat -c '%a %n' .kubeplay .kubeplay/ssh .kubeplay/vault .kubeplay/vault/ops >> vault.out
printf '%s\n' "$ANSIBLE_HOST_KEY_CHECKING" "$ANSIBLE_SSH_EXTRA_ARGS" "$ANSIBLE_SFTP_EXTRA_ARGS" "$KUBEPLAY_SSH_KNOWN_HOSTS" "$SSH_AGENT_PID" > env.out
exit 4
`
	if err := os.WriteFile(filepath.Join(bin, "ansible-playbook"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	k1, p1 := testKey(t, "")
	k2, p2 := testKey(t, "")
	b := Bundle{
		Playbook: "- hosts: all\n", Marker: testMarker,
		SSH:   SSH{PrivateKeys: []string{k1, strings.TrimRight(k2, "\n")}, KnownHosts: "10.0.0.1 " + string(ssh.MarshalAuthorizedKey(p1))},
		Vault: map[string]string{DefaultVaultID: "vault-pw-1", "ops": "vault-pw-2"},
	}
	dir := extract(t, &b)
	_, stderr, code := runScript(t, dir, bin)
	if code != 4 || report(t, stderr).ExitCode != 4 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	read := func(name string) string {
		c, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(c)
	}
	agent := read("agent.out")
	for _, p := range []ssh.PublicKey{p1, p2} {
		if !strings.Contains(agent, ssh.FingerprintSHA256(p)) {
			t.Errorf("the agent lacks key %s:\n%s", ssh.FingerprintSHA256(p), agent)
		}
	}
	if got := read("ssh.out"); got != "agent.sock\nknown_hosts\n" {
		t.Errorf("files in .kubeplay/ssh while the playbook ran: %q (the keys must be gone)", got)
	}
	if got, want := read("vault.out"), "vault-pw-1vault-pw-2700 .kubeplay\n700 .kubeplay/ssh\n700 .kubeplay/vault\n600 .kubeplay/vault/ops\n"; got != want {
		t.Errorf("vault files %q, want %q", got, want)
	}
	args := read("args.out")
	if strings.Contains(args, "vault-pw") || !strings.Contains(args, "--vault-id\ndefault@.kubeplay/vault/default\n--vault-id\nops@.kubeplay/vault/ops\n") {
		t.Errorf("ansible-playbook args:\n%s", args)
	}
	env := strings.Split(read("env.out"), "\n")
	kh := dir + "/.kubeplay/ssh/known_hosts"
	if env[0] != "1" || env[1] != `-o StrictHostKeyChecking=yes -o UserKnownHostsFile="`+kh+`"` || env[2] != env[1] || env[3] != kh {
		t.Errorf("ssh environment %q", env)
	}
	if _, err := os.Stat(filepath.Join(dir, secretDir)); !os.IsNotExist(err) {
		t.Errorf("%s is still there after the run: %v", secretDir, err)
	}
	pid, err := strconv.Atoi(env[4])
	if err != nil {
		t.Fatalf("agent pid %q", env[4])
	}
	// The script signals the agent and goes on: give it a moment to exit.
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Errorf("ssh-agent %d still runs after the playbook", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestScriptHostKeyCheckingOff(t *testing.T) {
	b := Bundle{Playbook: "- hosts: all\n", Marker: testMarker, SSH: SSH{NoHostKeyChecking: true}}
	s := b.script("inventory", noDigest)
	if !strings.Contains(s, `ANSIBLE_HOST_KEY_CHECKING=0 ANSIBLE_SSH_EXTRA_ARGS="-o StrictHostKeyChecking=no"`) {
		t.Errorf("script without host key checking:\n%s", s)
	}
	if strings.Contains(s, "kubeplay_secrets") || strings.Contains(s, "ssh-agent") {
		t.Errorf("a run without keys or vault starts an agent or a trap:\n%s", s)
	}
	b.SSH.NoHostKeyChecking = false
	if s := b.script("inventory", noDigest); !strings.Contains(s, "ANSIBLE_HOST_KEY_CHECKING=1 ") {
		t.Errorf("host key checking is not on by default:\n%s", s)
	}
}

func TestSecretStrings(t *testing.T) {
	k, _ := testKey(t, "")
	b := Bundle{SSH: SSH{PrivateKeys: []string{k}}, Vault: map[string]string{"a": " pw-with-space "}}
	got := b.SecretStrings()
	lines := strings.Split(strings.TrimSpace(k), "\n")
	for _, want := range append(lines[1:len(lines)-1], strings.TrimSpace(k), " pw-with-space ", "pw-with-space") {
		if len(want) >= 16 || strings.Contains(want, "pw") || strings.Contains(want, "\n") {
			if !slices.Contains(got, want) {
				t.Errorf("SecretStrings lacks %q", want)
			}
		}
	}
}
