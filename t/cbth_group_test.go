package t

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// bulkResult is one line of `cbth job submit --from-jsonl … --json`.
type bulkResult struct {
	Line         int    `json:"line"`
	OK           bool   `json:"ok"`
	JobID        string `json:"job_id"`
	Status       string `json:"status"`
	AcceptedAt   string `json:"accepted_at"`
	Deduplicated bool   `json:"deduplicated"`
	Error        *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func parseBulk(t testing.TB, out string) []bulkResult {
	t.Helper()
	var rs []bulkResult
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r bulkResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("bad result line %q: %v", sc.Text(), err)
		}
		rs = append(rs, r)
	}
	return rs
}

type cbthStatus struct {
	Running      bool  `json:"running"`
	PID          int   `json:"pid"`
	StoreCommits int64 `json:"store_commits"`
	StoreWrites  int64 `json:"store_writes"`
}

// TestCbthBulkSubmit: one result line per input line, in order, with the
// input's own line numbers; bad lines fail alone with stable codes;
// metadata inline or from a file the client reads; results only for
// durable jobs; the lines share commits.
func TestCbthBulkSubmit(t *testing.T) {
	home := cbthHome(t, "")
	dir := t.TempDir()
	meta := filepath.Join(dir, "meta.json")
	os.WriteFile(meta, []byte(`{"delivery_policy":{"read_only":true,"requires_network":false}}`), 0o600)
	lines := []string{
		`{"target":"cli","thread_id":"bulk-a","task_kind":"k","summary":"one"}`,
		``,
		`{"target":"cli","thread_id":"bulk-a","task_kind":"k"}`,
		`not json`,
		`{"target":"cli","thread_id":"bulk-a","task_kind":"k","summary":"two","metadata_file":"` + meta + `"}`,
		`{"target":"cli","thread_id":"bulk-a","task_kind":"k","summary":"three","typo":1}`,
		`{"target":"desktop","thread_id":"bulk-b","task_kind":"k","summary":"four","dedupe_key":"bk",` +
			`"metadata":{"delivery_policy":{"read_only":true}},"delivery_policy":{"read_only":false}}`,
		`{"target":"desktop","thread_id":"bulk-b","task_kind":"k","summary":"four","dedupe_key":"bk",` +
			`"metadata":{"delivery_policy":{"read_only":true}},"delivery_policy":{"read_only":false}}`,
		`{"target":"cli","thread_id":"bulk-c","task_kind":"k","summary":"four","dedupe_key":"bk"}`,
		`{"target":"cli","thread_id":"bulk-a","task_kind":"k","summary":"five","metadata_file":"/dev/null"}`,
		`{"target":"cli","thread_id":"bulk-a","task_kind":"k","summary":"` + strings.Repeat("x", 300<<10) + `"}`,
	}
	for i := 0; i < 1500; i++ { // more than one chunk
		lines = append(lines, fmt.Sprintf(`{"target":"cli","thread_id":"bulk-%d","task_kind":"k","summary":"n%d"}`, i%7, i))
	}
	in := filepath.Join(dir, "in.jsonl")
	os.WriteFile(in, []byte(strings.Join(lines, "\n")), 0o600)

	r := cbth(t, home, "job", "submit", "--from-jsonl", in, "--json")
	if r.code != 2 {
		t.Fatalf("first failed line is EINVAL: want exit 2, got\n%s", r.stderr)
	}
	rs := parseBulk(t, r.stdout)
	if len(rs) != len(lines)-1 {
		t.Fatalf("%d results for %d non-empty lines", len(rs), len(lines)-1)
	}
	want := map[int]string{1: "", 3: "EINVAL", 4: "EINVAL", 5: "", 6: "EINVAL", 7: "", 8: "", 9: "EEXIST", 10: "EINVAL",
		11: "EMSGSIZE"}
	prev := 0
	for _, res := range rs {
		if res.Line <= prev {
			t.Fatalf("results out of order: line %d after %d", res.Line, prev)
		}
		prev = res.Line
		code, named := want[res.Line]
		if !named {
			code = ""
		}
		switch {
		case code == "" && (!res.OK || !strings.HasPrefix(res.JobID, "job_") || res.Status != "running" || res.AcceptedAt == ""):
			t.Errorf("line %d: want a running job, got %+v", res.Line, res)
		case code != "" && (res.OK || res.Error == nil || res.Error.Code != code):
			t.Errorf("line %d: want %s, got %+v", res.Line, code, res)
		}
	}
	byLine := map[int]bulkResult{}
	for _, res := range rs {
		byLine[res.Line] = res
	}
	if !byLine[8].Deduplicated || byLine[8].JobID != byLine[7].JobID {
		t.Errorf("a repeated dedupe key of the same request is the same job: %+v %+v", byLine[7], byLine[8])
	}
	// Every acknowledged line is a stored job, with the policy rules of a
	// single submit (line flags over metadata, metadata over defaults).
	var all []cbthJob
	cbthJSON(t, home, &all, "job", "list", "--limit", "100000")
	if len(all) != 1503 { // lines 1, 5, 7 (8 is 7 again) and the 1500
		t.Errorf("%d jobs stored, want 1503", len(all))
	}
	var two, four cbthJob
	cbthJSON(t, home, &two, "job", "query", byLine[5].JobID)
	cbthJSON(t, home, &four, "job", "query", byLine[7].JobID)
	if !two.ReadOnly || two.Network || two.PolicySources["delivery_read_only"] != "metadata" {
		t.Errorf("metadata_file policy: %+v", two)
	}
	if four.ReadOnly || four.PolicySources["delivery_read_only"] != "flag" {
		t.Errorf("the line's delivery_policy wins over its metadata: %+v", four)
	}
	var st cbthStatus
	cbthJSON(t, home, &st, "daemon", "status")
	if st.StoreCommits >= st.StoreWrites || st.StoreWrites < 1503 {
		t.Errorf("status %+v: the lines should share commits", st)
	}

	// stdin, human output, all good: exit 0 and a summary on stderr.
	r = run(t, runOpts{env: []string{"CBTH_HOME=" + home}, stdin: lines[0] + "\n" + lines[4] + "\n"},
		applet("cbth"), "job", "submit", "--from-jsonl", "-")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "line 1: job_") || !strings.Contains(r.stdout, "line 2: job_") ||
		!strings.Contains(r.stderr, "2 of 2 lines submitted") {
		t.Errorf("stdin:\n%s", r)
	}
	// The lines carry the fields: other submit flags are refused.
	cbthErr(t, home, "EINVAL", 2, "job", "submit", "--from-jsonl", in, "--target", "cli")
	cbthErr(t, home, "ENOENT", 1, "job", "submit", "--from-jsonl", filepath.Join(dir, "missing"))
}

// TestCbthConcurrentSubmits: many clients at once, each answered with its
// own durable job; none lost, none duplicated.
func TestCbthConcurrentSubmits(t *testing.T) {
	home := cbthHome(t, "")
	mustOK(t, cbth(t, home, "daemon", "ensure"))
	const clients, each = 16, 8
	var mu sync.Mutex
	got := map[string]string{} // job id -> dedupe key
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				key := fmt.Sprintf("c%d-%d", c, i)
				var j cbthJob
				cbthJSON(t, home, &j, "job", "submit", "--target", "cli", "--thread-id", fmt.Sprintf("conc-%d", c%4),
					"--task-kind", "k", "--summary", key, "--dedupe-key", key)
				mu.Lock()
				got[j.JobID] = key
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(got) != clients*each {
		t.Fatalf("%d distinct jobs for %d submits", len(got), clients*each)
	}
	var all []struct {
		JobID     string  `json:"job_id"`
		DedupeKey *string `json:"dedupe_key"`
	}
	cbthJSON(t, home, &all, "job", "list", "--limit", "1000")
	for _, j := range all {
		if j.DedupeKey == nil || got[j.JobID] != *j.DedupeKey {
			t.Errorf("stored job %s (key %v) was not answered to anyone", j.JobID, j.DedupeKey)
		}
	}
	if len(all) != clients*each {
		t.Errorf("%d jobs stored, want %d", len(all), clients*each)
	}
	var st cbthStatus
	cbthJSON(t, home, &st, "daemon", "status")
	t.Logf("%d submits in %d commits", st.StoreWrites, st.StoreCommits)
}
