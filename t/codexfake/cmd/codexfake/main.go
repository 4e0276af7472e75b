// Command codexfake runs the fake Responses API standalone for manual
// debugging: it prints its base URL and a config.toml for CODEX_HOME.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/cortexfs/cortexfs/t/codexfake"
)

func main() {
	project := flag.String("project", "", "a project dir to mark trusted in the printed config.toml")
	kind := flag.String("default", "answer", "default behaviour: answer|fail|slow")
	delay := flag.Duration("delay", 30*time.Second, "slow: hold time")
	flag.Parse()
	s, err := codexfake.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	s.SetDefault(codexfake.Behavior{Kind: codexfake.Kind(*kind), Delay: *delay, Text: "done"})
	var projects []string
	if *project != "" {
		projects = append(projects, *project)
	}
	fmt.Println(s.ConfigTOML(projects...))
	fmt.Fprintln(os.Stderr, "codexfake: serving", s.URL)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt)
	<-ch
	for i, r := range s.Requests() {
		fmt.Fprintf(os.Stderr, "--- request %d %s\n%s\n", i, r.Path, r.Body)
	}
	s.Close()
}
