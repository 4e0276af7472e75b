package t

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// submit -> complete (result file deleted afterwards) -> query shows ready
// and the artifact -> inspect-head shows a materialized batch with the job.
func TestCbthSubmitCompleteInspect(t *testing.T) {
	home := cbthHome(t, "[delivery]\nmax_wait_window = 0\n")
	j := submit(t, home, "thread-1")
	if j.Status != "running" || j.JobID == "" || j.AcceptedAt == "" {
		t.Fatalf("submit = %+v", j)
	}
	res := filepath.Join(t.TempDir(), "result.json")
	data := []byte(`{"verdict":"green"}` + "\n")
	os.WriteFile(res, data, 0o644)
	var done cbthJob
	cbthJSON(t, home, &done, "job", "complete", "--job-id", j.JobID, "--summary", "CI green", "--result-file", res)
	if err := os.Remove(res); err != nil {
		t.Fatal(err)
	}
	var q cbthJob
	cbthJSON(t, home, &q, "job", "query", j.JobID)
	sum := sha256.Sum256(data)
	if q.Status != "ready" || q.Artifact == nil || q.Artifact.SHA256 != hex.EncodeToString(sum[:]) ||
		q.Artifact.SizeBytes != int64(len(data)) {
		t.Fatalf("query after complete = %+v", q)
	}
	if got, err := os.ReadFile(q.Artifact.ManagedPath); err != nil || string(got) != string(data) {
		t.Fatalf("managed copy %q %v", got, err)
	}
	b := inspectHead(t, home, "thread-1")
	if b == nil || b.State != "materialized" || !slices.Equal(b.JobIDs, []string{j.JobID}) ||
		!slices.Equal(b.ArtifactIDs, []string{*q.ArtifactID}) || b.HeadAttempt == nil || b.HeadAttempt.State != "prepared" {
		t.Fatalf("inspect-head = %+v", b)
	}
	cbthErr(t, home, "EEXIST", 1, "job", "complete", "--job-id", j.JobID, "--summary", "again")
	cbthErr(t, home, "ENOENT", 1, "job", "query", "job_nope")
	cbthErr(t, home, "EINVAL", 2, "job", "submit", "--target", "web", "--thread-id", "x", "--task-kind", "k", "--summary", "s")
	cbthErr(t, home, "EINVAL", 2, "batch", "close-head", "--source-thread-id", "thread-1", "--reason", "delivered")
}

// Batching limits and FIFO order across three threads.
func TestCbthBatchingFIFOThreeThreads(t *testing.T) {
	home := cbthHome(t, "[delivery]\nmax_wait_window = 30\nmax_jobs_per_batch = 2\n")
	threads := []string{"A", "B", "C"}
	ids := map[string][]string{}
	for i := 0; i < 3; i++ {
		for _, th := range threads {
			j := submit(t, home, th)
			ids[th] = append(ids[th], j.JobID)
		}
	}
	for i := 0; i < 3; i++ { // complete interleaved across threads
		for _, th := range threads {
			mustOK(t, cbth(t, home, "job", "complete", "--job-id", ids[th][i], "--summary", "done"))
		}
	}
	for _, th := range threads {
		h := inspectHead(t, home, th)
		if h == nil || h.State != "materialized" || !slices.Equal(h.JobIDs, ids[th][:2]) || h.SourceThreadID != th {
			t.Fatalf("%s head = %+v, want the first two jobs in order", th, h)
		}
		var third cbthJob
		cbthJSON(t, home, &third, "job", "query", ids[th][2])
		var b2 cbthBatch
		cbthJSON(t, home, &b2, "batch", "inspect", "--batch-id", *third.BatchID)
		if b2.BatchID == h.BatchID || b2.State != "queued" || !slices.Equal(b2.JobIDs, ids[th][2:]) || b2.FirstReadyAt < h.FirstReadyAt {
			t.Fatalf("%s second batch = %+v", th, b2)
		}
		var closed struct {
			Outcome string
			Batch   cbthBatch
		}
		cbthJSON(t, home, &closed, "batch", "close-head", "--source-thread-id", th, "--reason", "operator_confirmed_delivery")
		if closed.Outcome != "success" || closed.Batch.State != "closed" || *closed.Batch.CloseReason != "operator_confirmed_delivery" {
			t.Fatalf("close-head %+v", closed)
		}
		if h2 := inspectHead(t, home, th); h2 == nil || h2.BatchID != b2.BatchID {
			t.Fatalf("%s FIFO did not advance to %s: %+v", th, b2.BatchID, h2)
		}
		var old cbthBatch // closed batches stay inspectable
		cbthJSON(t, home, &old, "batch", "inspect", "--batch-id", h.BatchID)
		if old.State != "closed" {
			t.Errorf("closed batch inspect = %+v", old)
		}
	}
}

func TestCbthDeliveryPolicyNormalization(t *testing.T) {
	home := cbthHome(t, "")
	d := submit(t, home, "P")
	if d.ReadOnly || !d.Approval || !d.Network || !d.Write || d.PolicySources["delivery_read_only"] != "default" {
		t.Fatalf("missing flags did not give the fail-closed defaults: %+v", d)
	}
	meta := filepath.Join(t.TempDir(), "meta.json")
	os.WriteFile(meta, []byte(`{"delivery_policy":{"read_only":true,"requires_approval":false,"requires_network":false,"requires_write_access":false}}`), 0o600)
	m := submit(t, home, "P", "--metadata-file", meta)
	if !m.ReadOnly || m.Approval || m.Network || m.Write {
		t.Fatalf("metadata policy ignored: %+v", m)
	}
	f := submit(t, home, "P", "--metadata-file", meta, "--delivery-read-only", "false", "--delivery-requires-network", "true")
	if f.ReadOnly || f.Approval || !f.Network || f.Write || f.PolicySources["delivery_read_only"] != "flag" ||
		f.PolicySources["delivery_requires_approval"] != "metadata" {
		t.Fatalf("flags did not override metadata: %+v", f)
	}
	a := submit(t, home, "P", "--dedupe-key", "k1")
	b := submit(t, home, "P", "--dedupe-key", "k1")
	if a.JobID != b.JobID {
		t.Errorf("dedupe key gave two jobs %s %s", a.JobID, b.JobID)
	}
	cbthErr(t, home, "EINVAL", 2, "job", "submit", "--target", "cli", "--thread-id", "P", "--task-kind", "k",
		"--summary", "s", "--delivery-read-only", "maybe")
}
