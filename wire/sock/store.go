package sock

import "github.com/cortexfs/cortexfs/core/sockstore"

// The durable session store behind a Server lives in core/sockstore; the
// protocol only needs its interfaces and the two records it passes.
type (
	SessionKey = sockstore.SessionKey
	SendRecord = sockstore.SendRecord
	Store      = sockstore.Store
	Remover    = sockstore.Remover
	Measurer   = sockstore.Measurer
	Log        = sockstore.Log
)
