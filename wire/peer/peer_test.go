package peer

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

func TestOfReportsOwnCredentials(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := net.Dial("unix", p)
		if err == nil {
			defer c.Close()
			var b [1]byte
			c.Read(b[:])
		}
	}()
	c, err := ln.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cred, err := Of(c)
	if err != nil {
		t.Fatal(err)
	}
	if cred.UID != uint32(os.Getuid()) || cred.GID != uint32(os.Getgid()) || cred.PID != int32(os.Getpid()) {
		t.Errorf("Of = %v, want own uid/gid/pid %d/%d/%d", cred, os.Getuid(), os.Getgid(), os.Getpid())
	}
}
