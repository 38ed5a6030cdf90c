//go:build !linux

package parentwatch

func exited() <-chan struct{} { return nil }
