package daemon

import (
	"context"
	"fmt"
	"os"

	"github.com/cortexfs/cortexfs/core/cbth/config"
	"github.com/cortexfs/cortexfs/core/cbth/home"
	"github.com/cortexfs/cortexfs/core/cbth/store"
)

// Check is one doctor finding.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// Report is `cbth doctor`.
type Report struct {
	OK     bool    `json:"ok"`
	Home   string  `json:"home"`
	Checks []Check `json:"checks"`
}

func (r *Report) add(name string, err error, okDetail string) {
	c := Check{Name: name, OK: err == nil, Detail: okDetail}
	if err != nil {
		c.Detail = err.Error()
	}
	r.Checks = append(r.Checks, c)
}

// daemon-side checks: store integrity and pragmas.
func (d *Daemon) doctor(ctx context.Context) ([]Check, error) {
	r := &Report{}
	storeChecks(ctx, r, d.Store)
	for _, hook := range doctorHooks {
		r.Checks = append(r.Checks, hook(ctx, d.Store, d.Home, d.Cfg)...)
	}
	return r.Checks, nil
}

func storeChecks(ctx context.Context, r *Report, s *store.Store) {
	res, err := s.Integrity(ctx)
	if err == nil && res != "ok" {
		err = errString("integrity_check: " + res)
	}
	r.add("store integrity", err, "integrity_check ok")
	j, sync, busy, err := s.Pragmas(ctx)
	if err == nil && (j != "wal" || sync != 2 || busy <= 0) {
		err = errString("journal_mode=" + j + " synchronous/busy_timeout not as required")
	}
	r.add("store pragmas", err, "journal_mode=wal synchronous=FULL busy_timeout set")
	v, err := s.Version(ctx)
	if err == nil && v != store.LatestVersion() {
		err = errString("schema version differs from this binary's")
	}
	r.add("store schema", err, "schema at latest version")
}

type errString string

func (e errString) Error() string { return string(e) }

// Doctor checks the home's modes, the socket, the daemon and the store.
// Like every command it starts the daemon (which creates a missing home);
// a daemon that cannot start is a failure that says why, and the store is
// then checked without it.
func Doctor(ctx context.Context, h home.Home) (*Report, error) {
	r := &Report{Home: h.Root}
	var startErr error
	if h.CheckSocketPath() == nil {
		if c, err := Connect(ctx, h); err == nil {
			c.Close()
		} else {
			startErr = err
		}
	}
	_, err := os.Stat(h.Root)
	if err != nil && startErr != nil {
		err = fmt.Errorf("%v; the daemon could not create it: %v", err, startErr)
	}
	r.add("home exists", err, h.Root)
	if err != nil {
		r.OK = false
		return r, nil
	}
	problems, err := h.Audit()
	if err == nil && len(problems) > 0 {
		msg := ""
		for _, p := range problems {
			msg += p.Path + ": " + p.Problem + "; "
		}
		err = errString(msg)
	}
	r.add("home modes (dirs 0700, files 0600)", err, "all private")
	r.add("socket path fits sun_path", h.CheckSocketPath(), fmt.Sprintf("%d bytes", len(h.Socket())))
	sockErr := home.CheckPrivateFile(h.Socket())
	c, dialErr := Dial(ctx, h)
	if dialErr == nil {
		defer c.Close()
		r.add("socket", sockErr, h.Socket()+" owned by us, mode 0600")
		var checks []Check
		err := c.Call(ctx, OpDoctor, nil, &checks)
		r.add("daemon", err, "responding")
		r.Checks = append(r.Checks, checks...)
	} else {
		why := dialErr.Error()
		if startErr != nil {
			why = "cannot start: " + startErr.Error()
		}
		r.Checks = append(r.Checks, Check{Name: "daemon", OK: false, Detail: why})
		if _, err := os.Stat(h.DB()); err == nil {
			s, err := store.Open(ctx, h.DB())
			r.add("store open", err, h.DB())
			if err == nil {
				storeChecks(ctx, r, s)
				if cfg, err := config.Load(h.Config()); err == nil {
					for _, hook := range doctorHooks {
						r.Checks = append(r.Checks, hook(ctx, s, h, cfg)...)
					}
				}
				s.Close()
			}
		}
	}
	r.OK = true
	for _, c := range r.Checks {
		r.OK = r.OK && c.OK
	}
	return r, nil
}
