package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/safefs"
	"github.com/cortexfs/cortexfs/core/tool"
)

// A tool's declared effects (.d/effects, the seed's ToolEffect) are
// honoured here, after authorization and before the tool runs:
//
//   - dry_run = required_before_execute: the tool is first run with
//     --dry-run; if the preview fails, the real run does not happen;
//   - confirmation = always (or on_risk for an irreversible mutating
//     effect): the call needs an explicit approval through the run's
//     Approver (a prompt on the terminal of a one-shot run); with nobody
//     to ask it is refused with EACCES and the reason;
//   - .d/timeout (timeout_secs) replaces the run's default tool timeout;
//     the tool's process group is killed when it expires.
//
// A .d/effects that cannot be read or parsed refuses the call (EACCES): an
// unreadable declaration must not drop a confirmation.

// ApprovalRequest is what an Approver is asked. The runtime in the
// sandbox sends it to the launcher (Host.Approve), which holds the
// terminal, if any.
type ApprovalRequest struct {
	Agent     string          `json:"agent"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Why       string          `json:"why"`               // the effects that need confirmation
	Preview   string          `json:"preview,omitempty"` // the dry run's result, when one ran
}

// Approver answers an approval request: true runs the tool. It is the
// human's decision; model output never reaches it as an answer.
type Approver func(ctx context.Context, req ApprovalRequest) (bool, error)

// toolPlan is what a tool's control files say about running it.
type toolPlan struct {
	effects []tool.Effect
	timeout time.Duration
}

func (a *Agent) planTool(t Tool, def time.Duration) (toolPlan, error) {
	p := toolPlan{timeout: def}
	raw, err := t.readCtlStrict("effects")
	if err != nil {
		return p, abi.Errorf(abi.EACCES, "tool %s: its .d/effects cannot be read, refusing: %v", t.Name, err)
	}
	if p.effects, err = tool.ParseEffects(raw); err != nil {
		return p, abi.Errorf(abi.EACCES, "tool %s: its .d/effects is invalid, refusing: %v", t.Name, err)
	}
	if s := strings.TrimSpace(string(t.ReadCtl("timeout"))); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 || n > 86400 {
			return p, abi.Errorf(abi.EINVAL, "tool %s: .d/timeout %q: want seconds (1 to 86400)", t.Name, s)
		}
		p.timeout = time.Duration(n) * time.Second
	}
	return p, nil
}

// runWithEffects runs a tool the agent may execute, honouring its effects.
func (a *Agent) runWithEffects(ctx context.Context, t Tool, args json.RawMessage, callID string, o RunOptions) (string, error) {
	p, err := a.planTool(t, o.ToolTimeout)
	if err != nil {
		return "", err
	}
	who := ToolCaller{Session: o.Session, Run: o.Run, Ops: o.Host.AgentOp}
	preview := ""
	if tool.DryRunRequired(p.effects) {
		preview, err = a.execTool(ctx, t, args, who, p.timeout, true)
		o.Host.Record(Record{Type: "tool.dry_run", Object: toolObject(t.Name), Status: statusOf(err), Run: o.Run,
			CallID: callID, Code: string(abi.CodeOf(err))})
		if err != nil {
			return "", abi.Errorf(abi.CodeOf(err), "tool %s: its required dry run failed, so it was not run: %v", t.Name, err)
		}
	}
	if need, why := tool.Confirmation(p.effects); need {
		ok, err := a.approve(ctx, o.Host, ApprovalRequest{Agent: a.Name, Tool: t.Name, Arguments: args, Why: why, Preview: preview})
		status := "approved"
		if err != nil || !ok {
			status = "denied"
		}
		o.Host.Record(Record{Type: "tool.approval", Object: toolObject(t.Name), Status: status, Run: o.Run, CallID: callID})
		if err != nil {
			return "", err
		}
		if !ok {
			return "", abi.Errorf(abi.EACCES, "tool %s needs confirmation (%s) and it was declined", t.Name, why)
		}
	}
	return a.execTool(ctx, t, args, who, p.timeout, false)
}

func (a *Agent) approve(ctx context.Context, h Host, req ApprovalRequest) (bool, error) {
	ok, err := h.Approve(ctx, req)
	if err != nil {
		if abi.CodeOf(err) == abi.EACCES {
			return false, err
		}
		return false, abi.Errorf(abi.EACCES, "tool %s needs confirmation (%s) and the approval failed: %v", req.Tool, req.Why, err)
	}
	return ok, nil
}

// nobodyApproves is the answer where no person can be asked.
func nobodyApproves(req ApprovalRequest) error {
	return abi.Errorf(abi.EACCES, "tool %s needs confirmation (%s) and nobody can approve it in this session (no terminal); it was not run", req.Tool, req.Why)
}

// TerminalApprover asks on a terminal: the request is printed to out and
// one line is read from in; "y" or "yes" approves, anything else
// (including end of input) declines. One question at a time.
func TerminalApprover(in io.Reader, out io.Writer) Approver {
	lines := bufio.NewReader(in)
	return func(ctx context.Context, req ApprovalRequest) (bool, error) {
		args := string(req.Arguments)
		if len(args) > 500 {
			args = args[:500] + "…"
		}
		fmt.Fprintf(out, "\nagent %s wants to run tool %s\n  effects: %s\n  arguments: %s\n", req.Agent, req.Tool, req.Why, args)
		if req.Preview != "" {
			p := req.Preview
			if len(p) > 1000 {
				p = p[:1000] + "…"
			}
			fmt.Fprintf(out, "  dry run: %s\n", p)
		}
		fmt.Fprint(out, "allow? [y/N] ")
		type answer struct {
			s   string
			err error
		}
		c := make(chan answer, 1)
		go func() {
			s, err := lines.ReadString('\n')
			c <- answer{s, err}
		}()
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case a := <-c:
			if a.err != nil && a.s == "" {
				return false, nil
			}
			switch strings.ToLower(strings.TrimSpace(a.s)) {
			case "y", "yes":
				return true, nil
			}
			return false, nil
		}
	}
}

// readCtlStrict reads a control file of the tool: missing is empty, any
// other failure an error. It is read as a privileged runtime reads what
// another user may control (core/safefs): no symlink anywhere on the way
// (ELOOP), never blocking on a FIFO, only a regular file, at most
// abi.MaxControlFile bytes (EMSGSIZE).
func (t Tool) readCtlStrict(f string) ([]byte, error) {
	d, err := safefs.OpenRoot(t.Ctl)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer d.Close()
	b, err := d.ReadFile(f, abi.MaxControlFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}
