// Package ns builds agent sandboxes: namespaces, bind mounts, pivot_root or
// chroot, credentials and capabilities, through a re-exec'd init applet.
package ns
