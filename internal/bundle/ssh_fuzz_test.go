package bundle

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// FuzzSSHSecrets: the key, known_hosts and vault checks never panic and
// never quote a key's lines; a bundle that carries them writes them only as
// 0600 files, never into the script (which becomes an argv and a log line).
func FuzzSSHSecrets(f *testing.F) {
	f.Add("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----\n",
		"10.0.0.1 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIH8h\n", "ops", "vault-pass-123")
	f.Add("-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n\nAAAA\n-----END RSA PRIVATE KEY-----\n", "# only a comment\n", "default", "   ")
	f.Add("not a key", "bad line", "../x", "p")
	// The check's own words ("-----BEGIN ... PRIVATE KEY-----") are no quote
	// of a key that happens to hold them.
	fixed := ValidateSSHKey("x").Error()
	f.Fuzz(func(t *testing.T, key, knownHosts, vaultID, password string) {
		if err := ValidateSSHKey(key); err != nil {
			for _, line := range strings.Split(key, "\n") {
				l := strings.TrimSpace(line)
				if len(l) >= 16 && !strings.HasPrefix(l, "-----") && strings.Contains(err.Error(), l) && !strings.Contains(fixed, l) {
					t.Fatalf("the key check quotes a line of the key: %v", err)
				}
			}
		}
		_ = ValidateKnownHosts(knownHosts)
		_ = ValidateVaultID(vaultID)
		_ = ValidateVaultPassword(password)

		b := Bundle{
			Playbook: "- hosts: all\n", Marker: "\x1ekubeplay-fuzz ",
			SSH:   SSH{PrivateKeys: []string{key}, KnownHosts: knownHosts},
			Vault: map[string]string{vaultID: password},
		}
		var buf bytes.Buffer
		if err := b.Write(&buf); err != nil {
			return
		}
		// A value that the bundle holds anyway (say "kubeplay") proves nothing.
		plain := Bundle{Playbook: b.Playbook, Marker: b.Marker}
		var base bytes.Buffer
		_ = plain.Write(&base)
		checkKey := len(key) >= 8 && !bytes.Contains(base.Bytes(), []byte(key))
		checkPassword := len(password) >= 8 && !bytes.Contains(base.Bytes(), []byte(password))
		tr := tar.NewReader(&buf)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("the stream does not read back: %v", err)
			}
			content, _ := io.ReadAll(tr)
			inSecretDir := strings.HasPrefix(h.Name, secretDir+"/")
			if inSecretDir && h.Typeflag == tar.TypeReg && h.Mode&0o077 != 0 {
				t.Fatalf("secret file %s has mode %o, want no group or other bits", h.Name, h.Mode)
			}
			if !inSecretDir && checkKey && bytes.Contains(content, []byte(key)) {
				t.Fatalf("%s, outside %s/, holds the private key", h.Name, secretDir)
			}
			if !inSecretDir && checkPassword && bytes.Contains(content, []byte(password)) {
				t.Fatalf("%s, outside %s/, holds the vault password", h.Name, secretDir)
			}
		}
	})
}
