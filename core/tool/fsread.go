package tool

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"syscall"
	"unicode/utf8"

	"github.com/cortexfs/cortexfs/core/abi"
)

var fsReadInput = lit(`{
	"type": "object",
	"properties": {
		"path":   {"type": "string", "minLength": 1, "description": "file to read; relative paths resolve against the caller's cwd"},
		"offset": {"type": "integer", "minimum": 0, "description": "byte offset to start at; default 0"},
		"limit":  {"type": "integer", "minimum": 1, "description": "most bytes to return; default and cap: the caller's output limit (256 KiB unless set)"}
	},
	"required": ["path"],
	"additionalProperties": false
}`)

var fsReadOutput = lit(`{
	"type": "object",
	"properties": {
		"path":    {"type": "string", "description": "the absolute path read"},
		"content": {"type": "string", "description": "UTF-8 text from offset"},
		"offset":  {"type": "integer", "minimum": 0},
		"bytes":   {"type": "integer", "minimum": 0, "description": "bytes of the file in content; read on at offset+bytes"},
		"size":    {"type": "integer", "minimum": 0, "description": "file size when opened"},
		"eof":     {"type": "boolean", "description": "true when content reaches the end of the file"}
	},
	"required": ["path", "content", "offset", "bytes", "size", "eof"],
	"additionalProperties": false
}`)

func fsRead() Builtin {
	return Builtin{
		Name:        "fs.read",
		Description: "Read a UTF-8 text file, or a byte range of it (offset, limit).",
		Schema:      mustSchema(fsReadInput.JSON(), fsReadOutput.JSON()),
		Caps:        []string{"read"},
		Run:         runFSRead,
	}
}

type fsReadArgs struct {
	Path   string   `json:"path"`
	Offset *jsonInt `json:"offset"`
	Limit  *jsonInt `json:"limit"`
}

type fsReadResult struct {
	Path    string `json:"path"`
	Content string `json:"content"`
	Offset  int64  `json:"offset"`
	Bytes   int    `json:"bytes"`
	Size    int64  `json:"size"`
	EOF     bool   `json:"eof"`
}

// runFSRead returns text only: bytes that are not UTF-8 are EINVAL
// ("binary file") rather than base64, so content is always text a model
// can quote back into fs.write.
func runFSRead(ctx context.Context, env Env, args json.RawMessage) (json.RawMessage, error) {
	const name = "fs.read"
	var a fsReadArgs
	if err := decodeArgs(fsReadInput.JSON(), args, &a); err != nil {
		return nil, toolErr(name, err)
	}
	if ctx.Err() != nil {
		return nil, ctxErr(ctx, name)
	}
	limit := int64(env.maxOutput())
	if a.Limit != nil && int64(*a.Limit) < limit {
		limit = int64(*a.Limit)
	}
	var off int64
	if a.Offset != nil {
		off = int64(*a.Offset)
	}
	path := env.resolve(a.Path)

	// O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
	// writer forever, before we can see that it is not a regular file.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, toolErr(name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, toolErr(name, err)
	}
	if fi.IsDir() {
		return nil, abi.Errorf(abi.EINVAL, "%s: %s is a directory", name, path)
	}
	if !fi.Mode().IsRegular() {
		return nil, abi.Errorf(abi.EINVAL, "%s: %s is not a regular file", name, path)
	}

	// One byte past the limit tells whether more follows without trusting
	// the size, which is 0 for /proc files and stale for growing files.
	data, err := io.ReadAll(io.NewSectionReader(f, off, limit+1))
	if err != nil {
		return nil, toolErr(name, err)
	}
	more := int64(len(data)) > limit
	if more {
		data = data[:limit]
	}
	if off > 0 && len(data) > 0 && !utf8.RuneStart(data[0]) {
		return nil, abi.Errorf(abi.EINVAL, "%s: %s: offset %d is inside a UTF-8 character", name, path, off)
	}
	if more {
		// Cut before a character the limit split, so the next read starts
		// on its first byte.
		data = trimPartialRune(data)
		if len(data) == 0 {
			return nil, abi.Errorf(abi.EINVAL, "%s: %s: limit %d is too small for the character at offset %d", name, path, limit, off)
		}
	}
	if !utf8.Valid(data) {
		return nil, abi.Errorf(abi.EINVAL, "%s: %s: binary file; fs.read returns UTF-8 text only (invalid UTF-8 at byte %d)",
			name, path, off+int64(invalidAt(data)))
	}
	return encodeResult(fsReadResult{Path: path, Content: string(data), Offset: off,
		Bytes: len(data), Size: fi.Size(), EOF: !more})
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of b, left
// by a cut at a byte limit. Invalid bytes are kept for the caller to judge.
func trimPartialRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			return b
		}
	}
	return b
}

// invalidAt is the index of the first byte of b that is not valid UTF-8.
func invalidAt(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return len(b)
}
