package runengine

import "testing"

func TestGateIdle(t *testing.T) {
	g := &gate{}
	select {
	case <-g.idle():
	default:
		t.Fatal("no run: not idle")
	}
	g.enter()
	g.enter()
	w := g.idle()
	g.leave()
	select {
	case <-w:
		t.Fatal("idle with a run left")
	default:
	}
	g.leave()
	select {
	case <-w:
	default:
		t.Fatal("not idle once the last run left")
	}
}
