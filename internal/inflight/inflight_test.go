// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package inflight

import "testing"

func TestGate(t *testing.T) {
	var g Gate
	select {
	case <-g.Idle():
	default:
		t.Fatal("an empty gate is not idle")
	}
	g.Enter()
	g.Enter()
	idle := g.Idle()
	g.Leave()
	select {
	case <-idle:
		t.Fatal("idle with one operation in flight")
	default:
	}
	g.Leave()
	select {
	case <-idle:
	default:
		t.Fatal("not idle after the last Leave")
	}
}
