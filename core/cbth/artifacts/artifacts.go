// Package artifacts is cbth's managed artifact store: job results are
// copied (with sha256 and a manifest) under $CBTH_HOME/artifacts/<id>/ and
// kept per the retention contract (min_artifact_ttl, post_close_ttl,
// operator pin, never while a non-terminal batch refers to them).
package artifacts

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"io"
	"mime"
	"os"
	"path/filepath"
	"time"
	"unicode/utf8"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/atomicfile"
	"github.com/cortexfs/cortexfs/core/cbth/config"
	"github.com/cortexfs/cortexfs/core/cbth/inputs"
	"github.com/cortexfs/cortexfs/core/cbth/store"
	"github.com/cortexfs/cortexfs/core/ids"
)

// Prefix of artifact ids.
const Prefix = "art_"

// Artifact is one row of the artifact store (seed "Artifact 关键字段").
type Artifact struct {
	ArtifactID        string  `json:"artifact_id"`
	SourceJobID       string  `json:"source_job_id"`
	ManagedPath       string  `json:"managed_path"`
	ManifestPath      string  `json:"manifest_path"`
	ContentType       string  `json:"content_type"`
	SizeBytes         int64   `json:"size_bytes"`
	SHA256            string  `json:"sha256"`
	CreatedAt         string  `json:"created_at"`
	MinRetentionUntil string  `json:"min_retention_until"`
	LastBatchClosedAt *string `json:"last_batch_closed_at"`
	OperatorPinUntil  *string `json:"operator_pin_until"`
	GCEligibleAt      *string `json:"gc_eligible_at"`
	RetentionUntil    *string `json:"retention_until"`
	GCAt              *string `json:"gc_at"`
}

// Manifest is manifest.json beside the payload.
type Manifest struct {
	ArtifactID   string `json:"artifact_id"`
	SourceJobID  string `json:"source_job_id"`
	ContentType  string `json:"content_type"`
	SizeBytes    int64  `json:"size_bytes"`
	SHA256       string `json:"sha256"`
	CreatedAt    string `json:"created_at"`
	OriginalName string `json:"original_name"`
}

// Staged is an ingested copy not yet recorded in the store.
type Staged struct {
	Manifest
	Dir, Payload, ManifestPath string
}

// Stage copies src (a descriptor the client opened, or the daemon's own
// file) into a new artifact directory under root, hashing it, and writes
// the manifest; name is the file name the submitter gave. src must be a
// regular file of at most limit bytes (EINVAL, EMSGSIZE). The copy is
// complete and synced before Stage returns, so the caller may delete its
// original as soon as the job is recorded.
func Stage(root string, src *os.File, name, jobID string, now time.Time, limit int64) (*Staged, error) {
	if _, err := inputs.Check(src, limit); err != nil {
		return nil, err
	}
	in := inputs.Reader(src, limit)
	id := ids.New(Prefix)
	st := &Staged{Dir: filepath.Join(root, id)}
	st.Payload, st.ManifestPath = filepath.Join(st.Dir, "payload"), filepath.Join(st.Dir, "manifest.json")
	if err := os.Mkdir(st.Dir, 0o700); err != nil {
		return nil, abi.Errorf(abi.EIO, "artifact dir: %v", err)
	}
	h := sha256.New()
	var head []byte
	var n int64
	err := atomicfile.Write(st.Payload, 0o600, func(w io.Writer) error {
		buf := make([]byte, 64<<10)
		for {
			k, rerr := in.Read(buf)
			if k > 0 {
				if len(head) < 512 {
					head = append(head, buf[:min(k, 512-len(head))]...)
				}
				h.Write(buf[:k])
				n += int64(k)
				if _, werr := w.Write(buf[:k]); werr != nil {
					return werr
				}
			}
			if rerr == io.EOF {
				return nil
			}
			if rerr != nil {
				return rerr
			}
		}
	})
	if err != nil {
		os.RemoveAll(st.Dir)
		if c := abi.CodeOf(err); c == abi.EMSGSIZE || c == abi.EINVAL {
			return nil, err
		}
		return nil, abi.Errorf(abi.EIO, "ingest %s: %v", name, err)
	}
	st.Manifest = Manifest{ArtifactID: id, SourceJobID: jobID, ContentType: contentType(name, head),
		SizeBytes: n, SHA256: hex.EncodeToString(h.Sum(nil)), CreatedAt: store.TS(now), OriginalName: filepath.Base(name)}
	b, _ := json.MarshalIndent(st.Manifest, "", "  ")
	if err := atomicfile.WriteFile(st.ManifestPath, append(b, '\n'), 0o600); err != nil {
		os.RemoveAll(st.Dir)
		return nil, abi.Errorf(abi.EIO, "manifest: %v", err)
	}
	return st, nil
}

// Discard removes a staged copy whose job was not recorded.
func (st *Staged) Discard() { os.RemoveAll(st.Dir) }

func contentType(name string, head []byte) string {
	if t := mime.TypeByExtension(filepath.Ext(name)); t != "" {
		return t
	}
	if utf8.Valid(head) {
		return "text/plain; charset=utf-8"
	}
	return "application/octet-stream"
}

// Insert records a staged artifact in tx.
func Insert(ctx context.Context, tx *sql.Tx, st *Staged, cfg config.Config) error {
	created, _ := store.ParseTS(st.CreatedAt)
	_, err := tx.ExecContext(ctx, `INSERT INTO artifacts(artifact_id, source_job_id, managed_path, manifest_path,
		content_type, size_bytes, sha256, created_at, min_retention_until) VALUES (?,?,?,?,?,?,?,?,?)`,
		st.ArtifactID, st.SourceJobID, st.Payload, st.ManifestPath, st.ContentType, st.SizeBytes, st.SHA256,
		st.CreatedAt, store.TS(created.Add(cfg.MinArtifactTTL)))
	return err
}

// Querier is a *sql.Tx or *sql.DB.
type Querier interface {
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
}

const columns = `artifact_id, source_job_id, managed_path, manifest_path, content_type, size_bytes, sha256,
	created_at, min_retention_until, last_batch_closed_at, operator_pin_until, gc_eligible_at, retention_until, gc_at`

func scan(row interface{ Scan(...any) error }) (Artifact, error) {
	var a Artifact
	err := row.Scan(&a.ArtifactID, &a.SourceJobID, &a.ManagedPath, &a.ManifestPath, &a.ContentType, &a.SizeBytes,
		&a.SHA256, &a.CreatedAt, &a.MinRetentionUntil, &a.LastBatchClosedAt, &a.OperatorPinUntil, &a.GCEligibleAt,
		&a.RetentionUntil, &a.GCAt)
	return a, err
}

// Get loads one artifact.
func Get(ctx context.Context, q Querier, id string) (Artifact, error) {
	a, err := scan(q.QueryRowContext(ctx, `SELECT `+columns+` FROM artifacts WHERE artifact_id = ?`, id))
	if store.IsNoRows(err) {
		return a, abi.Errorf(abi.ENOENT, "no artifact %q", id)
	}
	return a, err
}
