//go:build linux

package parentwatch

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// exited watches the parent through a pidfd, which becomes readable when
// that process ends: no polling.
func exited() <-chan struct{} {
	ppid := os.Getppid()
	if ppid <= 1 {
		return nil
	}
	fd, err := unix.PidfdOpen(ppid, 0)
	if err != nil {
		return nil
	}
	// The parent may have ended, and ppid been reused, between the two calls.
	if os.Getppid() != ppid {
		_ = unix.Close(fd)
		return nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			n, err := unix.Poll(fds, -1)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil || n > 0 {
				return
			}
		}
	}()
	return done
}
