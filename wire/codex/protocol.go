package codex

import (
	"bufio"
	"encoding/json"
	"io"
	"regexp"
	"sync"
)

// Method and notification names cbth uses (codex app-server protocol v2).
const (
	MethodInitialize           = "initialize"
	MethodThreadResume         = "thread/resume"
	MethodThreadRead           = "thread/read"
	MethodThreadTurnsList      = "thread/turns/list"
	MethodThreadSettingsUpdate = "thread/settings/update"
	MethodTurnStart            = "turn/start"
	MethodTurnSteer            = "turn/steer"

	NoteThreadStarted       = "thread/started"
	NoteThreadStatusChanged = "thread/status/changed"
	NoteTurnStarted         = "turn/started"
	NoteTurnCompleted       = "turn/completed"
)

// Turn statuses (TurnStatus).
const (
	TurnCompleted   = "completed"
	TurnInterrupted = "interrupted"
	TurnFailed      = "failed"
	TurnInProgress  = "inProgress"
)

// ClientInfo is InitializeParams.clientInfo.
type ClientInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// InitializeCapabilities is the subset cbth declares.
type InitializeCapabilities struct {
	ExperimentalAPI bool `json:"experimentalApi"`
}

// InitializeParams is the initialize request.
type InitializeParams struct {
	ClientInfo   ClientInfo              `json:"clientInfo"`
	Capabilities *InitializeCapabilities `json:"capabilities,omitempty"`
}

// InitializeResult is the initialize answer.
type InitializeResult struct {
	UserAgent string `json:"userAgent"`
	CodexHome string `json:"codexHome"`
}

// ThreadStatus is a thread's runtime status: notLoaded, idle, systemError
// or active (with activeFlags).
type ThreadStatus struct {
	Type        string   `json:"type"`
	ActiveFlags []string `json:"activeFlags,omitempty"`
}

// UserInput is one text input (UserInput of type text).
type UserInput struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// ThreadItem is the part of a thread item cbth reads: a userMessage carries
// the clientId given as turn/start clientUserMessageId.
type ThreadItem struct {
	Type     string  `json:"type"`
	ID       string  `json:"id"`
	ClientID *string `json:"clientId,omitempty"`
	Text     string  `json:"text,omitempty"` // agentMessage
}

// Turn is a turn (id, status, items).
type Turn struct {
	ID     string          `json:"id"`
	Status string          `json:"status"`
	Items  []ThreadItem    `json:"items"`
	Error  json.RawMessage `json:"error,omitempty"`
	// ItemsView says how much of Items was loaded: notLoaded, summary or
	// full (older servers omit it).
	ItemsView string `json:"itemsView,omitempty"`
}

// Items views of thread/turns/list.
const (
	ItemsFull    = "full"
	ItemsSummary = "summary"
)

// Thread is the part of a thread cbth reads.
type Thread struct {
	ID     string       `json:"id"`
	Cwd    string       `json:"cwd"`
	Path   *string      `json:"path"`
	Status ThreadStatus `json:"status"`
	Turns  []Turn       `json:"turns"`
}

// ThreadResumeParams is thread/resume.
type ThreadResumeParams struct {
	ThreadID     string `json:"threadId"`
	ExcludeTurns bool   `json:"excludeTurns,omitempty"`
}

// ThreadResumeResponse carries the thread's current permissions: the
// approvalPolicy (AskForApproval) and the legacy sandbox (SandboxPolicy),
// kept raw so the adapter parses them strictly.
type ThreadResumeResponse struct {
	Thread         Thread          `json:"thread"`
	ApprovalPolicy json.RawMessage `json:"approvalPolicy"`
	Sandbox        json.RawMessage `json:"sandbox"`
	Cwd            string          `json:"cwd"`
	// ActivePermissionProfile names the profile that produced the
	// permissions, when known (experimental; preferred over sandbox).
	ActivePermissionProfile *PermissionProfileRef `json:"activePermissionProfile,omitempty"`
}

// PermissionProfileRef is ActivePermissionProfile.
type PermissionProfileRef struct {
	ID      string  `json:"id"`
	Extends *string `json:"extends,omitempty"`
}

// ThreadTurnsListParams is thread/turns/list: newest first by default.
type ThreadTurnsListParams struct {
	ThreadID  string `json:"threadId"`
	Limit     int    `json:"limit,omitempty"`
	Cursor    string `json:"cursor,omitempty"`
	ItemsView string `json:"itemsView,omitempty"`
}

// ThreadTurnsListResponse is a page of turns.
type ThreadTurnsListResponse struct {
	Data       []Turn  `json:"data"`
	NextCursor *string `json:"nextCursor"`
}

// ThreadSettingsUpdateParams is thread/settings/update: the thread's
// settings for subsequent turns (a running turn keeps what it started
// with). Permissions (a profile id) and SandboxPolicy exclude each other.
type ThreadSettingsUpdateParams struct {
	ThreadID       string          `json:"threadId"`
	ApprovalPolicy json.RawMessage `json:"approvalPolicy,omitempty"`
	SandboxPolicy  json.RawMessage `json:"sandboxPolicy,omitempty"`
	Permissions    string          `json:"permissions,omitempty"`
}

// TurnSteerParams is turn/steer: input into the active turn, which must be
// ExpectedTurnID.
type TurnSteerParams struct {
	ThreadID            string      `json:"threadId"`
	Input               []UserInput `json:"input"`
	ExpectedTurnID      string      `json:"expectedTurnId"`
	ClientUserMessageID string      `json:"clientUserMessageId,omitempty"`
}

// TurnSteerResponse is turn/steer's answer.
type TurnSteerResponse struct {
	TurnID string `json:"turnId"`
}

// ThreadReadParams is thread/read.
type ThreadReadParams struct {
	ThreadID     string `json:"threadId"`
	IncludeTurns bool   `json:"includeTurns,omitempty"`
}

// ThreadReadResponse is thread/read's answer.
type ThreadReadResponse struct {
	Thread Thread `json:"thread"`
}

// TurnStartParams is turn/start: the pinned approvalPolicy and
// sandboxPolicy travel with every delivery; clientUserMessageId carries
// the correlation marker onto the user message (as its clientId).
type TurnStartParams struct {
	ThreadID            string          `json:"threadId"`
	Input               []UserInput     `json:"input"`
	ClientUserMessageID string          `json:"clientUserMessageId,omitempty"`
	ApprovalPolicy      json.RawMessage `json:"approvalPolicy,omitempty"`
	SandboxPolicy       json.RawMessage `json:"sandboxPolicy,omitempty"`
	// Permissions selects a named permission profile instead of
	// SandboxPolicy (experimental).
	Permissions string `json:"permissions,omitempty"`
}

// TurnStartResponse is turn/start's answer.
type TurnStartResponse struct {
	Turn Turn `json:"turn"`
}

// ThreadStartedNotification is thread/started.
type ThreadStartedNotification struct {
	Thread Thread `json:"thread"`
}

// TurnNotification is turn/started and turn/completed.
type TurnNotification struct {
	ThreadID string `json:"threadId"`
	Turn     Turn   `json:"turn"`
}

// ThreadStatusChangedNotification is thread/status/changed.
type ThreadStatusChangedNotification struct {
	ThreadID string       `json:"threadId"`
	Status   ThreadStatus `json:"status"`
}

// listenRE is compiled on first use, not before main.
var listenRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`listening on: (ws://127\.0\.0\.1:[0-9]+)`) })

// ScanListenURL reads `codex app-server --listen ws://127.0.0.1:0` stderr
// until the "listening on: ws://127.0.0.1:PORT" line and returns the URL;
// the rest of r is left to rest (called with each later line).
func ScanListenURL(r io.Reader, rest func(line string)) (string, bool) {
	sc := bufio.NewScanner(r)
	url := ""
	for sc.Scan() {
		if url == "" {
			if m := listenRE().FindStringSubmatch(sc.Text()); m != nil {
				url = m[1]
				go func() {
					for sc.Scan() {
						if rest != nil {
							rest(sc.Text())
						}
					}
				}()
				return url, true
			}
		}
		if rest != nil {
			rest(sc.Text())
		}
	}
	return "", false
}
