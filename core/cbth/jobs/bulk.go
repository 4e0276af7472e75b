package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"io"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
)

// Bulk submit (`cbth job submit --from-jsonl FILE|-`): one JSON object a
// line, each the submit of one job, committed by the daemon in as few
// transactions as its group commit allows and answered line by line.

// MaxBulkLine bounds one input line (a summary is at most 4 KiB and
// metadata 64 KiB; the rest is generous).
const MaxBulkLine = 256 << 10

// MaxBulkItems bounds one bulk request to the daemon; the client sends a
// long input in chunks of BulkChunk lines.
const (
	MaxBulkItems = 4096
	BulkChunk    = 1024
)

// SubmitLine is one input line: the submit's fields as the flags name
// them, a delivery_policy object, and metadata either inline or as a file
// the client reads (never the daemon).
type SubmitLine struct {
	Target         string          `json:"target"`
	ThreadID       string          `json:"thread_id"`
	TaskKind       string          `json:"task_kind"`
	Summary        string          `json:"summary"`
	DedupeKey      string          `json:"dedupe_key,omitempty"`
	MetadataFile   string          `json:"metadata_file,omitempty"`
	Metadata       json.RawMessage `json:"metadata,omitempty"`
	DeliveryPolicy PolicyInput     `json:"delivery_policy"`
}

// ParseSubmitLine decodes one line strictly: one JSON object, known keys
// only, nothing after it. Field values are validated by the daemon.
func ParseSubmitLine(b []byte) (SubmitLine, error) {
	var l SubmitLine
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return SubmitLine{}, abi.Errorf(abi.EINVAL, "want one JSON object of submit fields: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return SubmitLine{}, abi.Errorf(abi.EINVAL, "trailing data after the JSON object")
	}
	if l.MetadataFile != "" && len(l.Metadata) > 0 {
		return SubmitLine{}, abi.Errorf(abi.EINVAL, "give metadata or metadata_file, not both")
	}
	if len(l.Metadata) > 0 && string(l.Metadata) == "null" {
		l.Metadata = nil
	}
	return l, nil
}

// Request turns a line into the request the daemon validates; meta is the
// metadata document (inline, or the content of metadata_file as the
// client read it).
func (l SubmitLine) Request(meta []byte) SubmitRequest {
	return SubmitRequest{TargetKind: l.Target, SourceThreadID: l.ThreadID, TaskKind: l.TaskKind, Summary: l.Summary,
		DedupeKey: l.DedupeKey, MetadataFile: l.MetadataFile, MetadataInline: meta, Policy: l.DeliveryPolicy}
}

// BulkItem is one line sent to the daemon.
type BulkItem struct {
	Line    int           `json:"line"`
	Request SubmitRequest `json:"request"`
}

// BulkRequest is the daemon operation job.submit_many.
type BulkRequest struct {
	Items []BulkItem `json:"items"`
}

// BulkResult is the answer for one line: the seed's minimum of a submit
// answer (job_id, status, accepted_at) or the line's error.
type BulkResult struct {
	Line         int        `json:"line"`
	OK           bool       `json:"ok"`
	JobID        string     `json:"job_id,omitempty"`
	Status       Status     `json:"status,omitempty"`
	AcceptedAt   string     `json:"accepted_at,omitempty"`
	Deduplicated bool       `json:"deduplicated,omitempty"`
	Error        *LineError `json:"error,omitempty"`
}

// LineError is a line's failure with its stable code.
type LineError struct {
	Code    abi.Code `json:"code"`
	Message string   `json:"message"`
}

// LineFailed is the result of a line that failed with err.
func LineFailed(line int, err error) BulkResult {
	return BulkResult{Line: line, Error: &LineError{Code: abi.CodeOf(err), Message: err.Error()}}
}

// Err returns the line's error as an error, nil when it succeeded.
func (r BulkResult) Err() error {
	if r.Error == nil {
		return nil
	}
	return abi.Errorf(r.Error.Code, "%s", r.Error.Message)
}

// SubmitMany submits every item: each is validated on its own, the valid
// ones are inserted each in its own savepoint of shared transactions (a
// line that fails, e.g. a dedupe key bound to another request, undoes only
// itself), and every answer is given only once its transaction is durable.
func (sv *Service) SubmitMany(ctx context.Context, actor audit.Actor, items []BulkItem) ([]BulkResult, error) {
	if len(items) > MaxBulkItems {
		return nil, abi.Errorf(abi.EMSGSIZE, "%d lines in one request; at most %d", len(items), MaxBulkItems)
	}
	results := make([]BulkResult, len(items))
	var fns []func(*delivery.Op) error
	var which []int
	for i, it := range items {
		results[i].Line = it.Line
		p, err := sv.Prepare(it.Request)
		if err != nil {
			results[i] = LineFailed(it.Line, err)
			continue
		}
		r := &results[i]
		which = append(which, i)
		fns = append(fns, func(o *delivery.Op) (err error) {
			r.JobID, r.Deduplicated, err = p.Insert(o)
			r.AcceptedAt = o.At()
			return err
		})
	}
	errs := delivery.RunEach(ctx, sv.Store, sv.Cfg, actor, fns)
	for k, err := range errs {
		r := &results[which[k]]
		if err != nil {
			*r = LineFailed(r.Line, err)
			continue
		}
		r.OK, r.Status = true, Running
		if r.Deduplicated {
			// The earlier job's own state and acceptance time.
			j, err := Get(ctx, sv.Store.DB, r.JobID)
			if err != nil {
				*r = LineFailed(r.Line, err)
				continue
			}
			r.Status, r.AcceptedAt = j.Status, j.AcceptedAt
		}
	}
	return results, nil
}
