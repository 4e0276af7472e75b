// Package inputs opens and checks the files a cbth client hands its
// daemon (--result-file, --metadata-file): the client opens them in its own
// mount view without ever blocking, and the daemon reads only regular,
// bounded files through the descriptor it was given.
package inputs

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
)

// Open opens path for the client. O_NONBLOCK makes a FIFO's open return at
// once instead of waiting for a writer; fstat then refuses anything that is
// not a regular file (EINVAL) and anything over limit bytes (EMSGSIZE).
func Open(path string, limit int64) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, abi.Errorf(abi.FromErrno(err.(unix.Errno)), "%s: %v", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	if _, err := Check(f, limit); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Check verifies f is a regular file of at most limit bytes and returns
// its size.
func Check(f *os.File, limit int64) (int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return 0, abi.Errorf(abi.EINVAL, "%s: fstat: %v", f.Name(), err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return 0, abi.Errorf(abi.EINVAL, "%s is not a regular file (FIFOs, devices, sockets and directories are refused)", f.Name())
	}
	if st.Size > limit {
		return 0, abi.Errorf(abi.EMSGSIZE, "%s is %d bytes, over the %d-byte limit", f.Name(), st.Size, limit)
	}
	return st.Size, nil
}

// Reader returns a reader of f that fails with EMSGSIZE past limit bytes
// (the file may grow after Check).
func Reader(f *os.File, limit int64) io.Reader {
	return &bounded{r: f, left: limit, name: f.Name(), limit: limit}
}

type bounded struct {
	r     io.Reader
	left  int64
	limit int64
	name  string
}

func (b *bounded) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, b.tooBig()
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, b.tooBig()
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return n, abi.Errorf(abi.EIO, "%s: read: %v", b.name, err)
	}
	return n, err
}

func (b *bounded) tooBig() error {
	return abi.Errorf(abi.EMSGSIZE, "%s grew past the %d-byte limit while being read", b.name, b.limit)
}

// ReadAll reads all of f within limit.
func ReadAll(f *os.File, limit int64) ([]byte, error) {
	if _, err := Check(f, limit); err != nil {
		return nil, err
	}
	return io.ReadAll(Reader(f, limit))
}
