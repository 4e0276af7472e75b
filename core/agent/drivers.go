package agent

// Agents call models through the real provider drivers (openai-chat and
// the others register themselves in core/model/provider).
import _ "github.com/cortexfs/cortexfs/core/model/provider"
