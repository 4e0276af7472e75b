module github.com/cortexfs/cortexfs

go 1.26.8
