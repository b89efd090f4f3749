// Command attestation-vectors computes the canonical attestation bytes of each case on stdin with
// daprd's own code (durabletask-go backend/historysigning at the revision daprd v1.18.2 builds with)
// and prints them as JSON, in the layout of tests/wire/attestation_vectors.json. It signs nothing:
// the payload is built as BuildActivityAttestation / BuildChildAttestation build it, from the case's
// certificate-chain bytes instead of a Sentry identity.
package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"

	"github.com/dapr/durabletask-go/api/protos"
	"github.com/dapr/durabletask-go/backend/historysigning"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

type failure struct {
	Type    string   `json:"type"`
	Message string   `json:"message"`
	Stack   *string  `json:"stack"`
	Inner   *failure `json:"inner"`
}

type vector struct {
	Name             string   `json:"name"`
	Kind             string   `json:"kind"`
	ParentInstanceID string   `json:"parent_instance_id"`
	TaskScheduledID  int32    `json:"task_scheduled_id"`
	ActivityName     string   `json:"activity_name"`
	Input            *string  `json:"input"`
	Status           string   `json:"status"`
	Output           *string  `json:"output"`
	Failure          *failure `json:"failure"`
	FailureDepth     int      `json:"failure_depth"`
	CertChainHex     string   `json:"cert_chain_hex"`
}

type result struct {
	Name     string            `json:"name"`
	Computed map[string]string `json:"computed"`
}

func details(f *failure) *protos.TaskFailureDetails {
	if f == nil {
		return nil
	}
	fd := &protos.TaskFailureDetails{ErrorType: f.Type, ErrorMessage: f.Message, InnerFailure: details(f.Inner)}
	if f.Stack != nil {
		fd.StackTrace = wrapperspb.String(*f.Stack)
	}
	return fd
}

func chain(depth int) *protos.TaskFailureDetails {
	var fd *protos.TaskFailureDetails
	for i := 0; i < depth; i++ {
		fd = &protos.TaskFailureDetails{ErrorType: "E", ErrorMessage: fmt.Sprint(i), InnerFailure: fd}
	}
	return fd
}

func str(s *string) *wrapperspb.StringValue {
	if s == nil {
		return nil
	}
	return wrapperspb.String(*s)
}

func compute(v vector) (map[string]string, error) {
	out := map[string]string{}
	input := historysigning.CanonicalInput(str(v.Input))
	var output []byte
	var err error
	switch v.Status {
	case "COMPLETED":
		output = historysigning.CanonicalSuccessOutput(str(v.Output))
	case "FAILED":
		fd := details(v.Failure)
		if v.FailureDepth > 0 {
			fd = chain(v.FailureDepth)
		}
		output, err = historysigning.CanonicalFailureOutput(fd)
		if err != nil {
			return map[string]string{"error": "failure chain too deep"}, nil
		}
	default:
		return nil, fmt.Errorf("%s: status %q", v.Name, v.Status)
	}
	cert, err := hex.DecodeString(v.CertChainHex)
	if err != nil {
		return nil, err
	}
	io := historysigning.IODigest(input, output)
	var payload proto.Message
	if v.Kind == "activity" {
		status := protos.ActivityTerminalStatus_ACTIVITY_TERMINAL_STATUS_COMPLETED
		if v.Status == "FAILED" {
			status = protos.ActivityTerminalStatus_ACTIVITY_TERMINAL_STATUS_FAILED
		}
		payload = &protos.ActivityCompletionAttestationPayload{
			ParentInstanceId: v.ParentInstanceID, ParentTaskScheduledId: v.TaskScheduledID,
			ActivityName: v.ActivityName, IoDigest: io, SignerCertDigest: historysigning.CertDigest(cert),
			TerminalStatus: status, CanonicalSpecVersion: historysigning.CanonicalSpecVersion,
		}
	} else {
		status := protos.TerminalStatus_TERMINAL_STATUS_COMPLETED
		if v.Status == "FAILED" {
			status = protos.TerminalStatus_TERMINAL_STATUS_FAILED
		}
		payload = &protos.ChildCompletionAttestationPayload{
			ParentInstanceId: v.ParentInstanceID, ParentTaskScheduledId: v.TaskScheduledID,
			IoDigest: io, SignerCertDigest: historysigning.CertDigest(cert),
			TerminalStatus: status, CanonicalSpecVersion: historysigning.CanonicalSpecVersion,
		}
	}
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(payload)
	if err != nil {
		return nil, err
	}
	out["input_hex"] = hex.EncodeToString(input)
	out["output_hex"] = hex.EncodeToString(output)
	out["io_digest_hex"] = hex.EncodeToString(io)
	out["payload_hex"] = hex.EncodeToString(raw)
	out["signature_input_hex"] = hex.EncodeToString(historysigning.PayloadSignatureInput(raw))
	return out, nil
}

func main() {
	var doc struct {
		Vectors []vector `json:"vectors"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&doc); err != nil {
		fmt.Fprintln(os.Stderr, "attestation-vectors: reading the vectors on stdin:", err)
		os.Exit(2)
	}
	results := make([]result, 0, len(doc.Vectors))
	for _, v := range doc.Vectors {
		computed, err := compute(v)
		if err != nil {
			fmt.Fprintln(os.Stderr, "attestation-vectors:", err)
			os.Exit(2)
		}
		results = append(results, result{Name: v.Name, Computed: computed})
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	if err := enc.Encode(map[string]any{"results": results}); err != nil {
		os.Exit(1)
	}
}
