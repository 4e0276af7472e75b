// Package sock serves and speaks the CortexFS object socket protocol of
// object-abi.md: JSONL requests in, canonical event frames out, with durable
// per-user sessions behind it.
package sock
