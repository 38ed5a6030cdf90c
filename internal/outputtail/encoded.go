package outputtail

import (
	"encoding/base64"
	"encoding/hex"
)

// base64Cores returns the base64 text that encodes secret wherever it sits
// in a longer base64 stream: for each of the three alignments of its first
// byte, and for the standard and URL alphabets, the characters whose six
// bits all come from the secret. The characters at either end, which mix
// in the bytes around it, are left out; they reveal at most a few bits of
// its first and last bytes. The same text matches padded and unpadded
// streams. Cores shorter than MinSecret are left out.
func base64Cores(secret []byte) [][]byte {
	var out [][]byte
	for align := range 3 {
		buf := make([]byte, align+len(secret))
		copy(buf[align:], secret)
		start, end := (8*align+5)/6, 8*(align+len(secret))/6
		for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
			core := []byte(enc.EncodeToString(buf)[start:end])
			if len(core) >= MinSecret {
				out = append(out, core)
			}
		}
	}
	return out
}

// urlMatch returns the length of the URL-encoded form of secret at the
// start of b, or -1: each byte of the secret as itself, as "%XX" (hex in
// either case) or, for a space, as "+". That covers every encoder's
// choice of which bytes to escape (query, path, or all of them).
func urlMatch(b, secret []byte) int {
	k := 0
	for j, c := range secret {
		if k >= len(b) {
			return -1
		}
		if b[k] == '%' && k+2 < len(b) {
			var v [1]byte
			if _, err := hex.Decode(v[:], b[k+1:k+3]); err == nil && v[0] == c {
				if c != '%' {
					k += 3
					continue
				}
				// "%25" or a literal "%": try the escape first, then the byte.
				if n := urlMatch(b[k+3:], secret[j+1:]); n >= 0 {
					return k + 3 + n
				}
			}
		}
		switch {
		case b[k] == c, c == ' ' && b[k] == '+':
			k++
		default:
			return -1
		}
	}
	return k
}
