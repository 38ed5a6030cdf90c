package acctest

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// VaultEncrypt encrypts plaintext as ansible-vault does (format 1.1, or 1.2
// with a vault id): PBKDF2-SHA256 with 10000 rounds over a random 32-byte
// salt gives an AES-256 key, an HMAC-SHA256 key and the CTR counter; the
// PKCS#7-padded plaintext is encrypted with AES-CTR and the ciphertext
// signed; salt, HMAC and ciphertext are hex-encoded on three lines, that is
// hex-encoded again in lines of 80 behind the header.
func VaultEncrypt(t testing.TB, plaintext, password, id string) string {
	t.Helper()
	salt := make([]byte, 32)
	if _, err := rand.Read(salt); err != nil {
		t.Fatal(err)
	}
	km, err := pbkdf2.Key(sha256.New, password, salt, 10000, 80)
	if err != nil {
		t.Fatal(err)
	}
	block, err := aes.NewCipher(km[:32])
	if err != nil {
		t.Fatal(err)
	}
	pad := aes.BlockSize - len(plaintext)%aes.BlockSize
	data := append([]byte(plaintext), []byte(strings.Repeat(string(rune(pad)), pad))...)
	ct := make([]byte, len(data))
	cipher.NewCTR(block, km[64:80]).XORKeyStream(ct, data)
	mac := hmac.New(sha256.New, km[32:64])
	mac.Write(ct)
	body := hex.EncodeToString([]byte(hex.EncodeToString(salt) + "\n" + hex.EncodeToString(mac.Sum(nil)) + "\n" + hex.EncodeToString(ct)))
	header := "$ANSIBLE_VAULT;1.1;AES256"
	if id != "" {
		header = "$ANSIBLE_VAULT;1.2;AES256;" + id
	}
	var sb strings.Builder
	sb.WriteString(header + "\n")
	for len(body) > 80 {
		sb.WriteString(body[:80] + "\n")
		body = body[80:]
	}
	sb.WriteString(body + "\n")
	return sb.String()
}
