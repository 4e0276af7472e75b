//go:build linux && !amd64 && !arm64

package ns

// No filter is written for this architecture: filterProgram refuses, and
// so does every sandbox (fail closed, never unfiltered).
const (
	auditArch = 0
	x32Bit    = 0
)

var deniedArch []uintptr
