// Package atomicfile replaces a file's contents atomically and durably, so
// readers see either the old or the new file, never a mix.
package atomicfile
