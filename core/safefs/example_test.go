package safefs_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/safefs"
)

// A privileged process creates a user's session directory and a file in it.
// A symlink the user planted on the way is refused, never followed.
func Example() {
	base, _ := os.MkdirTemp("", "safefs-example-")
	defer os.RemoveAll(base)
	os.MkdirAll(filepath.Join(base, "ctx", "home", "1001"), 0o755)
	os.Symlink("/etc", filepath.Join(base, "ctx", "home", "1001", "session"))

	root, err := safefs.OpenRoot(filepath.Join(base, "ctx"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer root.Close()
	_, err = root.MkdirAll("home/1001/session/model/p/m/default", 0o700, safefs.Keep)
	fmt.Println(abi.CodeOf(err))

	dir, err := root.MkdirAll("home/1001/notes", 0o700, safefs.Keep)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer dir.Close()
	fmt.Println(dir.WriteFile("state", []byte("ok\n"), 0o600, safefs.Keep))
	b, err := dir.ReadFile("state", 1<<10)
	fmt.Printf("%q %v\n", b, err)
	// Output:
	// ELOOP
	// <nil>
	// "ok\n" <nil>
}
