// Package abi holds the CortexFS vocabulary shared by every applet: names,
// stable errno-style error codes and exit codes, canonical events, object
// paths and the small .d/ control-file formats.
package abi
