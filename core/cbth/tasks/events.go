package tasks

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cortexfs/cortexfs/core/abi"
)

// maxFinal bounds the final assistant message kept as a job summary.
const maxFinal = 4000

// EventStream is what a task's canonical event stream (model-abi.md)
// says about the run: its final assistant message, whether it reached
// done and with which status, and the first error frame.
type EventStream struct {
	Final     string
	Done      bool
	Status    string
	ErrCode   abi.Code
	ErrMsg    string
	Frames    int
	Malformed int
}

// Failed reports a run that failed: done with a non-ok status or an error
// frame.
func (s EventStream) Failed() bool {
	return s.ErrCode != "" || s.Done && s.Status != abi.StatusOK
}

// FailureText is "CODE: message" of the failed run.
func (s EventStream) FailureText() string {
	code, msg := s.ErrCode, s.ErrMsg
	if code == "" {
		code = abi.EIO
		msg = "the run ended with status " + s.Status
	}
	return fmt.Sprintf("%s: %s", code, msg)
}

// ParseEventStream reads a spooled event stream. When the spool was
// capped, the frames past the cap are recovered from the true tail (its
// complete lines), so done and error frames at the end are never lost.
func ParseEventStream(path, tail string, truncated bool) EventStream {
	var s EventStream
	var deltas strings.Builder
	if f, err := os.Open(path); err == nil {
		s.read(f, &deltas)
		f.Close()
	}
	if truncated {
		if i := strings.IndexByte(tail, '\n'); i >= 0 {
			s.read(strings.NewReader(tail[i+1:]), &deltas)
		}
	}
	if s.Final == "" {
		s.Final = clipFinal(deltas.String())
	}
	return s
}

func (s *EventStream) read(r io.Reader, deltas *strings.Builder) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if line = bytes.TrimSpace(line); len(line) > 0 {
			s.frame(line, deltas)
		}
		if err != nil {
			return
		}
	}
}

func (s *EventStream) frame(line []byte, deltas *strings.Builder) {
	var e abi.Event
	if len(line) > 1<<20 || json.Unmarshal(line, &e) != nil || e.Type == "" {
		s.Malformed++
		return
	}
	s.Frames++
	switch e.Type {
	case abi.EvStart:
		deltas.Reset()
	case abi.EvDelta:
		if deltas.Len() < 4*maxFinal {
			deltas.WriteString(e.Text)
		}
	case abi.EvMessage:
		if e.Role == "assistant" {
			s.Final = clipFinal(e.MessageText())
			deltas.Reset()
		}
	case abi.EvError:
		if s.ErrCode == "" {
			s.ErrCode, s.ErrMsg = e.Code, e.Message
			if s.ErrCode == "" {
				s.ErrCode = abi.EIO
			}
		}
	case abi.EvDone:
		s.Done, s.Status = true, e.Status
	}
}

// clipFinal keeps the end of a long final message (its conclusion).
func clipFinal(t string) string {
	t = strings.TrimSpace(t)
	if len(t) <= maxFinal {
		return t
	}
	return "…" + clip(t, maxFinal)
}
