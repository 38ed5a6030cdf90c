//go:build !unix

package projectdir

import "io/fs"

// openNoFollow: no O_NOFOLLOW here; the open file is still checked to be a
// regular file of the listed size.
const openNoFollow = 0

func isLoop(error) bool { return false }

// fileID: no device and inode here; the identity check is skipped.
func fileID(fs.FileInfo) (dev, ino uint64) { return 0, 0 }

// linkCount: Windows' FileInfo gives no link count (it needs an open
// handle), so hard links are not told apart here: they ship as content.
func linkCount(fs.FileInfo) uint64 { return 0 }
