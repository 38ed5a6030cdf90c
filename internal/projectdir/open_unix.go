//go:build unix

package projectdir

import (
	"errors"
	"io/fs"
	"syscall"
)

// openNoFollow opens the last element itself, never a link's target, and
// does not wait for a writer when it is a FIFO.
const openNoFollow = syscall.O_NOFOLLOW | syscall.O_NONBLOCK

// isLoop reports the error O_NOFOLLOW gives on a link.
func isLoop(err error) bool { return errors.Is(err, syscall.ELOOP) }

// fileID is a file's device and inode.
func fileID(info fs.FileInfo) (dev, ino uint64) {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), uint64(st.Ino) //nolint:unconvert // int32 on some systems
	}
	return 0, 0
}

// linkCount is a file's number of hard links.
func linkCount(info fs.FileInfo) uint64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink) //nolint:unconvert // uint16 or uint32 on some systems
	}
	return 0
}
