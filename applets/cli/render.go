package cli

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
)

// IsTTY reports whether f is a terminal.
func IsTTY(f any) bool {
	file, ok := f.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(file.Fd()), unix.TCGETS)
	return err == nil
}

// TextRenderer prints a canonical stream for humans: deltas as they come,
// tool results and tool calls on their own lines, errors on stderr.
type TextRenderer struct {
	Out, Err io.Writer
	open     bool // a line of deltas is still open
	streamed bool // this run's text arrived as deltas
}

// Emit renders one frame.
func (r *TextRenderer) Emit(e abi.Event) error {
	switch e.Type {
	case abi.EvStart:
		r.streamed = false
	case abi.EvDelta:
		r.open, r.streamed = true, true
		_, err := io.WriteString(r.Out, e.Text)
		return err
	case abi.EvMessage:
		if e.Role == "assistant" && r.streamed {
			return nil
		}
		r.endLine()
		prefix := ""
		if e.Role == "tool" {
			prefix = "[" + e.Name + "] "
		}
		_, err := fmt.Fprintf(r.Out, "%s%s\n", prefix, e.MessageText())
		return err
	case abi.EvToolCall:
		r.endLine()
		_, err := fmt.Fprintf(r.Out, "[tool_call %s %s]\n", e.Name, e.Arguments)
		return err
	case abi.EvError:
		r.endLine()
		fmt.Fprintf(r.Err, "error %s: %s\n", e.Code, e.Message)
	case abi.EvDone:
		r.endLine()
	}
	return nil
}

func (r *TextRenderer) endLine() {
	if r.open {
		io.WriteString(r.Out, "\n")
		r.open = false
	}
}
