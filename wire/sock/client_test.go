package sock

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
)

func TestDialErrors(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close() // the file stays, nobody listens
	tests := []struct {
		name string
		path string
		code abi.Code
	}{
		{"missing socket file", filepath.Join(dir, "missing.sock"), abi.ENOENT},
		{"nobody listening", stale, abi.ECONNREFUSED},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Dial(context.Background(), tt.path)
			if err == nil {
				c.Close()
				t.Fatal("Dial succeeded")
			}
			var ae *abi.Error
			if !errors.As(err, &ae) || ae.Code != tt.code {
				t.Fatalf("Dial = %v (%T), want *abi.Error %s", err, err, tt.code)
			}
		})
	}
}
