package runengine

import "sync"

// active counts the runs of this process inside Engine.Run, so that a
// provider whose Terraform died can wait for their clean-up before it exits.
var active = &gate{}

type gate struct {
	mu      sync.Mutex
	n       int
	waiters []chan struct{}
}

func (g *gate) enter() {
	g.mu.Lock()
	g.n++
	g.mu.Unlock()
}

func (g *gate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n--
	if g.n == 0 {
		for _, w := range g.waiters {
			close(w)
		}
		g.waiters = nil
	}
}

func (g *gate) idle() <-chan struct{} {
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

// Idle returns a channel that is closed once no run of this process is in
// Engine.Run (at once when none is).
func Idle() <-chan struct{} { return active.idle() }
