package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/cortexfs/cortexfs/applets"
)

// CompNode is one command path of a table as shell completion sees it.
type CompNode struct {
	Path  []string   // applet first: ["cbth", "job", "submit"]
	Subs  []CompWord // its visible subcommands
	Flags []CompWord // its flags (a group's: --help)
}

// CompWord is a completable word and its one-line description.
type CompWord struct {
	Word, Doc string
	Value     bool // a flag that takes a value
}

// Key is the node's path joined by spaces.
func (n CompNode) Key() string { return strings.Join(n.Path, " ") }

// CompletionNodes walks every table: subcommands from the table, flags by
// running each command with --help and an Env whose Describe receives the
// flag set instead of the help text.
func CompletionNodes(roots []*Cmd) []CompNode {
	var out []CompNode
	for _, r := range roots {
		out = walk(out, r, []string{r.Name})
	}
	return out
}

func walk(out []CompNode, c *Cmd, path []string) []CompNode {
	n := CompNode{Path: append([]string{}, path...)}
	for _, s := range c.Subs {
		if !s.Hidden {
			n.Subs = append(n.Subs, CompWord{Word: s.Name, Doc: s.listing()})
		}
	}
	n.Flags = commandFlags(c, path)
	out = append(out, n)
	for _, s := range c.Subs {
		if !s.Hidden {
			out = walk(out, s, append(path, s.Name))
		}
	}
	return out
}

// commandFlags collects a command's flags (sorted, --help last).
func commandFlags(c *Cmd, path []string) []CompWord {
	var words []CompWord
	seen := map[string]bool{}
	add := func(w CompWord) {
		if !seen[w.Word] {
			seen[w.Word] = true
			words = append(words, w)
		}
	}
	for _, f := range c.Flags {
		name, value := strings.CutSuffix(f, "=")
		add(CompWord{Word: "--" + name, Value: value})
	}
	if c.Run != nil {
		env := &applets.Env{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard, Name: path[0],
			Describe: func(_ string, fs *flag.FlagSet) {
				fs.VisitAll(func(f *flag.Flag) {
					usage := strings.SplitN(f.Usage, "\n", 2)[0]
					add(CompWord{Word: "--" + f.Name, Doc: usage, Value: !IsBoolFlag(f)})
				})
			}}
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // nothing may run for real: only --help is asked
		_ = c.Run(ctx, env, []string{"--help"})
	}
	sort.Slice(words, func(i, j int) bool { return words[i].Word < words[j].Word })
	return append(words, CompWord{Word: "--help", Doc: "show this command's help"})
}

// Completion writes the completion script of shell (bash, zsh or fish) for
// every applet in roots; multiplexer is the name that takes an applet as
// its first argument.
func Completion(w io.Writer, shell, multiplexer string, roots []*Cmd) error {
	nodes := CompletionNodes(roots)
	var names []string
	for _, r := range roots {
		names = append(names, r.Name)
	}
	// After the multiplexer, an applet name is a command too.
	for i := range nodes {
		if nodes[i].Key() == multiplexer {
			for _, r := range roots {
				if r.Name != multiplexer {
					nodes[i].Subs = append(nodes[i].Subs, CompWord{Word: r.Name, Doc: r.Summary})
				}
			}
		}
	}
	switch shell {
	case "bash":
		writeBash(w, multiplexer, names, nodes)
	case "zsh":
		writeZsh(w, multiplexer, names, nodes)
	case "fish":
		writeFish(w, multiplexer, names, nodes)
	default:
		return Usagef("unknown shell %q (bash, zsh or fish)", shell)
	}
	return nil
}

func words(ws []CompWord) string {
	s := make([]string, len(ws))
	for i, w := range ws {
		s[i] = w.Word
	}
	return strings.Join(s, " ")
}

func valued(ws []CompWord) string {
	var s []string
	for _, w := range ws {
		if w.Value {
			s = append(s, w.Word)
		}
	}
	return strings.Join(s, " ")
}

// shellCase writes one case arm per node: `"cbth job") echo '…' ;;`.
func shellCase(w io.Writer, fn string, nodes []CompNode, body func(CompNode) string) {
	fmt.Fprintf(w, "%s() {\n  case \"$1\" in\n", fn)
	for _, n := range nodes {
		if b := body(n); b != "" {
			fmt.Fprintf(w, "    %s) echo %s ;;\n", sq(n.Key()), sq(b))
		}
	}
	fmt.Fprintf(w, "  esac\n}\n")
}

// sq quotes s for sh, bash, zsh and fish alike.
func sq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// pathWalk is the shared sh logic: the command path of the words before
// the cursor (an applet name after the multiplexer starts a new path),
// skipping flags and the values of flags that take one; after "--" no
// more completion of commands or flags.
const bashWalk = `  local path=${COMP_WORDS[0]##*/} i=1 w rest=
  while (( i < COMP_CWORD )); do
    w=${COMP_WORDS[i]}
    if [[ $w == -- ]]; then rest=1
    elif [[ -n $rest ]]; then :
    elif [[ $w == -* ]]; then
      [[ $w != *=* && " $(_cortexfs_valued "$path") " == *" $w "* ]] && (( i++ ))
    elif [[ $path == %[1]s && " %[2]s " == *" $w "* ]]; then path=$w
    elif [[ " $(_cortexfs_subs "$path") " == *" $w "* ]]; then path="$path $w"
    fi
    (( i++ ))
  done
`

func writeBash(w io.Writer, mux string, names []string, nodes []CompNode) {
	fmt.Fprintf(w, "# bash completion for %s and its applets: %s\n", mux, strings.Join(names, " "))
	fmt.Fprintf(w, "# generated by '%s completion bash' from the applets' command tables\n\n", mux)
	shellCase(w, "_cortexfs_subs", nodes, func(n CompNode) string { return words(n.Subs) })
	shellCase(w, "_cortexfs_flags", nodes, func(n CompNode) string { return words(n.Flags) })
	shellCase(w, "_cortexfs_valued", nodes, func(n CompNode) string { return valued(n.Flags) })
	fmt.Fprintf(w, "_cortexfs_complete() {\n")
	fmt.Fprintf(w, bashWalk, mux, strings.Join(names, " "))
	fmt.Fprintf(w, `  local cur=${COMP_WORDS[COMP_CWORD]}
  COMPREPLY=()
  [[ -n $rest ]] && return
  if [[ $cur == -* ]]; then
    COMPREPLY=( $(compgen -W "$(_cortexfs_flags "$path")" -- "$cur") )
  else
    COMPREPLY=( $(compgen -W "$(_cortexfs_subs "$path")" -- "$cur") )
  fi
}
complete -o default -F _cortexfs_complete %s
`, strings.Join(names, " "))
}

func writeZsh(w io.Writer, mux string, names []string, nodes []CompNode) {
	fmt.Fprintf(w, "#compdef %s\n", strings.Join(names, " "))
	fmt.Fprintf(w, "# zsh completion for %s and its applets, generated by '%s completion zsh'\n\n", mux, mux)
	described := func(ws []CompWord) string {
		var lines []string
		for _, x := range ws {
			lines = append(lines, strings.ReplaceAll(x.Word, ":", `\:`)+":"+strings.ReplaceAll(x.Doc, "\n", " "))
		}
		return strings.Join(lines, "\n")
	}
	shellCase(w, "_cortexfs_subs", nodes, func(n CompNode) string { return described(n.Subs) })
	shellCase(w, "_cortexfs_flags", nodes, func(n CompNode) string { return described(n.Flags) })
	shellCase(w, "_cortexfs_valued", nodes, func(n CompNode) string { return valued(n.Flags) })
	fmt.Fprintf(w, `_cortexfs() {
  local path=${words[1]:t} i=2 w rest= subs
  while (( i < CURRENT )); do
    w=${words[i]}
    if [[ $w == -- ]]; then rest=1
    elif [[ -n $rest ]]; then :
    elif [[ $w == -* ]]; then
      [[ $w != *=* && " $(_cortexfs_valued "$path") " == *" $w "* ]] && (( i++ ))
    elif [[ $path == %[1]s && " %[2]s " == *" $w "* ]]; then path=$w
    else
      subs=" ${(j: :)${(@)${(f)"$(_cortexfs_subs "$path")"}%%%%:*}} "
      [[ $subs == *" $w "* ]] && path="$path $w"
    fi
    (( i++ ))
  done
  [[ -n $rest ]] && { _files; return }
  local -a items
  if [[ ${words[CURRENT]} == -* ]]; then
    items=("${(@f)$(_cortexfs_flags "$path")}")
    _describe -t flags flag items
  else
    items=("${(@f)$(_cortexfs_subs "$path")}")
    if (( ${#items} )) && [[ -n ${items[1]} ]]; then _describe -t commands command items; else _files; fi
  fi
}
if [[ $funcstack[1] == _cortexfs ]]; then _cortexfs "$@"; else compdef _cortexfs %[2]s; fi
`, mux, strings.Join(names, " "))
}

func writeFish(w io.Writer, mux string, names []string, nodes []CompNode) {
	fmt.Fprintf(w, "# fish completion for %s and its applets, generated by '%s completion fish'\n\n", mux, mux)
	fmt.Fprintf(w, "function __cortexfs_subs\n  switch $argv[1]\n")
	for _, n := range nodes {
		if len(n.Subs) > 0 {
			fmt.Fprintf(w, "    case %s\n      echo %s\n", sq(n.Key()), sq(words(n.Subs)))
		}
	}
	fmt.Fprintf(w, "  end\nend\n\nfunction __cortexfs_valued\n  switch $argv[1]\n")
	for _, n := range nodes {
		if v := valued(n.Flags); v != "" {
			fmt.Fprintf(w, "    case %s\n      echo %s\n", sq(n.Key()), sq(v))
		}
	}
	fmt.Fprintf(w, `  end
end

# __cortexfs_path prints the command path of the words before the cursor.
function __cortexfs_path
  set -l words (commandline -opc)
  set -l path (string split -r -m1 / -- $words[1])[-1]
  set -l skip 0
  for w in $words[2..-1]
    if test $skip = 1; set skip 0; continue; end
    if test "$w" = --; echo -- "--"; return; end
    if string match -q -- '-*' $w
      if not string match -q -- '*=*' $w; and contains -- $w (string split ' ' -- (__cortexfs_valued $path))
        set skip 1
      end
    else if test "$path" = %[1]s; and contains -- $w %[2]s
      set path $w
    else if contains -- $w (string split ' ' -- (__cortexfs_subs $path))
      set path "$path $w"
    end
  end
  echo -- $path
end

`, mux, strings.Join(names, " "))
	for _, n := range nodes {
		cond := sq("test (__cortexfs_path) = " + sq(n.Key()))
		cmds := "-c " + n.Path[0]
		if n.Path[0] != mux {
			cmds += " -c " + mux
		}
		for _, s := range n.Subs {
			fmt.Fprintf(w, "complete %s -f -n %s -a %s -d %s\n", cmds, cond, sq(s.Word), sq(s.Doc))
		}
		for _, f := range n.Flags {
			r := ""
			if f.Value {
				r = " -r"
			}
			fmt.Fprintf(w, "complete %s -n %s -l %s%s -d %s\n", cmds, cond, sq(strings.TrimPrefix(f.Word, "--")), r, sq(f.Doc))
		}
	}
}
