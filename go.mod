module github.com/cortexfs/cortexfs

go 1.26.8

require (
	github.com/coder/websocket v1.8.15
	github.com/hanwen/go-fuse/v2 v2.12.1
	github.com/mattn/go-sqlite3 v1.14.53
	github.com/zalando/go-keyring v0.2.8
	golang.org/x/sys v0.49.0
	gopkg.in/ini.v1 v1.67.3
)

require (
	github.com/danieljoos/wincred v1.2.3 // indirect
	github.com/godbus/dbus/v5 v5.2.2 // indirect
)
