package artifacts

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"github.com/cortexfs/cortexfs/core/abi"
	"github.com/cortexfs/cortexfs/core/atomicfile"
	"github.com/cortexfs/cortexfs/core/cbth/store"
	"github.com/cortexfs/cortexfs/core/ids"
)

// StageBytes stores data cbth produced itself (a boundary recovery
// payload too large to keep inline) as a new artifact directory under
// root, like Stage does for a job's result file.
func StageBytes(root string, data []byte, name, contentType, jobID string, now time.Time) (*Staged, error) {
	id := ids.New(Prefix)
	st := &Staged{Dir: filepath.Join(root, id)}
	st.Payload, st.ManifestPath = filepath.Join(st.Dir, "payload"), filepath.Join(st.Dir, "manifest.json")
	if err := os.Mkdir(st.Dir, 0o700); err != nil {
		return nil, abi.Errorf(abi.EIO, "artifact dir: %v", err)
	}
	if err := atomicfile.WriteFile(st.Payload, data, 0o600); err != nil {
		os.RemoveAll(st.Dir)
		return nil, abi.Errorf(abi.EIO, "artifact payload: %v", err)
	}
	sum := sha256.Sum256(data)
	st.Manifest = Manifest{ArtifactID: id, SourceJobID: jobID, ContentType: contentType, SizeBytes: int64(len(data)),
		SHA256: hex.EncodeToString(sum[:]), CreatedAt: store.TS(now), OriginalName: name}
	b, _ := json.MarshalIndent(st.Manifest, "", "  ")
	if err := atomicfile.WriteFile(st.ManifestPath, append(b, '\n'), 0o600); err != nil {
		os.RemoveAll(st.Dir)
		return nil, abi.Errorf(abi.EIO, "manifest: %v", err)
	}
	return st, nil
}
