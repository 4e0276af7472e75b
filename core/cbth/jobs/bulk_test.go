package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/cortexfs/cortexfs/core/abi"
)

func TestParseSubmitLine(t *testing.T) {
	tests := []struct {
		in   string
		want abi.Code // "" = parses
	}{
		{`{"target":"cli","thread_id":"t","task_kind":"k","summary":"s"}`, ""},
		{`{"target":"cli","thread_id":"t","task_kind":"k","summary":"s","metadata":{"a":1}}`, ""},
		{`{"target":"cli","thread_id":"t","task_kind":"k","summary":"s","delivery_policy":{"read_only":true}}`, ""},
		{`{"summary":"s","bogus":1}`, abi.EINVAL},
		{`{"summary":"s"} {"summary":"t"}`, abi.EINVAL},
		{`{"summary":"s"} x`, abi.EINVAL},
		{`[1]`, abi.EINVAL},
		{`{"delivery_policy":{"readonly":true}}`, abi.EINVAL},
		{`{"metadata":{"a":1},"metadata_file":"/x"}`, abi.EINVAL},
		{`{"summary":1}`, abi.EINVAL},
	}
	for _, tt := range tests {
		_, err := ParseSubmitLine([]byte(tt.in))
		if abi.CodeOf(err) != tt.want && !(tt.want == "" && err == nil) {
			t.Errorf("ParseSubmitLine(%s) = %v, want %q", tt.in, err, tt.want)
		}
	}
}

func FuzzParseSubmitLine(f *testing.F) {
	f.Add([]byte(`{"target":"cli","thread_id":"t","task_kind":"k","summary":"s","dedupe_key":"d"}`))
	f.Add([]byte(`{"target":"desktop","thread_id":"t","task_kind":"k","summary":"s","metadata":{"delivery_policy":{"read_only":true}}}`))
	f.Add([]byte(`{"metadata_file":"m.json","delivery_policy":{"requires_network":false}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := ParseSubmitLine(data)
		if err != nil {
			if abi.CodeOf(err) != abi.EINVAL {
				t.Fatalf("non-EINVAL %v", err)
			}
			return
		}
		// What parsed re-encodes to a line that parses to the same.
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseSubmitLine(b)
		if err != nil {
			t.Fatalf("re-encoded line %s: %v", b, err)
		}
		if again.Summary != l.Summary || again.ThreadID != l.ThreadID || again.MetadataFile != l.MetadataFile {
			t.Fatalf("round trip changed %+v into %+v", l, again)
		}
	})
}

func TestSubmitManyLinesFailAlone(t *testing.T) {
	sv, _ := newService(t)
	ctx := context.Background()
	ok := func(thread, summary, dedupe string) SubmitRequest {
		return SubmitRequest{TargetKind: "cli", SourceThreadID: thread, TaskKind: "k", Summary: summary, DedupeKey: dedupe}
	}
	items := []BulkItem{
		{1, ok("t1", "a", "")},
		{2, ok("t1", "", "")},     // invalid: fails in validation
		{3, ok("t1", "b", "key")}, // inserted
		{4, ok("t1", "b", "key")}, // same request: the same job, deduplicated
		{5, ok("t2", "b", "key")}, // the key bound to another request: EEXIST in the transaction
		{7, ok("t1", "c", "")},    // after the failures: still committed
		{8, SubmitRequest{TargetKind: "cli", SourceThreadID: "t1", TaskKind: "k", Summary: "m",
			MetadataInline: json.RawMessage(`{"delivery_policy":{"read_only":true}}`)}},
		{9, SubmitRequest{TargetKind: "cli", SourceThreadID: "t1", TaskKind: "k", Summary: "m",
			MetadataInline: json.RawMessage(`[1]`)}},
	}
	res, err := sv.SubmitMany(ctx, actor, items)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]abi.Code{1: "", 2: abi.EINVAL, 3: "", 4: "", 5: abi.EEXIST, 7: "", 8: "", 9: abi.EINVAL}
	for i, r := range res {
		if r.Line != items[i].Line {
			t.Fatalf("result %d is for line %d", i, r.Line)
		}
		if code := want[r.Line]; r.OK != (code == "") || (code != "" && r.Error.Code != code) {
			t.Errorf("line %d: %+v, want %q", r.Line, r, code)
		}
		if r.OK {
			j, err := Get(ctx, sv.Store.DB, r.JobID)
			if err != nil || j.Status != Running || j.AcceptedAt != r.AcceptedAt {
				t.Errorf("line %d: stored %+v %v, answered %+v", r.Line, j, err, r)
			}
		}
	}
	if !res[3].Deduplicated || res[3].JobID != res[2].JobID {
		t.Errorf("repeated key: %+v vs %+v", res[3], res[2])
	}
	if j, _ := Get(ctx, sv.Store.DB, res[6].JobID); j == nil || !j.ReadOnly || j.MetadataRef != nil {
		t.Errorf("inline metadata: %+v", j)
	}
	var n int
	sv.Store.DB.QueryRow(`SELECT COUNT(*) FROM jobs`).Scan(&n)
	if n != 4 {
		t.Errorf("%d jobs stored, want 4", n)
	}
	var audits int
	sv.Store.DB.QueryRow(`SELECT COUNT(*) FROM audit WHERE action = 'job.submit'`).Scan(&audits)
	if audits != 4 {
		t.Errorf("%d submit audit rows, want 4 (a failed line leaves none)", audits)
	}
}

func TestSubmitManyBounds(t *testing.T) {
	sv, _ := newService(t)
	items := make([]BulkItem, MaxBulkItems+1)
	for i := range items {
		items[i] = BulkItem{Line: i + 1, Request: SubmitRequest{TargetKind: "cli", SourceThreadID: "t", TaskKind: "k",
			Summary: fmt.Sprint(i)}}
	}
	if _, err := sv.SubmitMany(context.Background(), actor, items); abi.CodeOf(err) != abi.EMSGSIZE {
		t.Errorf("too many items: %v", err)
	}
	if _, err := sv.SubmitMany(context.Background(), actor, items[:0]); err != nil {
		t.Errorf("no items: %v", err)
	}
}
