package abi

import (
	"strings"
	"testing"
)

// wantErr fails unless err is non-nil, carries the stable code, and its
// message mentions every fragment.
func wantErr(t *testing.T, err error, code Code, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("error = nil, want %s", code)
	}
	if got := CodeOf(err); got != code {
		t.Errorf("CodeOf(%q) = %q, want %q", err, got, code)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error %q does not mention %q", err, f)
		}
	}
}

// maxErrLen bounds error messages built from hostile input: truncate keeps
// 80 bytes, which %q may expand fourfold, and a model id message quotes the
// id and the failing component.
const maxErrLen = 1024
