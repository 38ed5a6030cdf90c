package runner

import (
	"bufio"
	"fmt"
	"io"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
)

// lifeline returns the exec's stdin: the bundle, then nothing until it is
// closed. It stays open while the run lives, so that the pod sees its end
// when this process dies or loses the stream, and ends the run (see
// bundle.Command). size is the bundle's length. The bundle is streamed as
// it is written, so a project is read from disk, never held in memory; a
// write that fails part way (a project file changed) breaks the stream,
// and the unpack in the pod fails.
func lifeline(b bundle.Bundle) (io.ReadCloser, int64, error) {
	size, err := b.Size()
	if err != nil {
		return nil, 0, fmt.Errorf("writing the bundle: %w", err)
	}
	pr, pw := io.Pipe()
	go func() { // ends when pr is closed
		// Large writes make large exec frames: tar writes headers and
		// padding in 512-byte pieces.
		w := bufio.NewWriterSize(pw, 256<<10)
		err := b.Write(w)
		if err == nil {
			err = w.Flush()
		}
		if err != nil {
			_ = pw.CloseWithError(fmt.Errorf("writing the bundle: %w", err))
		}
	}()
	return &lifelineReader{PipeReader: pr, w: pw}, size, nil
}

// lifelineReader ends the stream with EOF when closed: client-go's stdin
// copy then ends quietly (closing the read side made it log "Copying stdin
// failed"), and a write still under way returns at once.
type lifelineReader struct {
	*io.PipeReader
	w *io.PipeWriter
}

func (l *lifelineReader) Close() error { return l.w.Close() }
