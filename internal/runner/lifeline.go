package runner

import (
	"bytes"
	"fmt"
	"io"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
)

// lifeline returns the exec's stdin: the bundle, then nothing until it is
// closed. It stays open while the run lives, so that the pod sees its end
// when this process dies or loses the stream, and ends the run (see
// bundle.Command). size is the bundle's length.
func lifeline(b bundle.Bundle) (io.ReadCloser, int64, error) {
	var buf bytes.Buffer
	if err := b.Write(&buf); err != nil {
		return nil, 0, fmt.Errorf("writing the bundle: %w", err)
	}
	pr, pw := io.Pipe()
	go func() { _, _ = pw.Write(buf.Bytes()) }() // ends when pr is closed
	return pr, int64(buf.Len()), nil
}
