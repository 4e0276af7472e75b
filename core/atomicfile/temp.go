package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
)

// createAttempts bounds retries on name collisions, which only a hostile
// or very crowded directory causes.
const createAttempts = 100

// createTemp creates ".<base>.tmp-<random>" in dir, readable and writable
// by the owner only until the caller sets the final mode.
func createTemp(dir, base string) (*os.File, error) {
	var err error
	for range createAttempts {
		name := filepath.Join(dir, "."+base+".tmp-"+strconv.FormatUint(rand.Uint64(), 36))
		// O_EXCL: never open a file someone else placed under our name.
		var f *os.File
		f, err = os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	return nil, fmt.Errorf("atomicfile: failed to create temporary file in %s: %w", dir, err)
}
