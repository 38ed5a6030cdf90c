// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

// Package inflight counts a process's operations that must finish their
// clean-up (pods to delete, claims to release, temporary files to remove)
// before the provider exits, even when Terraform has gone.
package inflight

import "sync"

// Gate counts operations in flight. The zero value is ready to use.
type Gate struct {
	mu      sync.Mutex
	n       int
	waiters []chan struct{}
}

// Enter counts one more operation; each Enter needs one Leave.
func (g *Gate) Enter() {
	g.mu.Lock()
	g.n++
	g.mu.Unlock()
}

// Leave counts one operation less, and wakes Idle's waiters at zero.
func (g *Gate) Leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n--; g.n == 0 {
		for _, w := range g.waiters {
			close(w)
		}
		g.waiters = nil
	}
}

// Idle returns a channel that is closed once no operation is in flight (at
// once when none is).
func (g *Gate) Idle() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := make(chan struct{})
	if g.n == 0 {
		close(c)
	} else {
		g.waiters = append(g.waiters, c)
	}
	return c
}
