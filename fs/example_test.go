package fs_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/cortexfs/cortexfs/core/tree"
	"github.com/cortexfs/cortexfs/fs"
)

// A system projection shows the tree as it is, object metadata, control
// files and aliases included, and refuses every write.
func Example() {
	src, _ := os.MkdirTemp("", "cortexfs-src-")
	mnt, _ := os.MkdirTemp("", "cortexfs-mnt-")
	defer os.RemoveAll(src)
	defer os.Remove(mnt)
	if _, err := tree.Init(tree.InitOptions{Root: tree.Root(src), Runner: "/usr/bin/cortexfs-object-runner"}); err != nil {
		fmt.Println(err)
		return
	}
	srv, err := fs.Mount(mnt, fs.Options{Source: src})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Wait()
	defer srv.Unmount(true)

	status, _ := os.ReadFile(filepath.Join(mnt, "model/debug/echo.d/status"))
	fmt.Printf("status: %s", status)
	alias, _ := os.Readlink(filepath.Join(mnt, "model/main"))
	fmt.Println("model/main ->", alias)
	err = os.WriteFile(filepath.Join(mnt, "model/debug/echo.d/status"), []byte("busy\n"), 0o644)
	fmt.Println("write is EROFS:", errors.Is(err, syscall.EROFS))
	// Output:
	// status: ready
	// model/main -> debug/echo
	// write is EROFS: true
}
