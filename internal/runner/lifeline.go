package runner

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
)

// lifeline returns the exec's stdin: the bundle, then nothing until it is
// closed. It stays open while the run lives, so that the pod sees its end
// when this process dies or loses the stream, and ends the run (see
// bundle.Command). size is the bundle's length. The bundle is streamed as
// it is written, so a project is read from disk, never held in memory; a
// write that fails part way (a project file changed) breaks the stream,
// and the unpack in the pod fails.
func lifeline(b bundle.Bundle, delivered func()) (*lifelineReader, int64, error) {
	size, err := b.Size()
	if err != nil {
		return nil, 0, fmt.Errorf("writing the bundle: %w", err)
	}
	pr, pw := io.Pipe()
	l := &lifelineReader{PipeReader: pr, w: pw, done: make(chan struct{}), size: size, delivered: delivered}
	go func() { // ends when pr is closed
		defer close(l.done)
		// Large writes make large exec frames: tar writes headers and
		// padding in 512-byte pieces.
		w := bufio.NewWriterSize(pw, 256<<10)
		err := b.Write(w)
		if err == nil {
			err = w.Flush()
		}
		if err != nil {
			l.err = fmt.Errorf("writing the bundle: %w", err)
			_ = pw.CloseWithError(l.err)
		}
	}()
	return l, size, nil
}

// lifelineReader ends the stream with EOF when closed: client-go's stdin
// copy then ends quietly (closing the read side made it log "Copying stdin
// failed"), and a write still under way returns at once.
type lifelineReader struct {
	*io.PipeReader
	w    *io.PipeWriter
	done chan struct{}
	err  error
	read atomic.Int64
	// delivered, if set, is called once the exec has read all size bytes.
	size      int64
	delivered func()
	once      sync.Once
}

func (l *lifelineReader) Read(p []byte) (int, error) {
	n, err := l.PipeReader.Read(p)
	if l.read.Add(int64(n)) >= l.size && n > 0 && l.delivered != nil {
		l.once.Do(l.delivered)
	}
	return n, err
}

// Started reports whether an exec has read any of the bundle: until then,
// nothing of the run can have started in the pod.
func (l *lifelineReader) Started() bool { return l.read.Load() > 0 }

func (l *lifelineReader) Close() error { return l.w.Close() }

// Err closes the stream and returns why the bundle could not be written
// in full (a project file changed, the project is not as planned); nil
// when it was, or when the stream was closed before its end.
func (l *lifelineReader) Err() error {
	_ = l.Close()
	<-l.done
	if errors.Is(l.err, io.ErrClosedPipe) {
		return nil
	}
	return l.err
}
