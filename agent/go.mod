module github.com/warrenhq/warren/agent

go 1.26.8

replace github.com/warrenhq/warren/api => ../api

require (
	connectrpc.com/connect v1.21.1
	github.com/bmatcuk/doublestar/v4 v4.10.4
	github.com/warrenhq/warren/api v0.0.0
	golang.org/x/net v0.62.0
	golang.org/x/sys v0.49.0
)

require (
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
