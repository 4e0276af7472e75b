package tool

import "path/filepath"

// DefaultMaxOutput bounds what one tool call returns when Env.MaxOutput is
// not set: fs.read content and each shell.exec stream.
const DefaultMaxOutput = 256 << 10

// Env is what a tool run inherits from its caller besides the arguments.
type Env struct {
	Cwd       string // relative paths in arguments resolve against it; "" means the process cwd
	MaxOutput int    // bytes; 0 or less means DefaultMaxOutput
}

func (e Env) maxOutput() int {
	if e.MaxOutput <= 0 {
		return DefaultMaxOutput
	}
	return e.MaxOutput
}

// resolve makes p absolute against e.Cwd so results name the file the tool
// actually touched, not a path only meaningful in the caller's cwd.
func (e Env) resolve(p string) string {
	if !filepath.IsAbs(p) {
		p = filepath.Join(e.Cwd, p)
	}
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return filepath.Clean(p)
}
