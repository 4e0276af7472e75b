// Command cortexfs is one static multi-call binary: the applet that runs is
// chosen by the name it was invoked as (see applets.Resolve).
package main

import (
	"os"

	"github.com/cortexfs/cortexfs/applets/cli"

	// Applets register themselves by name.
	_ "github.com/cortexfs/cortexfs/applets/cbth"
	_ "github.com/cortexfs/cortexfs/applets/cortexfs"
	_ "github.com/cortexfs/cortexfs/applets/cortexfsd"
	_ "github.com/cortexfs/cortexfs/applets/ctx"
	_ "github.com/cortexfs/cortexfs/applets/ctxagent"
	_ "github.com/cortexfs/cortexfs/applets/ctxmount"
	_ "github.com/cortexfs/cortexfs/applets/objrunner"

	// Model drivers register themselves by adapter name.
	_ "github.com/cortexfs/cortexfs/core/model/provider"
)

func main() {
	os.Exit(cli.Main(os.Args))
}
