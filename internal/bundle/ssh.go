package bundle

import (
	"bytes"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/crypto/ssh"
)

// secretDir holds a run's SSH and vault files inside the bundle; the script
// deletes it when the playbook ends, whatever became of it.
const secretDir = ".kubeplay"

// Paths inside secretDir.
const (
	sshDir      = secretDir + "/ssh"
	knownHosts  = sshDir + "/known_hosts"
	agentSocket = sshDir + "/agent.sock"
	vaultDir    = secretDir + "/vault"
)

// DefaultVaultID labels the vault password given without an id.
const DefaultVaultID = "default"

// SSH is how a run's playbook connects over SSH.
type SSH struct {
	// PrivateKeys are PEM private keys without passphrase. They reach the
	// pod as 0600 files that the script loads into an ssh-agent and deletes
	// before the playbook starts; the agent ends with the playbook.
	PrivateKeys []string
	// KnownHosts is known_hosts content that ssh, sftp and scp check host
	// keys against.
	KnownHosts string
	// NoHostKeyChecking turns host key checking off; the zero value checks.
	NoHostKeyChecking bool
}

// KeyError is a private key that ssh-agent could not load; its Reason
// never quotes the key.
type KeyError struct {
	Index  int
	Reason string
}

func (e *KeyError) Error() string {
	return fmt.Sprintf("SSH private key %d: %s", e.Index, e.Reason)
}

// ErrKeyPassphrase: the key is encrypted, and nothing could type its passphrase.
var ErrKeyPassphrase = errors.New("it is protected by a passphrase, which a run cannot type: give it unencrypted (it travels only inside the exec stream)")

// ValidateSSHKey checks that key is one unencrypted private key in a PEM
// form OpenSSH reads (OpenSSH, PKCS#1, PKCS#8 or SEC 1). The error describes
// the problem without quoting the key.
func ValidateSSHKey(key string) error {
	block, rest := pem.Decode([]byte(key))
	if block == nil {
		return errors.New("it is not a PEM block (-----BEGIN ... PRIVATE KEY-----)")
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return errors.New("it holds more than one PEM block or text after the key: give each key its own element")
	}
	_, err := ssh.ParseRawPrivateKey([]byte(key))
	var pm *ssh.PassphraseMissingError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &pm) || x509Encrypted(block):
		return ErrKeyPassphrase
	default:
		// x/crypto's errors name the format, never the key's bytes; keep ours generic anyway.
		return fmt.Errorf("it is not a private key OpenSSH can read (a %q block that does not parse)", block.Type)
	}
}

func x509Encrypted(b *pem.Block) bool {
	return strings.Contains(b.Headers["Proc-Type"], "ENCRYPTED") || b.Type == "ENCRYPTED PRIVATE KEY"
}

// ValidateKnownHosts checks known_hosts content line by line.
func ValidateKnownHosts(text string) error {
	for i, line := range strings.Split(text, "\n") {
		l := strings.TrimSpace(line)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if _, _, _, _, _, err := ssh.ParseKnownHosts([]byte(l)); err != nil {
			return fmt.Errorf("known_hosts line %d is not a known_hosts entry (hosts, key type, base64 key): %w", i+1, err)
		}
	}
	return nil
}

var vaultID = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// ValidateVaultID checks a vault id: it becomes a file name and the label of
// --vault-id, and must match the id in the vaulted data's header.
func ValidateVaultID(id string) error {
	if !vaultID.MatchString(id) {
		return fmt.Errorf("vault id %q must be 1 to 64 letters, digits, '_', '.' or '-'", id)
	}
	return nil
}

// ValidateVaultPassword checks a vault password without quoting it. Ansible
// strips surrounding whitespace from password files, so a password of
// spaces only is empty.
func ValidateVaultPassword(pw string) error {
	if strings.TrimSpace(pw) == "" {
		return errors.New("the vault password is empty (Ansible ignores surrounding whitespace)")
	}
	return nil
}

func (b *Bundle) validateSecrets() error {
	for i, k := range b.SSH.PrivateKeys {
		if err := ValidateSSHKey(k); err != nil {
			return &KeyError{Index: i, Reason: err.Error()}
		}
	}
	if err := ValidateKnownHosts(b.SSH.KnownHosts); err != nil {
		return err
	}
	for _, id := range slices.Sorted(maps.Keys(b.Vault)) {
		if err := ValidateVaultID(id); err != nil {
			return err
		}
		if err := ValidateVaultPassword(b.Vault[id]); err != nil {
			return fmt.Errorf("vault id %s: %w", id, err)
		}
	}
	return nil
}

// secretEntries are the bundle's SSH and vault files.
func (b *Bundle) secretEntries() []bundleFile {
	var out []bundleFile
	for i, k := range b.SSH.PrivateKeys {
		// ssh-add wants the final newline.
		out = append(out, bundleFile{fmt.Sprintf("%s/key-%d", sshDir, i), 0o600, []byte(strings.TrimRight(k, "\n") + "\n")})
	}
	if b.SSH.KnownHosts != "" {
		out = append(out, bundleFile{knownHosts, 0o644, []byte(b.SSH.KnownHosts)})
	}
	for _, id := range slices.Sorted(maps.Keys(b.Vault)) {
		out = append(out, bundleFile{vaultDir + "/" + id, 0o600, []byte(b.Vault[id])})
	}
	return out
}

// secretDirs are the directories secretEntries need, parents first.
func (b *Bundle) secretDirs() []string {
	var out []string
	if len(b.SSH.PrivateKeys) > 0 || b.SSH.KnownHosts != "" {
		out = append(out, secretDir, sshDir)
	}
	if len(b.Vault) > 0 {
		if len(out) == 0 {
			out = append(out, secretDir)
		}
		out = append(out, vaultDir)
	}
	return out
}

// vaultArgs are ansible-playbook's --vault-id arguments: labels and paths,
// never a password.
func (b *Bundle) vaultArgs() []string {
	var args []string
	for _, id := range slices.Sorted(maps.Keys(b.Vault)) {
		args = append(args, "--vault-id", id+"@"+b.up()+vaultDir+"/"+id)
	}
	return args
}

// sshSetup is the script's part before the playbook: the trap that deletes
// the secret files and ends the agent on any exit, the agent with the keys
// loaded (their files deleted at once), and ssh's host key settings.
func (b *Bundle) sshSetup() string {
	var sb strings.Builder
	if len(b.secretDirs()) > 0 {
		// An absolute path: a project's playbook runs from its own directory.
		sb.WriteString("kubeplay_secret_dir=\"$PWD/" + secretDir + "\"\n" +
			"kubeplay_secrets() { [ -z \"${SSH_AGENT_PID:-}\" ] || kill \"$SSH_AGENT_PID\" 2>/dev/null; rm -rf \"$kubeplay_secret_dir\"; }\n" +
			"trap kubeplay_secrets EXIT\ntrap 'exit 129' HUP\ntrap 'exit 130' INT\ntrap 'exit 143' TERM\n")
	}
	if n := len(b.SSH.PrivateKeys); n > 0 {
		fmt.Fprintf(&sb, "if command -v ssh-agent >/dev/null 2>&1 && command -v ssh-add >/dev/null 2>&1; then\n"+
			"  eval \"$(ssh-agent -s -a \"$PWD/%s\")\" >/dev/null\n"+
			"  i=0; while [ $i -lt %d ]; do\n"+
			"    SSH_ASKPASS_REQUIRE=never ssh-add -q ./%s/key-$i </dev/null 2>&1 || echo \"kubeplay: ssh-add could not load the SSH private key at index $i\"\n"+
			"    i=$((i+1))\n  done\n"+
			"else\n  echo 'kubeplay: the image has no ssh-agent and ssh-add (Debian: openssh-client): the SSH private keys are not loaded'\nfi\n"+
			"rm -f ./%s/key-*\n", agentSocket, n, sshDir, sshDir)
	}
	check, strict := "1", "yes"
	if b.SSH.NoHostKeyChecking {
		check, strict = "0", "no"
	}
	// The extra args, not ssh_common_args: a project's common args (ProxyJump
	// to a bastion) stay in force, and ssh keeps the first value of an option.
	opts := "-o StrictHostKeyChecking=" + strict
	if b.SSH.KnownHosts != "" {
		sb.WriteString("export KUBEPLAY_SSH_KNOWN_HOSTS=\"$PWD/" + knownHosts + "\"\n")
		opts += " -o UserKnownHostsFile=\\\"$KUBEPLAY_SSH_KNOWN_HOSTS\\\""
	}
	fmt.Fprintf(&sb, "export ANSIBLE_HOST_KEY_CHECKING=%s ANSIBLE_SSH_EXTRA_ARGS=\"%s\" ANSIBLE_SFTP_EXTRA_ARGS=\"%s\" ANSIBLE_SCP_EXTRA_ARGS=\"%s\"\n",
		check, opts, opts, opts)
	return sb.String()
}

// sshCleanup is the script's part after the playbook.
func (b *Bundle) sshCleanup() string {
	if len(b.secretDirs()) == 0 {
		return ""
	}
	return "kubeplay_secrets\nunset SSH_AGENT_PID\n"
}

// SecretStrings are the bundle's SSH keys (line by line, as a playbook could
// print one) and vault passwords, for redaction.
func (b *Bundle) SecretStrings() []string {
	var out []string
	for _, k := range b.SSH.PrivateKeys {
		out = append(out, strings.TrimSpace(k))
		for _, l := range strings.Split(k, "\n") {
			if l = strings.TrimSpace(l); len(l) >= 16 && !strings.HasPrefix(l, "-----") {
				out = append(out, l)
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(b.Vault)) {
		out = append(out, b.Vault[id], strings.TrimSpace(b.Vault[id]))
	}
	return out
}
