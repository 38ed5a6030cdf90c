package runner

import (
	"errors"
	"strings"
	"testing"
)

func TestKubeletUnreachable(t *testing.T) {
	for _, c := range []struct {
		err  string
		want bool
	}{
		// The API server's answers when it cannot proxy to the kubelet.
		{`Internal error occurred: error sending request: Post "https://10.250.0.1:10350/exec/ns/p/c?command=true": dial tcp 10.250.0.1:10350: connect: connection refused`, true},
		{"error dialing backend: dial tcp 10.250.0.2:10350: connect: connection refused", true},
		{"unable to upgrade connection: proxy error from 127.0.0.1:16443 while dialing 10.250.0.2:10350, code 502", true},
		// The API server itself does not answer: that says nothing about the node.
		{"dial tcp 127.0.0.1:16443: connect: connection refused", false},
		{"pods \"x\" is forbidden: User cannot create resource \"pods/exec\"", false},
	} {
		if got := kubeletUnreachable(errors.New(c.err)); got != c.want {
			t.Errorf("kubeletUnreachable(%q) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestNodeLostError(t *testing.T) {
	stream := errors.New("stream ended")
	err := &NodeLostError{Pod: "kp-run-1", Node: "node-two", Probe: errors.New("error dialing backend: refused\n"), Stream: stream}
	msg := err.Error()
	for _, want := range []string{"node node-two stopped answering", "pod kp-run-1", "(error dialing backend: refused)", "kubectl describe node node-two"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if !errors.Is(err, stream) {
		t.Error("NodeLostError does not unwrap to the stream's error")
	}
}
