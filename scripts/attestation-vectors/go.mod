module taskhub-conformance/attestation-vectors

go 1.26

// The durabletask-go revision daprd v1.18.2 builds with (its go.mod): the attestation code under test.
require (
	github.com/dapr/durabletask-go v0.12.2-0.20260720132056-79042da5fe61
	google.golang.org/protobuf v1.36.11
)
