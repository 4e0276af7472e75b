package cbth

import (
	"context"
	"io"

	"github.com/cortexfs/cortexfs/applets"
	"github.com/cortexfs/cortexfs/applets/cli"
	"github.com/cortexfs/cortexfs/core/cbth/daemon"
	"github.com/cortexfs/cortexfs/core/cbth/desktop"
)

func desktopMarkerIssue(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "desktop relay marker issue",
		"cbth desktop relay marker issue --bridge-thread-id B --kind arm-pending|arm-accepted --source-thread-id T "+
			"--attempt-id A --generation G --bridge-request-id R [--json]",
		`Issue a transcript-relay marker: the bridge writes it into its assistant
message, and a consumer outside the Desktop sandbox finds it in the bridge's
rollout (cbth desktop relay consume-transcript) and performs note-arm-pending
(arm-pending) or note-arm (arm-accepted) for request R. Changes no delivery
state.`)
	var r desktop.MarkerRequest
	c.fs.StringVar(&r.BridgeThreadID, "bridge-thread-id", "", "the bridge thread whose rollout will carry the marker")
	c.fs.Func("kind", "arm-pending or arm-accepted", func(s string) error { r.Kind = desktop.MarkerKind(s); return nil })
	c.fs.StringVar(&r.SourceThreadID, "source-thread-id", "", "the caller thread")
	c.fs.StringVar(&r.AttemptID, "attempt-id", "", "the head attempt")
	c.fs.Int64Var(&r.Generation, "generation", 0, "its generation")
	c.fs.StringVar(&r.BridgeRequestID, "bridge-request-id", "", "this bridge wake's owner token")
	cli.MarkRequired(c.fs, "bridge-thread-id", "kind", "source-thread-id", "attempt-id", "generation", "bridge-request-id")
	_, h, err := c.parse(args, 0)
	if err != nil {
		return c.out().Fail(err)
	}
	var res desktop.MarkerResult
	if err := daemon.Call(ctx, h, desktop.OpMarkerIssue, r, &res); err != nil {
		return c.out().Fail(err)
	}
	return outcomeResult(c, res.Outcome, res, func(w io.Writer) {
		printKV(w, "outcome", res.Outcome, "marker", res.Marker, "kind", res.Kind, "expires_at", res.ExpiresAt)
	})
}

func desktopConsumeTranscript(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "desktop relay consume-transcript",
		"cbth desktop relay consume-transcript --rollout-path FILE --marker M [--json]",
		`Read a Codex rollout JSONL (as you, bounded, regular files only), find the
marker in an assistant message of the bridge thread, and perform the CAS it
asks for. Idempotent; transient_not_ready while the marker is not there yet.`)
	var r desktop.ConsumeRequest
	var path string
	c.fs.StringVar(&path, "rollout-path", "", "the bridge thread's rollout-*.jsonl")
	c.fs.StringVar(&r.Marker, "marker", "", "the marker from relay marker issue")
	cli.MarkRequired(c.fs, "rollout-path", "marker")
	_, h, err := c.parse(args, 0)
	if err == nil {
		r.Evidence, err = desktop.ReadRollout(path, r.Marker)
	}
	if err != nil {
		return c.out().Fail(err)
	}
	var res desktop.ConsumeResult
	if err := daemon.Call(ctx, h, desktop.OpConsumeTranscript, r, &res); err != nil {
		return c.out().Fail(err)
	}
	return outcomeResult(c, res.Outcome, res, func(w io.Writer) {
		printKV(w, "outcome", res.Outcome, "kind", res.Kind, "found", res.Evidence.Found, "line", res.Evidence.Line,
			"consumed_at", res.ConsumedAt, "why", res.Why)
		if res.Result != nil {
			printArm(w, res.Result)
		}
	})
}
