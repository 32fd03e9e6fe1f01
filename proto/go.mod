module github.com/collab/collab/proto

go 1.26.8

require (
	github.com/grpc-ecosystem/grpc-gateway/v2 v2.32.0
	github.com/planetscale/vtprotobuf v0.6.1-0.20240319094008-0393e58bdf10
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.13-0.20261016172727-e9ee2a76ab8e
)
