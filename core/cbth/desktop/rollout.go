package desktop

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/cortexfs/core/abi"
)

// Bounds of a rollout scan: a Codex rollout line can be large (the session
// header carries the base instructions), a rollout long.
const (
	MaxRolloutLine  = 4 << 20
	MaxRolloutBytes = 1 << 30
)

// Evidence is what a transcript consumer found in a Codex rollout JSONL
// for one marker. Only an assistant message (a response_item of type
// message, role assistant, output_text content) counts: the marker also
// appears in the bridge's tool output and in derived events, and neither
// is the bridge deciding to ask.
type Evidence struct {
	SessionID     string `json:"session_id"`
	Found         bool   `json:"found"`
	Line          int    `json:"line,omitempty"`
	Timestamp     string `json:"timestamp,omitempty"`
	Item          string `json:"item,omitempty"`
	LinesRead     int    `json:"lines_read"`
	OversizeLines int    `json:"oversize_lines"`
	BadLines      int    `json:"bad_lines"`
}

type rolloutLine struct {
	Timestamp string          `json:"timestamp"`
	Type      string          `json:"type"`
	Payload   json.RawMessage `json:"payload"`
}

type rolloutPayload struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Role    string `json:"role"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

// ScanRollout reads a rollout and looks for marker in assistant messages.
// The session id comes from the first session_meta line; a second
// session_meta naming another session makes the rollout ambiguous
// (EINVAL). Lines longer than MaxRolloutLine and lines that are not JSON
// are skipped and counted, never trusted.
func ScanRollout(r io.Reader, marker string) (Evidence, error) {
	var ev Evidence
	if marker == "" {
		return ev, errInvalid("empty marker")
	}
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, tooLong, err := readLine(br, MaxRolloutLine)
		if len(line) > 0 || tooLong {
			ev.LinesRead++
			if tooLong {
				ev.OversizeLines++
			} else if e := ev.scanLine(line, marker); e != nil {
				return ev, e
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return ev, abi.Errorf(abi.EIO, "rollout: %v", err)
		}
	}
	if ev.SessionID == "" {
		return ev, errInvalid("rollout has no session_meta line: not a Codex rollout")
	}
	return ev, nil
}

func (ev *Evidence) scanLine(line []byte, marker string) error {
	var l rolloutLine
	if json.Unmarshal(line, &l) != nil {
		ev.BadLines++
		return nil
	}
	var p rolloutPayload
	if len(l.Payload) > 0 && json.Unmarshal(l.Payload, &p) != nil {
		ev.BadLines++
		return nil
	}
	switch {
	case l.Type == "session_meta":
		if p.ID == "" {
			ev.BadLines++
			return nil
		}
		if ev.SessionID != "" && ev.SessionID != p.ID {
			return errInvalid("rollout names two sessions (%s, %s)", ev.SessionID, p.ID)
		}
		ev.SessionID = p.ID
	case l.Type == "response_item" && p.Type == "message" && p.Role == "assistant" && !ev.Found:
		for _, c := range p.Content {
			if c.Type == "output_text" && strings.Contains(c.Text, marker) {
				ev.Found, ev.Line, ev.Timestamp, ev.Item = true, ev.LinesRead, l.Timestamp, "response_item/message/assistant"
				break
			}
		}
	}
	return nil
}

// readLine returns the next line without its newline; a line longer than
// max is consumed and reported as tooLong without being kept.
func readLine(br *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	var buf bytes.Buffer
	for {
		chunk, isPrefix, err := br.ReadLine()
		if !tooLong {
			if buf.Len()+len(chunk) > max {
				tooLong = true
				buf.Reset()
			} else {
				buf.Write(chunk)
			}
		}
		if err != nil || !isPrefix {
			if tooLong {
				return nil, true, err
			}
			return buf.Bytes(), false, err
		}
	}
}

// ReadRollout scans the rollout at path as the consumer's own user: the
// path is opened without following a final symlink and without blocking
// (a FIFO is refused), must be a regular file, and at most MaxRolloutBytes
// are read.
func ReadRollout(path, marker string) (Evidence, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return Evidence{}, abi.Errorf(abi.CodeOf(err), "rollout: %v", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return Evidence{}, errInvalid("rollout %s is not a regular file", path)
	}
	return ScanRollout(io.LimitReader(f, MaxRolloutBytes), marker)
}
