package codex

import (
	"strings"
	"testing"
)

func TestScanListenURL(t *testing.T) {
	in := "WARNING: x\ncodex app-server (WebSockets)\n  listening on: ws://127.0.0.1:41109\n  readyz: http://127.0.0.1:41109/readyz\n"
	var rest []string
	url, ok := ScanListenURL(strings.NewReader(in), func(l string) { rest = append(rest, l) })
	if !ok || url != "ws://127.0.0.1:41109" {
		t.Fatalf("got %q %v", url, ok)
	}
	if _, ok := ScanListenURL(strings.NewReader("listening on: ws://0.0.0.0:1\n"), nil); ok {
		t.Fatal("a non-loopback listen address was accepted")
	}
}
