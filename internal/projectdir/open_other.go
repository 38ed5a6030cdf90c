//go:build !unix

package projectdir

import "io/fs"

// openNoFollow: no O_NOFOLLOW here; the open file is still checked to be a
// regular file of the listed size.
const openNoFollow = 0

func isLoop(error) bool { return false }

// fileID: no device and inode here; the identity check is skipped.
func fileID(fs.FileInfo) (dev, ino uint64) { return 0, 0 }
