package toolsrc

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/wire/mcpclient"
)

// StartTimeout bounds starting a server and listing its tools (an npx
// download on first use is slow).
var StartTimeout = 90 * time.Second

// mcpSource is one configured MCP server. Warm, it keeps one session open
// and restarts the server with backoff whenever the session ends; its
// tools are relisted on notifications/tools/list_changed.
type mcpSource struct {
	life
	cfg   ServerConfig
	owner Owner

	smu     sync.Mutex
	sess    *mcpclient.Session
	relist  chan struct{}
	cmd     *exec.Cmd
	stderr  *tail
	logf    func(string, ...any)
	startFn func(ctx context.Context) (*mcpclient.Session, *exec.Cmd, error) // tests replace it
}

func newMCPSource(cfg ServerConfig, owner Owner, changed func(), logf func(string, ...any)) *mcpSource {
	s := &mcpSource{life: newLife(changed), cfg: cfg, owner: owner, relist: make(chan struct{}, 1), logf: logf}
	s.startFn = s.dial
	return s
}

func (s *mcpSource) key() string         { return "mcp:" + s.cfg.Name }
func (s *mcpSource) name() string        { return s.cfg.Name }
func (s *mcpSource) prefix() string      { return PrefixMCP }
func (s *mcpSource) kind() string        { return KindMCP }
func (s *mcpSource) fingerprint() string { return s.cfg.Fingerprint() }

func (s *mcpSource) start(warm bool) {
	if s.cfg.Err != nil {
		s.set(StateFailed, s.cfg.Err, 0, nil, true)
		return
	}
	if !warm {
		go s.probe()
		return
	}
	go s.run()
}

// probe lists the tools once (no daemon keeps the server warm).
func (s *mcpSource) probe() {
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	sess, cmd, err := s.startFn(ctx)
	if err != nil {
		s.set(StateNotServed, s.withStderr(err), 0, nil, false)
		return
	}
	specs, err := s.list(ctx, sess)
	s.closeSession(sess, cmd)
	s.set(StateNotServed, err, 0, specs, err == nil)
}

func (s *mcpSource) run() {
	var b backoff
	for !s.stopped() {
		started := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
		sess, cmd, err := s.startFn(ctx)
		var specs []ToolSpec
		if err == nil {
			specs, err = s.list(ctx, sess)
			if err != nil {
				s.closeSession(sess, cmd)
			}
		}
		cancel()
		if err != nil {
			s.set(StateUnavailable, s.withStderr(err), 0, nil, false)
			s.logf("mcp %s: %v", s.cfg.Name, s.withStderr(err))
		} else {
			pid := 0
			if cmd != nil && cmd.Process != nil {
				pid = cmd.Process.Pid
			}
			s.smu.Lock()
			s.sess, s.cmd = sess, cmd
			s.smu.Unlock()
			s.set(StateReady, nil, pid, specs, true)
			s.logf("mcp %s: ready, %d tools (pid %d)", s.cfg.Name, len(specs), pid)
			err = s.serve(sess, pid)
			s.smu.Lock()
			s.sess, s.cmd = nil, nil
			s.smu.Unlock()
			s.closeSession(sess, cmd)
			if s.stopped() {
				return
			}
			s.set(StateUnavailable, s.withStderr(err), 0, nil, false)
			s.logf("mcp %s: %v; restarting", s.cfg.Name, s.withStderr(err))
		}
		if !s.wait(b.next(time.Since(started))) {
			return
		}
		s.restarted()
	}
}

// serve waits for the session to end, relisting on list_changed.
func (s *mcpSource) serve(sess *mcpclient.Session, pid int) error {
	for {
		select {
		case <-s.stopCh:
			return nil
		case <-sess.Done():
			err := sess.Err()
			if err == nil {
				err = abi.Errorf(abi.EHOSTDOWN, "the server closed the session")
			}
			return abi.Errorf(abi.EHOSTDOWN, "server exited: %v", err)
		case <-s.relist:
			ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
			specs, err := s.list(ctx, sess)
			cancel()
			if err != nil {
				s.logf("mcp %s: relist after list_changed: %v", s.cfg.Name, err)
				continue
			}
			s.set(StateReady, nil, pid, specs, true)
			s.logf("mcp %s: tools/list_changed: %d tools", s.cfg.Name, len(specs))
		}
	}
}

func (s *mcpSource) stop() {
	s.life.stop()
	s.smu.Lock()
	sess, cmd := s.sess, s.cmd
	s.smu.Unlock()
	if sess != nil {
		s.closeSession(sess, cmd)
	}
}

// dial starts the configured server and initializes a session.
func (s *mcpSource) dial(ctx context.Context) (*mcpclient.Session, *exec.Cmd, error) {
	opts := mcpclient.Options{OnToolsChanged: s.toolsChanged, Headers: s.cfg.Headers}
	if s.cfg.Transport == TransportHTTP {
		sess, err := mcpclient.DialHTTP(ctx, s.cfg.URL, opts)
		return sess, nil, err
	}
	env := serverEnv(s.owner, s.cfg.Env)
	path, err := lookPathIn(s.cfg.Command, envValue(env, "PATH"))
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(path, s.cfg.Args...)
	cmd.Args[0] = s.cfg.Command
	cmd.Env = env
	cmd.Dir = s.cfg.Cwd
	if cmd.Dir == "" {
		cmd.Dir = "/"
	}
	s.stderr = newTail(4096, s.cfg.Secrets())
	cmd.Stderr = s.stderr
	// Its own process group, so an npx wrapper and the node it starts go
	// together; run as the tier's owner.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: s.owner.Credential()}
	sess, err := mcpclient.DialStdio(ctx, cmd, opts)
	if err != nil {
		killGroup(cmd)
		return nil, nil, err
	}
	return sess, cmd, nil
}

func (s *mcpSource) toolsChanged() {
	select {
	case s.relist <- struct{}{}:
	default:
	}
}

// closeSession ends a session and whatever its server left running.
func (s *mcpSource) closeSession(sess *mcpclient.Session, cmd *exec.Cmd) {
	_ = sess.Close()
	killGroup(cmd)
}

// killGroup ends what a stdio server left behind in its process group.
func killGroup(cmd *exec.Cmd) {
	if cmd != nil && cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

func (s *mcpSource) withStderr(err error) error {
	if err == nil || s.stderr == nil {
		return err
	}
	if t := strings.TrimSpace(s.stderr.String()); t != "" {
		return abi.Errorf(abi.CodeOf(err), "%v (server stderr: %s)", err, oneLine(lastLine(t), 300))
	}
	return err
}

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// list lists the server's tools as specs (every page).
func (s *mcpSource) list(ctx context.Context, sess *mcpclient.Session) ([]ToolSpec, error) {
	tools, err := sess.ListTools(ctx)
	if err != nil {
		return nil, err
	}
	specs := make([]ToolSpec, 0, len(tools))
	for _, t := range tools {
		spec := ToolSpec{Original: t.Name, Description: t.Description, Input: compactJSON(t.InputSchema)}
		if spec.Description == "" {
			spec.Description = t.Title
		}
		if len(t.OutputSchema) > 0 && string(t.OutputSchema) != "null" {
			spec.Output = compactJSON(t.OutputSchema)
		}
		spec.Origin = []abi.KV{{Key: "transport", Value: s.cfg.Transport}}
		if len(t.Annotations) > 0 {
			spec.Origin = append(spec.Origin, abi.KV{Key: "annotations", Value: string(compactJSON(t.Annotations))})
		}
		specs = append(specs, spec)
	}
	return specs, nil
}

func (s *mcpSource) call(ctx context.Context, spec ToolSpec, req CallRequest) (Result, error) {
	if req.DryRun {
		return Result{}, abi.Errorf(abi.ENOTSUP, "MCP tools have no dry run")
	}
	s.smu.Lock()
	sess := s.sess
	s.smu.Unlock()
	if sess == nil {
		st := s.status()
		return Result{}, abi.Errorf(abi.EHOSTDOWN, "MCP server %s is %s: %s", s.cfg.Name, st.State, st.Error)
	}
	res, err := sess.CallTool(ctx, spec.Original, req.Input)
	if err != nil {
		if abi.CodeOf(err) == abi.EHOSTDOWN {
			return Result{}, abi.Errorf(abi.EHOSTDOWN, "MCP server %s went away during the call: %v", s.cfg.Name, err)
		}
		return Result{}, err
	}
	out, err := json.Marshal(struct {
		Content           json.RawMessage `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
		IsError           bool            `json:"isError,omitempty"`
	}{res.Content, res.StructuredContent, res.IsError})
	if err != nil {
		return Result{}, abi.Errorf(abi.EPROTO, "encode result: %v", err)
	}
	return Result{Output: out, IsError: res.IsError}, nil
}

// PassEnv are the daemon's variables a source process gets (besides HOME,
// USER and LOGNAME of the tier's owner and its own configured env): the
// executable search path, locale and time zone. Nothing else crosses: no
// provider key or token the daemon holds.
var PassEnv = []string{"PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_COLLATE", "LC_MESSAGES",
	"LC_NUMERIC", "LC_TIME", "LC_MONETARY", "TZ"}

// serverEnv is a source process's whole environment.
func serverEnv(o Owner, extra map[string]string) []string {
	env := map[string]string{}
	for _, k := range PassEnv {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	if env["PATH"] == "" {
		env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
	}
	env["HOME"], env["USER"], env["LOGNAME"] = o.Home, o.Name, o.Name
	for k, v := range extra {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for _, k := range sortedKeys(env) {
		out = append(out, k+"="+env[k])
	}
	return out
}

func envValue(env []string, k string) string {
	for _, kv := range env {
		if strings.HasPrefix(kv, k+"=") {
			return kv[len(k)+1:]
		}
	}
	return ""
}

// lookPathIn finds file like a shell would with PATH=path (the source's
// PATH, not the daemon's).
func lookPathIn(file, path string) (string, error) {
	if strings.Contains(file, "/") {
		if isExecutable(file) {
			return file, nil
		}
		return "", abi.Errorf(abi.ENOENT, "command %s: not an executable file", trunc(file))
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue // a relative PATH entry would depend on the cwd
		}
		if p := filepath.Join(dir, file); isExecutable(p) {
			return p, nil
		}
	}
	return "", abi.Errorf(abi.ENOENT, "command %q not found in PATH %s", trunc(file), trunc(path))
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// tail keeps the last max bytes written, with the given secrets redacted
// when read.
type tail struct {
	mu      sync.Mutex
	b       []byte
	max     int
	secrets []string
}

func newTail(max int, secrets []string) *tail { return &tail{max: max, secrets: secrets} }

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 2*t.max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	s := string(t.b)
	t.mu.Unlock()
	if len(s) > t.max {
		s = s[len(s)-t.max:]
	}
	return redact(s, t.secrets)
}

// redact replaces every secret value in s.
func redact(s string, secrets []string) string {
	for _, v := range secrets {
		s = strings.ReplaceAll(s, v, "***")
	}
	return s
}
