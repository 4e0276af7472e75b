package t

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// swapLoop starts a process of the actor that exchanges the entries a and
// b (renameat2 RENAME_EXCHANGE: a real directory and a symlink beside it)
// over and over, holding each state for about hold, until the test ends:
// a user racing a privileged process that works on a path through a.
// It returns how to stop it early (and wait); stopping leaves a and b as
// they were at the start.
func swapLoop(t *testing.T, who actor, a, b string, hold time.Duration) (stop func()) {
	t.Helper()
	cmd := exec.Command(helperBin(t), "-test.run=^TestHelperSwapLoop$")
	cmd.Env = append(os.Environ(), "CTXT15_SWAP="+a+"\n"+b, "CTXT15_SWAP_HOLD="+strconv.Itoa(int(hold.Microseconds())))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if who.u != nil {
		cmd.SysProcAttr = who.u.Cred()
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := false
	stop = func() {
		if done {
			return
		}
		done = true
		stdin.Close() // the helper puts things back and exits at EOF
		ch := make(chan error, 1)
		go func() { ch <- cmd.Wait() }()
		select {
		case err := <-ch:
			if err != nil {
				t.Errorf("the swap helper failed (%v): the race did not run", err)
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-ch
			t.Errorf("the swap helper did not stop")
		}
	}
	t.Cleanup(stop)
	return stop
}

// TestHelperSwapLoop is not a test: swapLoop runs the test binary as
// another uid with CTXT15_SWAP set, and this swaps until stdin closes.
func TestHelperSwapLoop(t *testing.T) {
	spec := os.Getenv("CTXT15_SWAP")
	if spec == "" {
		t.Skip("helper process only")
	}
	ab := strings.SplitN(spec, "\n", 2)
	if len(ab) != 2 {
		os.Exit(2)
	}
	hold, _ := strconv.Atoi(os.Getenv("CTXT15_SWAP_HOLD"))
	eof := make(chan struct{})
	go func() {
		var b [1]byte
		os.Stdin.Read(b[:])
		close(eof)
	}()
	swapped := false
	for {
		select {
		case <-eof:
			if swapped {
				unix.Renameat2(unix.AT_FDCWD, ab[0], unix.AT_FDCWD, ab[1], unix.RENAME_EXCHANGE)
			}
			os.Exit(0)
		default:
		}
		if err := unix.Renameat2(unix.AT_FDCWD, ab[0], unix.AT_FDCWD, ab[1], unix.RENAME_EXCHANGE); err != nil {
			os.Stderr.WriteString("swap: " + err.Error() + "\n")
			os.Exit(1)
		}
		swapped = !swapped
		if hold > 0 {
			time.Sleep(time.Duration(hold) * time.Microsecond)
		}
	}
}
