package daemon

import (
	"context"
	"io"
	"path/filepath"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/cbth/home"
	"github.com/cortexfs/cortexfs/core/cbth/inputs"
	"github.com/cortexfs/cortexfs/core/cbth/jobs"
	"github.com/cortexfs/cortexfs/wire/jsonl"
)

// OpJobSubmitMany is the bulk submit of `cbth job submit --from-jsonl`.
const OpJobSubmitMany = "job.submit_many"

// BulkStats counts a bulk submit's lines.
type BulkStats struct {
	Lines, OK, Failed int
	FirstErr          error // the first failed line's error
}

// SubmitJSONL is the client of `cbth job submit --from-jsonl`: it reads
// one submit a line from r, sends them to the daemon in chunks and calls
// emit with each line's result, in input order. A line that does not
// parse, or whose metadata_file cannot be read, fails alone. The error
// returned is the transport's: the chunk in flight was then reported with
// it (its outcome unknown) and nothing after it was read.
func SubmitJSONL(ctx context.Context, h home.Home, r io.Reader, emit func(jobs.BulkResult) error) (BulkStats, error) {
	var st BulkStats
	rd := jsonl.NewReaderSize(r, jobs.MaxBulkLine)
	var chunk []jobs.BulkResult // in line order; items[k] fills chunk[slot[k]]
	var items []jobs.BulkItem
	var slot []int
	flush := func() error {
		var err error
		if len(items) > 0 {
			var res []jobs.BulkResult
			if err = Call(ctx, h, OpJobSubmitMany, jobs.BulkRequest{Items: items}, &res); err == nil && len(res) != len(items) {
				err = abi.Errorf(abi.EPROTO, "daemon answered %d of %d lines", len(res), len(items))
			}
			for k := range items {
				if err != nil {
					chunk[slot[k]] = jobs.LineFailed(items[k].Line, abi.Errorf(abi.CodeOf(err),
						"outcome unknown, the daemon did not answer: %v", err))
				} else {
					chunk[slot[k]] = res[k]
				}
			}
		}
		for _, res := range chunk {
			st.Lines++
			if res.OK {
				st.OK++
			} else {
				st.Failed++
				if st.FirstErr == nil {
					st.FirstErr = res.Err()
				}
			}
			if e := emit(res); e != nil && err == nil {
				err = e
			}
		}
		chunk, items, slot = chunk[:0], items[:0], slot[:0]
		return err
	}
	for {
		frame, err := rd.ReadFrame()
		if err == io.EOF {
			return st, flush()
		}
		if err != nil && (rd.Broken() || abi.CodeOf(err) != abi.EMSGSIZE) {
			if ferr := flush(); ferr != nil {
				return st, ferr
			}
			return st, abi.Errorf(abi.EIO, "reading the input after line %d: %v", rd.Line(), err)
		}
		line := rd.Line()
		var sr jobs.SubmitRequest
		if err == nil {
			sr, err = bulkRequest(frame)
		}
		if err != nil {
			chunk = append(chunk, jobs.LineFailed(line, err))
		} else {
			chunk = append(chunk, jobs.BulkResult{Line: line})
			items = append(items, jobs.BulkItem{Line: line, Request: sr})
			slot = append(slot, len(chunk)-1)
		}
		if len(items) >= jobs.BulkChunk || len(chunk) >= 4*jobs.BulkChunk {
			if err := flush(); err != nil {
				return st, err
			}
		}
	}
}

// bulkRequest parses one line and reads its metadata_file here, in the
// client, with the client's own view and permissions (never blocking,
// regular files only, bounded), as --metadata-file does.
func bulkRequest(frame []byte) (jobs.SubmitRequest, error) {
	l, err := jobs.ParseSubmitLine(frame)
	if err != nil {
		return jobs.SubmitRequest{}, err
	}
	meta := []byte(l.Metadata)
	if l.MetadataFile != "" {
		if l.MetadataFile, err = filepath.Abs(l.MetadataFile); err != nil {
			return jobs.SubmitRequest{}, abi.Errorf(abi.EINVAL, "metadata_file: %v", err)
		}
		f, err := inputs.Open(l.MetadataFile, jobs.MaxMetadata)
		if err != nil {
			return jobs.SubmitRequest{}, err
		}
		meta, err = inputs.ReadAll(f, jobs.MaxMetadata)
		f.Close()
		if err != nil {
			return jobs.SubmitRequest{}, err
		}
		if len(meta) == 0 {
			return jobs.SubmitRequest{}, abi.Errorf(abi.EINVAL, "metadata_file %s is empty", l.MetadataFile)
		}
	}
	return l.Request(meta), nil
}
