package abi

import "strings"

// Class is the object class of a CortexFS object, as it appears in the
// metadata key cortexfs.object and in policy object classes.
type Class string

const (
	ClassModel Class = "model"
	ClassTool  Class = "tool"
	ClassAgent Class = "agent"
)

// Suffixes of the object triple (object-abi.md): name, name.sock, name.d/.
const (
	SockSuffix = ".sock"
	CtlSuffix  = ".d"
)

// SockPath is the socket entry of the object at path.
func SockPath(object string) string { return strings.TrimRight(object, "/") + SockSuffix }

// CtlDir is the control directory of the object at path.
func CtlDir(object string) string { return strings.TrimRight(object, "/") + CtlSuffix }
