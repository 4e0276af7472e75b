package cbth

import (
	"context"
	"fmt"
	"io"

	"github.com/cortexfs/cortexfs/applets"
	"github.com/cortexfs/cortexfs/applets/cli"
	"github.com/cortexfs/cortexfs/core/cbth/audit"
	"github.com/cortexfs/cortexfs/core/cbth/daemon"
	"github.com/cortexfs/cortexfs/core/cbth/delivery"
)

func printBatch(w io.Writer, b *delivery.Batch) {
	if b == nil {
		fmt.Fprintln(w, "no open batch")
		return
	}
	printKV(w, "batch_id", b.BatchID, "source_thread_id", b.SourceThreadID, "state", b.State,
		"replay_policy", b.ReplayPolicy, "job_ids", b.JobIDs, "artifact_ids", b.ArtifactIDs,
		"generation", b.Generation, "delivery_attempt_count", fmt.Sprintf("%d/%d", b.DeliveryAttemptCount, b.MaxDeliveryAttempts),
		"redelivery_window_ends_at", b.RedeliveryWindowEndsAt, "close_reason", b.CloseReason, "closed_at", b.ClosedAt)
	if b.DeliveryBlockedReason != nil {
		printKV(w, "delivery_blocked_reason", *b.DeliveryBlockedReason)
	}
	if a := b.HeadAttempt; a != nil {
		printKV(w, "head_attempt", fmt.Sprintf("%s gen %d %s", a.AttemptID, a.Generation, a.State))
		if a.ManagedSessionID != nil {
			printKV(w, "delivery_turn_id", a.DeliveryTurnID, "managed_session_id", a.ManagedSessionID,
				"session_epoch", derefInt(a.SessionEpoch), "delivery_rpc_state", a.DeliveryRPCState,
				"delivery_observation_state", a.DeliveryObservationState,
				"delivery_observation_deadline", a.DeliveryObservationDeadline, "delivery_accepted_at", a.DeliveryAcceptedAt,
				"last_observed_turn_event", a.LastObservedTurnEvent, "last_observed_turn_event_at", a.LastObservedTurnEventAt)
		}
	}
}

func batchInspectHead(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "batch inspect-head", "cbth batch inspect-head --source-thread-id ID [--json]",
		"Show the thread's head (oldest open) delivery batch and its attempts.")
	var r daemon.ThreadArgs
	c.fs.StringVar(&r.SourceThreadID, "source-thread-id", "", "the thread")
	cli.MarkRequired(c.fs, "source-thread-id")
	_, h, err := c.parse(args, 0)
	if err != nil {
		return c.out().Fail(err)
	}
	var res daemon.HeadResult
	if err := daemon.Call(ctx, h, daemon.OpInspectHead, r, &res); err != nil {
		return c.out().Fail(err)
	}
	return c.out().Result(res, func(w io.Writer) { printBatch(w, res.Batch) })
}

func batchInspect(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "batch inspect", "cbth batch inspect --batch-id ID [--json]",
		"Show any batch by id, closed ones included, with its attempts and recovery fields.")
	id := c.fs.String("batch-id", "", "the batch")
	cli.MarkRequired(c.fs, "batch-id")
	_, h, err := c.parse(args, 0)
	if err != nil {
		return c.out().Fail(err)
	}
	var b delivery.Batch
	if err := daemon.Call(ctx, h, daemon.OpInspect, daemon.IDArgs{ID: *id}, &b); err != nil {
		return c.out().Fail(err)
	}
	return c.out().Result(b, func(w io.Writer) { printBatch(w, &b) })
}

func batchCloseHead(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "batch close-head",
		"cbth batch close-head --source-thread-id ID --reason operator_closed_unconfirmed|operator_confirmed_delivery|superseded [--json]",
		"Close the thread's head batch as an operator; the FIFO moves to the next batch.")
	var r daemon.ThreadArgs
	c.fs.StringVar(&r.SourceThreadID, "source-thread-id", "", "the thread")
	c.fs.StringVar(&r.Reason, "reason", "", "operator_closed_unconfirmed, operator_confirmed_delivery, or superseded (an operator decision that a newer batch replaced it)")
	cli.MarkRequired(c.fs, "source-thread-id", "reason")
	_, h, err := c.parse(args, 0)
	if err != nil {
		return c.out().Fail(err)
	}
	var res daemon.CloseHeadResult
	if err := daemon.Call(ctx, h, daemon.OpCloseHead, r, &res); err != nil {
		return c.out().Fail(err)
	}
	return c.out().Result(res, func(w io.Writer) {
		fmt.Fprintf(w, "outcome %s\n", res.Outcome)
		if res.Batch != nil {
			printBatch(w, res.Batch)
		}
	})
}

func auditList(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "audit list", "cbth audit list [--source-thread-id ID] [--action A] [--limit N] [--json]",
		"Show the newest audit rows (who, from -> to, reason, outcome), oldest first.")
	var f audit.Filter
	c.fs.StringVar(&f.SourceThreadID, "source-thread-id", "", "only this thread")
	c.fs.StringVar(&f.Action, "action", "", "only this action (e.g. ipc.refused)")
	c.fs.StringVar(&f.EntityID, "entity-id", "", "only this job/batch/attempt/task id")
	c.fs.IntVar(&f.Limit, "limit", 100, "at most N rows")
	_, h, err := c.parse(args, 0)
	if err != nil {
		return c.out().Fail(err)
	}
	var rows []audit.Entry
	if err := daemon.Call(ctx, h, daemon.OpAuditList, f, &rows); err != nil {
		return c.out().Fail(err)
	}
	return c.out().Result(rows, func(w io.Writer) {
		for _, e := range rows {
			uid := "-"
			if e.ActorUID != nil {
				uid = fmt.Sprintf("uid=%d pid=%d", *e.ActorUID, *e.ActorPID)
			}
			fmt.Fprintf(w, "%s %-8s %-14s %-20s %s %s->%s %s %s\n", e.At, e.Actor, uid, e.Action, e.EntityID,
				e.From, e.To, e.Outcome, e.Reason)
		}
	})
}

func doctor(ctx context.Context, env *applets.Env, args []string) error {
	c := newCommand(env, "doctor", "cbth doctor [cli] [--home DIR] [--json]",
		`Check home modes (dirs 0700, files 0600), the socket, the daemon and the
store; like every command it starts the daemon (creating a missing home).
Exit 1 if any check fails. cbth doctor cli checks codex for CLI delivery.`)
	_, h, err := c.parse(args, 0)
	if err != nil {
		return c.out().Fail(err)
	}
	r, err := daemon.Doctor(ctx, h)
	if err != nil {
		return c.out().Fail(err)
	}
	if err := c.out().Result(r, func(w io.Writer) {
		for _, ch := range r.Checks {
			mark := "ok  "
			if !ch.OK {
				mark = "FAIL"
			}
			fmt.Fprintf(w, "%s %-36s %s\n", mark, ch.Name, ch.Detail)
		}
	}); err != nil {
		return err
	}
	if !r.OK {
		return exitStatus(1)
	}
	return nil
}

func derefInt(p *int64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}
