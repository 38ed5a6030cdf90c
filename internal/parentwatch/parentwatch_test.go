//go:build linux

package parentwatch

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestExitedWhenTheParentEnds runs this test binary as the grandchild of a
// shell that exits: the grandchild's Exited must fire once the shell is gone.
func TestExitedWhenTheParentEnds(t *testing.T) {
	if os.Getenv("PARENTWATCH_CHILD") == "1" {
		select {
		case <-Exited():
			os.Stdout.WriteString("parent gone\n")
		case <-time.After(20 * time.Second):
			os.Stdout.WriteString("still waiting\n")
		}
		return
	}
	out, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	// The shell starts the child, waits until it runs, then exits: the
	// child's parent is gone while the child lives.
	cmd := exec.Command("sh", "-c", `"$0" -test.run '^TestExitedWhenTheParentEnds$' >"$1" 2>&1 & sleep 1`, os.Args[0], out.Name())
	cmd.Env = append(os.Environ(), "PARENTWATCH_CHILD=1")
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(25 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(out.Name())
		switch {
		case strings.Contains(string(b), "parent gone"):
			t.Logf("the child saw its parent end %s after the start", time.Since(start).Round(time.Millisecond))
			return
		case strings.Contains(string(b), "still waiting"):
			t.Fatalf("the child did not see its parent end: %s", b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("the child wrote nothing")
}
