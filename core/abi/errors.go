package abi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Code is a stable errno-style error name. Clients compare codes, never
// messages.
type Code string

// The stable codes. The set only grows; a code never changes meaning.
const (
	EACCES       Code = "EACCES"       // permission denied (policy, mode bits, peer credentials)
	EINVAL       Code = "EINVAL"       // bad argument or bad input format
	ENOENT       Code = "ENOENT"       // no such object, model, job, …
	EMSGSIZE     Code = "EMSGSIZE"     // frame larger than the protocol limit
	EHOSTDOWN    Code = "EHOSTDOWN"    // remote provider or peer unreachable / failing
	ECONNREFUSED Code = "ECONNREFUSED" // declared socket, but nobody serves it
	EROFS        Code = "EROFS"        // write to a read-only object or view
	EEXIST       Code = "EEXIST"       // refusing to overwrite something that exists
	EBUSY        Code = "EBUSY"        // resource held or rate-limited; retry later
	ETIMEDOUT    Code = "ETIMEDOUT"    // deadline passed
	ECANCELED    Code = "ECANCELED"    // cancelled by the caller
	ENOKEY       Code = "ENOKEY"       // provider credentials are not configured
	ENOTSUP      Code = "ENOTSUP"      // operation not supported by this object or endpoint
	EPROTO       Code = "EPROTO"       // peer spoke the protocol wrongly (bad frame, bad version)
	EIO          Code = "EIO"          // internal error
	ELOOP        Code = "ELOOP"        // a symlink where none may be followed (privileged walks), or a symlink loop
	ENOSPC       Code = "ENOSPC"       // out of space: a disk, a quota or a per-user limit is full
	EPERM        Code = "EPERM"        // the operation needs a privilege the caller lacks (e.g. iso=uid without root)
	EREMOTEIO    Code = "EREMOTEIO"    // the tool ran and reported an error result (MCP isError, plugin is_error): not a transport failure
)

// Codes lists every stable code, for documentation and tests.
var Codes = []Code{EACCES, EINVAL, ENOENT, EMSGSIZE, EHOSTDOWN, ECONNREFUSED,
	EROFS, EEXIST, EBUSY, ETIMEDOUT, ECANCELED, ENOKEY, ENOTSUP, EPROTO, EIO, ELOOP, ENOSPC, EPERM, EREMOTEIO}

// Process exit codes of object-abi.md ("Exit codes"); cbth uses the same table.
const (
	ExitOK          = 0  // success
	ExitError       = 1  // generic error
	ExitUsage       = 2  // bad arguments or bad input format
	ExitAccess      = 13 // permission denied, maps to EACCES
	ExitUnavailable = 69 // object exists but its runtime is unavailable
	ExitInternal    = 70 // internal error
)

// Exit maps a code to the process-level exit status.
func (c Code) Exit() int {
	switch c {
	case "":
		return ExitOK
	case EINVAL, EMSGSIZE, ELOOP:
		return ExitUsage
	case EACCES, EROFS, EPERM:
		return ExitAccess
	case EHOSTDOWN, ECONNREFUSED, EBUSY, ETIMEDOUT, ENOKEY, ENOTSUP, ENOSPC:
		return ExitUnavailable
	case EIO, EPROTO:
		return ExitInternal
	default: // ENOENT, EEXIST, ECANCELED, EREMOTEIO and anything unknown
		return ExitError
	}
}

// Known reports whether c is one of the stable codes.
func (c Code) Known() bool {
	for _, k := range Codes {
		if k == c {
			return true
		}
	}
	return false
}

// Error is an error carrying a stable code. Message is for humans only.
type Error struct {
	Code    Code
	Message string
	Err     error // optional cause, kept for errors.Is/As
}

func (e *Error) Error() string {
	if e.Message == "" {
		return string(e.Code)
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with code c and a formatted message. A %w verb
// keeps the cause reachable through errors.Is/As.
func Errorf(c Code, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	e := &Error{Code: c, Message: err.Error()}
	// Keep the fmt error as the cause only when it wraps something: with
	// one or several %w verbs it unwraps to every wrapped error.
	if _, multi := err.(interface{ Unwrap() []error }); multi || errors.Unwrap(err) != nil {
		e.Err = err
	}
	return e
}

// CodeOf returns the stable code of err: the code of the first *Error in
// its chain, else a code derived from well-known system errors, else EIO.
// A nil error has the empty code.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		if e.Code == "" {
			return EIO // a coded error without a code is a bug, never success
		}
		return e.Code
	}
	switch {
	case errors.Is(err, context.Canceled):
		return ECANCELED
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return ETIMEDOUT
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return FromErrno(errno)
	}
	switch {
	case errors.Is(err, os.ErrNotExist):
		return ENOENT
	case errors.Is(err, os.ErrPermission):
		return EACCES
	case errors.Is(err, os.ErrExist):
		return EEXIST
	}
	return EIO
}

// FromErrno maps a kernel errno to the stable code set.
func FromErrno(errno syscall.Errno) Code {
	switch errno {
	case syscall.EACCES, syscall.EPERM:
		return EACCES
	case syscall.ENOENT, syscall.ENOTDIR:
		return ENOENT
	case syscall.EINVAL, syscall.ENAMETOOLONG, syscall.E2BIG:
		return EINVAL
	case syscall.EMSGSIZE:
		return EMSGSIZE
	case syscall.EHOSTDOWN, syscall.EHOSTUNREACH, syscall.ENETUNREACH:
		return EHOSTDOWN
	case syscall.ECONNREFUSED:
		return ECONNREFUSED
	case syscall.EROFS:
		return EROFS
	case syscall.EEXIST:
		return EEXIST
	case syscall.EBUSY, syscall.EAGAIN:
		return EBUSY
	case syscall.ETIMEDOUT:
		return ETIMEDOUT
	case syscall.ECANCELED:
		return ECANCELED
	case syscall.ENOKEY:
		return ENOKEY
	case syscall.ENOTSUP, syscall.ENOSYS:
		return ENOTSUP
	case syscall.EPROTO:
		return EPROTO
	case syscall.ELOOP:
		return ELOOP
	case syscall.ENOSPC, syscall.EDQUOT, syscall.EFBIG:
		return ENOSPC
	}
	return EIO
}

// ExitCodeOf is CodeOf(err).Exit().
func ExitCodeOf(err error) int { return CodeOf(err).Exit() }
