package cbth

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/cortexfs/cortexfs/applets"
	"github.com/cortexfs/cortexfs/applets/cli"
	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/cbth/artifacts"
	"github.com/cortexfs/cortexfs/core/cbth/daemon"
	"github.com/cortexfs/cortexfs/core/cbth/home"
	"github.com/cortexfs/cortexfs/core/cbth/inputs"
	"github.com/cortexfs/cortexfs/core/cbth/jobs"
)

func absPath(p string) (string, error) {
	if p == "" {
		return "", nil
	}
	a, err := filepath.Abs(p)
	if err != nil {
		return "", cli.Usagef("bad path %q: %v", p, err)
	}
	return a, nil
}

// policyFlags adds the four --delivery-* flags.
func policyFlags(c *common) func() jobs.PolicyInput {
	var ro, ap, nw, wr optBool
	c.fs.Var(&ro, "delivery-read-only", "true|false (default false, fail-closed)")
	c.fs.Var(&ap, "delivery-requires-approval", "true|false (default true, fail-closed)")
	c.fs.Var(&nw, "delivery-requires-network", "true|false (default true, fail-closed)")
	c.fs.Var(&wr, "delivery-requires-write-access", "true|false (default true, fail-closed)")
	return func() jobs.PolicyInput {
		return jobs.PolicyInput{ReadOnly: ro.v, RequiresApproval: ap.v, RequiresNetwork: nw.v, RequiresWriteAccess: wr.v}
	}
}

// openInputs opens a file the user named, here in the client (its own
// mount view and permissions), never blocking; the daemon gets the
// descriptor. The daemon applies its own size limit too.
func openInputs(path string, limit int64) ([]*os.File, error) {
	if path == "" {
		return nil, nil
	}
	f, err := inputs.Open(path, limit)
	if err != nil {
		return nil, err
	}
	return []*os.File{f}, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

func printJob(w io.Writer, j *jobs.Job) {
	printKV(w, "job_id", j.JobID, "status", j.Status, "source_thread_id", j.SourceThreadID, "target_kind", j.TargetKind,
		"task_kind", j.TaskKind, "accepted_at", j.AcceptedAt, "ready_at", j.ReadyAt, "artifact_id", j.ArtifactID,
		"batch_id", j.BatchID, "batch_state", j.BatchState)
}

func jobSubmit(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "job submit", "cbth job submit --target cli|desktop --thread-id ID --task-kind K --summary S "+
		"[--metadata-file F] [--dedupe-key K] [--delivery-read-only B] [--delivery-requires-approval B] "+
		"[--delivery-requires-network B] [--delivery-requires-write-access B] [--json]\n"+
		"       cbth job submit --from-jsonl FILE|- [--json]",
		`Submit a job (status running). Delivery policy: explicit flags win over
metadata-file.delivery_policy; anything not given is fail-closed
(read_only=false, requires_approval/network/write_access=true). A repeated
--dedupe-key returns the same job.

--from-jsonl submits one job per input line (- is stdin), a JSON object:
  {"target":"cli","thread_id":"T","task_kind":"K","summary":"S",
   "dedupe_key":"D","delivery_policy":{"read_only":true,...},
   "metadata":{...} or "metadata_file":"PATH"}
(only target, thread_id, task_kind and summary are required; unknown keys
are refused). Each line gets one result line, in input order:
  {"line":N,"ok":true,"job_id":"job_…","status":"running","accepted_at":"…"}
  {"line":N,"ok":false,"error":{"code":"EINVAL","message":"…"}}
(--json; otherwise "line N: …"). A bad line fails alone. Every result is
given only once its job is durable; the daemon commits many lines per
transaction. Exit status: 0 when every line succeeded, else that of the
first failed line's code. If the daemon stops answering, the lines in
flight are reported with the error (outcome unknown) and the rest is not
read: use dedupe keys to make a re-run safe.`)
	var r jobs.SubmitRequest
	c.fs.StringVar(&r.TargetKind, "target", "", "delivery target: cli or desktop")
	c.fs.StringVar(&r.SourceThreadID, "thread-id", "", "the caller thread (source_thread_id)")
	c.fs.StringVar(&r.TaskKind, "task-kind", "", "kind of task")
	c.fs.StringVar(&r.Summary, "summary", "", "one-line summary")
	c.fs.StringVar(&r.MetadataFile, "metadata-file", "", "JSON file; may carry delivery_policy")
	c.fs.StringVar(&r.DedupeKey, "dedupe-key", "", "idempotency key")
	bulk := c.fs.String("from-jsonl", "", "submit one job per JSON line of FILE (- is stdin)")
	pol := policyFlags(c)
	_, h, err := c.parse(args, 0)
	if err == nil && *bulk == "" {
		err = cli.Require(c.fs, "target", "thread-id", "task-kind", "summary")
	}
	if err == nil && *bulk != "" {
		if extra := otherFlags(c, "from-jsonl", "home", "json"); extra != "" {
			return c.out().Fail(usagef("--from-jsonl takes the submit fields from each line, not --%s", extra))
		}
		return submitJSONL(ctx, c, h, *bulk)
	}
	if err == nil {
		r.MetadataFile, err = absPath(r.MetadataFile)
	}
	if err != nil {
		return c.out().Fail(err)
	}
	r.Policy = pol()
	files, err := openInputs(r.MetadataFile, jobs.MaxMetadata)
	if err != nil {
		return c.out().Fail(err)
	}
	defer closeAll(files)
	var j jobs.Job
	if err := daemon.CallFiles(ctx, h, daemon.OpJobSubmit, r, &j, files); err != nil {
		return c.out().Fail(err)
	}
	return c.out().Result(j, func(w io.Writer) { printJob(w, &j) })
}

// otherFlags names a flag that was set other than those allowed.
func otherFlags(c *common, allowed ...string) string {
	var extra string
	c.fs.Visit(func(f *flag.Flag) {
		if extra == "" && !slices.Contains(allowed, f.Name) {
			extra = f.Name
		}
	})
	return extra
}

func submitJSONL(ctx context.Context, c *common, h home.Home, name string) error {
	in := c.env.Stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return c.out().Fail(abi.Errorf(abi.CodeOf(err), "--from-jsonl: %v", err))
		}
		defer f.Close()
		in = f
	}
	w := bufio.NewWriterSize(c.env.Stdout, 64<<10)
	st, err := daemon.SubmitJSONL(ctx, h, in, func(r jobs.BulkResult) error {
		if *c.json {
			return cli.WriteJSON(w, r)
		}
		if r.OK {
			_, err := fmt.Fprintf(w, "line %d: %s %s\n", r.Line, r.JobID, r.Status)
			return err
		}
		_, err := fmt.Fprintf(w, "line %d: %s: %s\n", r.Line, r.Error.Code, r.Error.Message)
		return err
	})
	if ferr := w.Flush(); err == nil && ferr != nil {
		err = abi.Errorf(abi.EIO, "stdout: %v", ferr)
	}
	if err != nil {
		return c.out().Fail(err)
	}
	if !*c.json {
		fmt.Fprintf(c.env.Stderr, "cbth: %d of %d lines submitted\n", st.OK, st.Lines)
	}
	if st.FirstErr != nil {
		return &cli.Reported{Err: st.FirstErr}
	}
	return nil
}

func jobComplete(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "job complete", "cbth job complete --job-id ID --summary S [--result-file P] [--json]",
		`Mark a running job ready. --result-file is copied into the artifact store
(sha256 + manifest); the original may be deleted as soon as this returns.`)
	var r jobs.CompleteRequest
	c.fs.StringVar(&r.JobID, "job-id", "", "the job")
	c.fs.StringVar(&r.Summary, "summary", "", "result summary")
	c.fs.StringVar(&r.ResultFile, "result-file", "", "result file to ingest")
	cli.MarkRequired(c.fs, "job-id", "summary")
	_, h, err := c.parse(args, 0)
	if err == nil {
		r.ResultFile, err = absPath(r.ResultFile)
	}
	if err != nil {
		return c.out().Fail(err)
	}
	files, err := openInputs(r.ResultFile, math.MaxInt64)
	if err != nil {
		return c.out().Fail(err)
	}
	defer closeAll(files)
	var j jobs.Job
	if err := daemon.CallFiles(ctx, h, daemon.OpJobComplete, r, &j, files); err != nil {
		return c.out().Fail(err)
	}
	return c.out().Result(j, func(w io.Writer) { printJob(w, &j) })
}

func jobFail(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "job fail", "cbth job fail --job-id ID --reason R [--json]",
		"Mark a running job failed. Failed jobs are delivered to the caller thread too.")
	var r jobs.FailRequest
	c.fs.StringVar(&r.JobID, "job-id", "", "the job")
	c.fs.StringVar(&r.Reason, "reason", "", "why it failed")
	cli.MarkRequired(c.fs, "job-id", "reason")
	_, h, err := c.parse(args, 0)
	if err != nil {
		return c.out().Fail(err)
	}
	var j jobs.Job
	if err := daemon.Call(ctx, h, daemon.OpJobFail, r, &j); err != nil {
		return c.out().Fail(err)
	}
	return c.out().Result(j, func(w io.Writer) { printJob(w, &j) })
}

func jobCancel(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "job cancel", "cbth job cancel --job-id ID [--reason R] [--json]",
		`Cancel a running job (a supervised task's process group is killed), or
withdraw a ready/failed job whose batch is still queued.`)
	var r jobs.CancelRequest
	c.fs.StringVar(&r.JobID, "job-id", "", "the job")
	c.fs.StringVar(&r.Reason, "reason", "", "why")
	pos, h, err := c.parse(args, -100)
	if err == nil && r.JobID == "" && len(pos) == 1 {
		r.JobID, pos = pos[0], nil
	}
	if err == nil && len(pos) > 0 {
		err = cli.Usagef("unexpected argument %q (%s)", pos[0], cli.Hint(c.fs))
	}
	if err != nil {
		return c.out().Fail(err)
	}
	var j jobs.Job
	if err := daemon.Call(ctx, h, daemon.OpJobCancel, r, &j); err != nil {
		return c.out().Fail(err)
	}
	return c.out().Result(j, func(w io.Writer) { printJob(w, &j) })
}

func jobQuery(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "job query", "cbth job query JOB_ID [--json]", "Show a job, its batch and its artifact.")
	id := c.fs.String("job-id", "", "the job (or give it as the argument)")
	pos, h, err := c.parse(args, -100)
	if err == nil && *id == "" && len(pos) == 1 {
		*id, pos = pos[0], nil
	}
	if err == nil && (len(pos) > 0 || *id == "") {
		err = cli.Usagef("want one JOB_ID (%s)", cli.Hint(c.fs))
	}
	if err != nil {
		return c.out().Fail(err)
	}
	var j daemon.JobView
	if err := daemon.Call(ctx, h, daemon.OpJobQuery, daemon.IDArgs{ID: *id}, &j); err != nil {
		return c.out().Fail(err)
	}
	return c.out().Result(j, func(w io.Writer) {
		printJob(w, j.Job)
		if j.Artifact != nil {
			fmt.Fprintf(w, "%-26s %s (%d bytes, sha256 %s)\n", "artifact", j.Artifact.ManagedPath, j.Artifact.SizeBytes, j.Artifact.SHA256)
		}
		if j.DeliveryBlockedReason != nil {
			printKV(w, "delivery_blocked_reason", *j.DeliveryBlockedReason)
		}
	})
}

func jobList(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "job list", "cbth job list [--source-thread-id ID] [--status S] [--limit N] [--json]",
		"List jobs, newest first.")
	f := jobs.ListFilter{}
	c.fs.StringVar(&f.SourceThreadID, "source-thread-id", "", "only this thread")
	c.fs.StringVar(&f.Status, "status", "", "only running, ready, failed or cancelled jobs")
	c.fs.IntVar(&f.Limit, "limit", 100, "at most N jobs")
	_, h, err := c.parse(args, 0)
	if err != nil {
		return c.out().Fail(err)
	}
	var list []jobs.Job
	if err := daemon.Call(ctx, h, daemon.OpJobList, f, &list); err != nil {
		return c.out().Fail(err)
	}
	return c.out().Result(list, func(w io.Writer) {
		for _, j := range list {
			fmt.Fprintf(w, "%s %-9s %s %s\n", j.JobID, j.Status, j.SourceThreadID, j.TaskSummary)
		}
	})
}

func artifactPin(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "artifact pin", "cbth artifact pin --artifact-id ID (--until TIME | --for DURATION | --clear) [--json]",
		`Set or clear an artifact's operator_pin_until: the artifact is not collected
before it (gc_eligible_at is the latest of created_at + min_artifact_ttl,
last_batch_closed_at + post_close_ttl and the pin), and never while an open
batch refers to it.`)
	var r artifacts.PinRequest
	var dur time.Duration
	c.fs.StringVar(&r.ArtifactID, "artifact-id", "", "the artifact")
	c.fs.StringVar(&r.Until, "until", "", "pin until this RFC 3339 time")
	c.fs.DurationVar(&dur, "for", 0, "pin for this long from now (e.g. 72h)")
	c.fs.BoolVar(&r.Clear, "clear", false, "clear the pin")
	cli.MarkRequired(c.fs, "artifact-id")
	_, h, err := c.parse(args, 0)
	if err == nil && dur != 0 {
		if r.Until != "" || dur < 0 {
			err = usagef("--for takes a positive duration and excludes --until (%s)", cli.Hint(c.fs))
		}
		r.Until = time.Now().Add(dur).UTC().Format(time.RFC3339Nano)
	}
	if err != nil {
		return c.out().Fail(err)
	}
	var a artifacts.Artifact
	if err := daemon.Call(ctx, h, daemon.OpArtifactPin, r, &a); err != nil {
		return c.out().Fail(err)
	}
	return c.out().Result(a, func(w io.Writer) {
		printKV(w, "artifact_id", a.ArtifactID, "operator_pin_until", a.OperatorPinUntil, "gc_eligible_at", a.GCEligibleAt,
			"retention_until", a.RetentionUntil)
	})
}
