package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Sample is a config.ini that changes nothing: every key commented out at
// its default, with what it means. The daemon writes it on first start.
func Sample() []byte {
	var b bytes.Buffer
	b.WriteString(`# cbth configuration. Every key is shown commented out at its default;
# remove the "# " before a key to change it. Windows and TTLs are whole
# seconds. An unknown key or a bad value stops the daemon from starting, with
# its line ("cbth daemon config" checks this file and lists every key).
`)
	def := Default()
	section := ""
	for _, k := range Keys {
		if k.Section != section {
			section = k.Section
			fmt.Fprintf(&b, "\n[%s]\n", section)
		}
		fmt.Fprintf(&b, "# %s (%s)\n# %s = %s\n", k.Doc, k.Unit(), k.Name, k.Value(def))
	}
	return b.Bytes()
}

// WriteSample creates path holding Sample, mode 0600, unless something is
// already there (the user's file is never touched).
func WriteSample(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(Sample()); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	return f.Close()
}
