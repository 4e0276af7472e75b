package abi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestExitConstants(t *testing.T) {
	got := []int{ExitOK, ExitError, ExitUsage, ExitAccess, ExitUnavailable, ExitInternal}
	want := []int{0, 1, 2, 13, 69, 70}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("exit constant #%d = %d, want %d", i, got[i], want[i])
		}
	}
}

func TestCodeExit(t *testing.T) {
	tests := []struct {
		code Code
		exit int
	}{
		{"", 0},
		{EINVAL, 2},
		{EMSGSIZE, 2},
		{EACCES, 13},
		{EROFS, 13},
		{EHOSTDOWN, 69},
		{ECONNREFUSED, 69},
		{EBUSY, 69},
		{ETIMEDOUT, 69},
		{ENOKEY, 69},
		{ENOTSUP, 69},
		{ENOSPC, 69},
		{ELOOP, 2},
		{EPERM, 13},
		{EIO, 70},
		{EPROTO, 70},
		{ENOENT, 1},
		{EEXIST, 1},
		{ECANCELED, 1},
		{EREMOTEIO, 1},
		{"EWHATEVER", 1}, // unknown codes are a generic error
		{"einval", 1},    // codes are case-sensitive
	}
	covered := map[Code]bool{}
	for _, tt := range tests {
		covered[tt.code] = true
		if got := tt.code.Exit(); got != tt.exit {
			t.Errorf("Code(%q).Exit() = %d, want %d", tt.code, got, tt.exit)
		}
	}
	for _, c := range Codes {
		if !covered[c] {
			t.Errorf("code %s has no row in the exit table test", c)
		}
	}
}

func TestCodesList(t *testing.T) {
	want := []Code{"EACCES", "EINVAL", "ENOENT", "EMSGSIZE", "EHOSTDOWN", "ECONNREFUSED",
		"EROFS", "EEXIST", "EBUSY", "ETIMEDOUT", "ECANCELED", "ENOKEY", "ENOTSUP", "EPROTO", "EIO", "ELOOP", "ENOSPC", "EPERM", "EREMOTEIO"}
	if len(Codes) != len(want) {
		t.Fatalf("len(Codes) = %d, want %d", len(Codes), len(want))
	}
	seen := map[Code]bool{}
	for i, c := range Codes {
		if c != want[i] {
			t.Errorf("Codes[%d] = %q, want %q", i, c, want[i])
		}
		if seen[c] {
			t.Errorf("Codes repeats %q", c)
		}
		seen[c] = true
		if !c.Known() {
			t.Errorf("%q.Known() = false", c)
		}
	}
	for _, c := range []Code{"", "EWHATEVER", "einval", "EINVAL "} {
		if c.Known() {
			t.Errorf("%q.Known() = true, want false", c)
		}
	}
}

func TestErrorMethods(t *testing.T) {
	cause := errors.New("cause")
	tests := []struct {
		name string
		err  *Error
		msg  string
		wrap error
	}{
		{"message", &Error{Code: EINVAL, Message: "bad input"}, "bad input", nil},
		{"empty message falls back to code", &Error{Code: EBUSY}, "EBUSY", nil},
		{"cause", &Error{Code: EIO, Message: "x", Err: cause}, "x", cause},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.msg {
				t.Errorf("Error() = %q, want %q", got, tt.msg)
			}
			if got := tt.err.Unwrap(); got != tt.wrap {
				t.Errorf("Unwrap() = %v, want %v", got, tt.wrap)
			}
		})
	}
}

func TestErrorf(t *testing.T) {
	t.Run("formats message and code", func(t *testing.T) {
		err := Errorf(EINVAL, "line %d: bad %q", 3, "x")
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("Errorf returned %T, want *Error", err)
		}
		if e.Code != EINVAL || e.Message != `line 3: bad "x"` || e.Err != nil {
			t.Errorf("got %+v", *e)
		}
		if err.Error() != `line 3: bad "x"` {
			t.Errorf("Error() = %q", err)
		}
	})
	t.Run("%w keeps errors.Is to the cause", func(t *testing.T) {
		err := Errorf(ENOENT, "open model: %w", fs.ErrNotExist)
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("errors.Is(err, fs.ErrNotExist) = false")
		}
		if err.Error() != "open model: file does not exist" {
			t.Errorf("Error() = %q", err)
		}
		if CodeOf(err) != ENOENT {
			t.Errorf("CodeOf = %q", CodeOf(err))
		}
	})
	t.Run("%w keeps errors.As to a typed cause", func(t *testing.T) {
		pe := &fs.PathError{Op: "open", Path: "/x", Err: syscall.EACCES}
		err := Errorf(EACCES, "read: %w", pe)
		var got *fs.PathError
		if !errors.As(err, &got) || got != pe {
			t.Errorf("errors.As did not reach the *fs.PathError")
		}
		if !errors.Is(err, syscall.EACCES) {
			t.Errorf("errors.Is(err, EACCES) = false")
		}
	})
	t.Run("%w of an *Error: outer code wins, inner reachable", func(t *testing.T) {
		inner := Errorf(ENOENT, "no such model")
		err := Errorf(EHOSTDOWN, "provider: %w", inner)
		if CodeOf(err) != EHOSTDOWN {
			t.Errorf("CodeOf = %q, want EHOSTDOWN", CodeOf(err))
		}
		if !errors.Is(err, inner) {
			t.Errorf("errors.Is(err, inner) = false")
		}
	})
	t.Run("%v does not wrap", func(t *testing.T) {
		err := Errorf(EIO, "x: %v", io.EOF)
		if errors.Is(err, io.EOF) {
			t.Errorf("errors.Is(err, io.EOF) = true for %%v")
		}
		if errors.Unwrap(err) != nil {
			t.Errorf("Unwrap = %v, want nil", errors.Unwrap(err))
		}
	})
	t.Run("two %w keep both causes", func(t *testing.T) {
		a, b := errors.New("a"), errors.New("b")
		err := Errorf(EIO, "%w; %w", a, b)
		if err.Error() != "a; b" {
			t.Errorf("Error() = %q", err)
		}
		if !errors.Is(err, a) || !errors.Is(err, b) {
			// fmt.Errorf with two %w returns an error with Unwrap() []error;
			// errors.Unwrap on it is nil, so Errorf drops both causes.
			t.Fatalf("Errorf(EIO, %q, a, b): errors.Is(err, a)=%v, errors.Is(err, b)=%v, want true, true",
				"%w; %w", errors.Is(err, a), errors.Is(err, b))
		}
	})
}

type codedErr struct{}

func (codedErr) Error() string { return "custom" }

func TestCodeOf(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithTimeout(context.Background(), 0)
	defer cancel2()
	<-expired.Done()

	tests := []struct {
		name string
		err  error
		want Code
	}{
		{"nil", nil, ""},
		{"*Error", Errorf(EACCES, "permission denied"), EACCES},
		{"*Error literal", &Error{Code: ENOKEY}, ENOKEY},
		{"fmt.Errorf %w of *Error", fmt.Errorf("open: %w", Errorf(EROFS, "read-only")), EROFS},
		{"double wrap of *Error", fmt.Errorf("a: %w", fmt.Errorf("b: %w", Errorf(EBUSY, "busy"))), EBUSY},
		{"*Error wrapping *Error: outer wins", Errorf(EHOSTDOWN, "x: %w", Errorf(ENOENT, "y")), EHOSTDOWN},
		{"*Error wins over wrapped context.Canceled", Errorf(EIO, "x: %w", context.Canceled), EIO},
		{"*Error wins over wrapped errno", Errorf(EPROTO, "x: %w", syscall.ENOENT), EPROTO},
		{"errors.Join finds *Error", errors.Join(errors.New("plain"), Errorf(ETIMEDOUT, "late")), ETIMEDOUT},
		{"multi-%w fmt.Errorf finds *Error", fmt.Errorf("%w %w", io.EOF, Errorf(EMSGSIZE, "big")), EMSGSIZE},
		{"context.Canceled", context.Canceled, ECANCELED},
		{"wrapped context.Canceled", fmt.Errorf("run: %w", context.Canceled), ECANCELED},
		{"ctx.Err after cancel", cancelled.Err(), ECANCELED},
		{"context.DeadlineExceeded", context.DeadlineExceeded, ETIMEDOUT},
		{"ctx.Err after timeout", expired.Err(), ETIMEDOUT},
		{"os.ErrDeadlineExceeded", os.ErrDeadlineExceeded, ETIMEDOUT},
		{"wrapped os.ErrDeadlineExceeded", &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, ETIMEDOUT},
		{"errno ENOENT", syscall.ENOENT, ENOENT},
		{"errno EACCES", syscall.EACCES, EACCES},
		{"errno EPERM", syscall.EPERM, EACCES},
		{"errno EEXIST", syscall.EEXIST, EEXIST},
		{"errno ETIMEDOUT", syscall.ETIMEDOUT, ETIMEDOUT},
		{"errno EMSGSIZE", syscall.EMSGSIZE, EMSGSIZE},
		{"PathError errno", &fs.PathError{Op: "open", Path: "/x", Err: syscall.EROFS}, EROFS},
		{"net OpError ECONNREFUSED", &net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, ECONNREFUSED},
		{"unmapped errno", syscall.ENOTEMPTY, EIO},
		{"os.ErrNotExist", os.ErrNotExist, ENOENT},
		{"fs.ErrNotExist wrapped", fmt.Errorf("x: %w", fs.ErrNotExist), ENOENT},
		{"os.ErrPermission", os.ErrPermission, EACCES},
		{"os.ErrExist", os.ErrExist, EEXIST},
		{"errors.New", errors.New("boom"), EIO},
		{"io.EOF", io.EOF, EIO},
		{"custom type", codedErr{}, EIO},
		{"wrapped plain", fmt.Errorf("x: %w", errors.New("boom")), EIO},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CodeOf(tt.err); got != tt.want {
				t.Errorf("CodeOf(%v) = %q, want %q", tt.err, got, tt.want)
			}
			if got, want := ExitCodeOf(tt.err), tt.want.Exit(); got != want {
				t.Errorf("ExitCodeOf(%v) = %d, want %d", tt.err, got, want)
			}
		})
	}
}

// Real system calls, not synthetic errors.
func TestCodeOfRealFilesystem(t *testing.T) {
	dir := t.TempDir()
	_, err := os.Open(filepath.Join(dir, "missing"))
	if got := CodeOf(err); got != ENOENT {
		t.Errorf("open missing: CodeOf(%v) = %q, want ENOENT", err, got)
	}
	err = os.Mkdir(dir, 0o755)
	if got := CodeOf(err); got != EEXIST {
		t.Errorf("mkdir existing: CodeOf(%v) = %q, want EEXIST", err, got)
	}
	_, err = os.ReadFile(filepath.Join(dir, "missing", "x"))
	if got := CodeOf(err); got != ENOENT {
		t.Errorf("read under missing dir: CodeOf(%v) = %q, want ENOENT", err, got)
	}
	f := filepath.Join(dir, "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = os.Open(filepath.Join(f, "x")) // ENOTDIR
	if got := CodeOf(err); got != ENOENT {
		t.Errorf("open under a file: CodeOf(%v) = %q, want ENOENT", err, got)
	}
}

func TestFromErrno(t *testing.T) {
	tests := []struct {
		errno syscall.Errno
		want  Code
	}{
		{syscall.EACCES, EACCES},
		{syscall.EPERM, EACCES},
		{syscall.ENOENT, ENOENT},
		{syscall.ENOTDIR, ENOENT},
		{syscall.EINVAL, EINVAL},
		{syscall.ENAMETOOLONG, EINVAL},
		{syscall.E2BIG, EINVAL},
		{syscall.EMSGSIZE, EMSGSIZE},
		{syscall.EHOSTDOWN, EHOSTDOWN},
		{syscall.EHOSTUNREACH, EHOSTDOWN},
		{syscall.ENETUNREACH, EHOSTDOWN},
		{syscall.ECONNREFUSED, ECONNREFUSED},
		{syscall.EROFS, EROFS},
		{syscall.EEXIST, EEXIST},
		{syscall.EBUSY, EBUSY},
		{syscall.EAGAIN, EBUSY},
		{syscall.ETIMEDOUT, ETIMEDOUT},
		{syscall.ECANCELED, ECANCELED},
		{syscall.ENOKEY, ENOKEY},
		{syscall.ENOTSUP, ENOTSUP},
		{syscall.EOPNOTSUPP, ENOTSUP},
		{syscall.ENOSYS, ENOTSUP},
		{syscall.EPROTO, EPROTO},
		{syscall.ELOOP, ELOOP},
		{syscall.ENOSPC, ENOSPC},
		{syscall.EDQUOT, ENOSPC},
		{syscall.EFBIG, ENOSPC},
		{syscall.EIO, EIO},
		{syscall.ENOTEMPTY, EIO},
		{syscall.EBADF, EIO},
		{0, EIO},
	}
	for _, tt := range tests {
		if got := FromErrno(tt.errno); got != tt.want {
			t.Errorf("FromErrno(%d %v) = %q, want %q", int(tt.errno), tt.errno, got, tt.want)
		}
	}
}

func TestExitCodeOf(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{nil, 0},
		{Errorf(EINVAL, "x"), 2},
		{Errorf(EACCES, "x"), 13},
		{Errorf(ENOKEY, "x"), 69},
		{Errorf(ENOENT, "x"), 1},
		{errors.New("boom"), 70},
		{context.Canceled, 1},
		{syscall.EACCES, 13},
	}
	for _, tt := range tests {
		if got := ExitCodeOf(tt.err); got != tt.want {
			t.Errorf("ExitCodeOf(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}
